"""The fit context: one door for a fit's budget, passes, checkpoints, warnings and progress.

:meth:`fsdask.base.Selector.fit` builds one :class:`FitContext` per fit and hands it to the
method as ``_fit(X, y, ctx)`` (scikit-learn wraps every ``fit`` once in the same way, with
``_fit_context`` in ``sklearn/base.py``).  A method, or the paper algorithm it calls, asks
the context instead of building its own machinery:

* ``ctx.execution`` — the :class:`~fsdask.linalg.execution.Execution` of the fit: the memory
  budget (the estimator's ``memory_budget``, else the dask config key), where arrays live,
  and the count of passes over X (``ctx.passes``, reported as ``n_passes_``);
* ``ctx.iterate(name, state, step, max_iter=, done=)`` — the one driver of an iterative
  loop: it restores the loop's state from a checkpoint, runs ``step``, and saves the state
  on the checkpoint's cadence.  The state is a small dataclass, listed once;
* ``ctx.warn(message)`` — a warning that points at the caller's line, whatever the depth of
  the call inside fsdask;
* ``ctx.log_iteration(it, **values)`` — one progress line per outer iteration.

Only this module constructs an ``Execution`` or opens a checkpoint (``tests/test_layers.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
import warnings
from typing import Any, Callable, Generic, TypeVar

import numpy as np

from fsdask import checkpoint
from fsdask.errors import ConvergenceWarning
from fsdask.linalg.execution import Execution

log = logging.getLogger("fsdask")

S = TypeVar("S")

#: the checkpoint entry that carries the fit's pass count along with a loop's state
_PASSES = "__passes__"
#: and whether ``done`` ended the loop (a loop that hit ``max_iter`` is complete, not finished)
_FINISHED = "__finished__"


@dataclasses.dataclass
class Loop(Generic[S]):
    """What :meth:`FitContext.iterate` returns.

    Attributes
    ----------
    state : dataclass
        The loop's state after its last step (restored as saved when the loop had finished).
    n_iter : int
        Steps taken, the restored ones included.
    finished : bool
        Whether ``done(state)`` became true (False: stopped at ``max_iter``).
    """

    state: S
    n_iter: int
    finished: bool


class FitContext:
    """The context of one fit (see the module docstring).

    Parameters
    ----------
    estimator : Selector
        The estimator being fitted; its parameters and ``method_name`` key the checkpoint.
    memory_budget : int, str or None
        Bytes the fit may hold in memory; None reads the dask config key
        ``fsdask.memory-budget``.

    Attributes
    ----------
    execution : Execution
        The fit's execution decisions and pass count.
    """

    def __init__(self, estimator: Any, memory_budget: Any = None):
        self.estimator = estimator
        self.execution = Execution(memory_budget)
        self.method = getattr(estimator, "method_name", type(estimator).__name__)
        self._data: tuple[Any, Any] | None = None
        self._checkpoint: Any = None
        self._t0 = time.perf_counter()

    # ---- data and passes
    def bind(self, X: Any, y: Any = None) -> FitContext:
        """Name the data the method works on (keys the checkpoint); returns ``self``."""
        self._data = (X, y)
        self._checkpoint = None
        return self

    @property
    def passes(self) -> int:
        """Passes over X so far (sweeps of dask graphs that read it)."""
        return self.execution.passes

    @property
    def budget(self) -> int:
        """The memory budget in bytes."""
        return self.execution.budget

    # ---- checkpoints
    def _slot(self, name: str) -> Any:
        if self._checkpoint is None:
            X, y = self._data if self._data is not None else (np.zeros((0, 0)), None)
            self._checkpoint = checkpoint.for_fit(self.estimator, X, y)
        return self._checkpoint.slot(name)

    def iterate(
        self,
        name: str,
        state: S,
        step: Callable[[S], S],
        *,
        max_iter: int | None = None,
        done: Callable[[S], bool] | None = None,
    ) -> Loop[S]:
        """Run ``state = step(state)`` until ``done(state)`` or ``max_iter`` steps.

        The state (a dataclass; NumPy arrays, numbers, strings, lists, None and NumPy
        ``Generator`` fields) is saved under ``name`` on the checkpoint's cadence, with the
        fit's pass count, and restored from it when the fit is run again — so a killed fit
        continues after its last saved step and gives the result of an uninterrupted one.

        Parameters
        ----------
        name : str
            The loop's checkpoint slot (unique within the fit: ``"qalpha/restart0"``).
        state : dataclass instance
            The state before the first step.
        step : callable
            ``step(state) -> state``: one step; may return the same object, changed.
        max_iter : int, optional
            At most this many steps in all (restored ones included); None: until ``done``.
        done : callable, optional
            ``done(state) -> bool``, tested after each step.

        Returns
        -------
        Loop
            The last state, the number of steps and whether ``done`` ended the loop.
        """
        slot = self._slot(name)
        n_iter, finished, last = 0, False, False
        saved = slot.restore()
        if saved is not None:
            self.execution.passes = int(saved.pop(_PASSES, self.execution.passes))
            finished = bool(saved.pop(_FINISHED, False))
            n_iter, last = int(saved.pop("iteration")), bool(saved.pop("final"))
            state = _restored(state, saved)
        if last:
            return Loop(state, n_iter, finished)

        def save(n: int, s: S, f: bool, final: bool) -> None:
            slot.reached(n, lambda: self._dump(s, f), final=final)

        return _run(state, step, max_iter, done, n_iter, save)

    def _dump(self, state: Any, finished: bool) -> dict[str, Any]:
        out = {f.name: _saved_value(getattr(state, f.name)) for f in dataclasses.fields(state)}
        out[_PASSES], out[_FINISHED] = self.execution.passes, finished
        return out

    # ---- warnings and progress
    def warn(self, message: str, category: type[Warning] = ConvergenceWarning) -> None:
        """Warn at the first frame outside fsdask (the user's ``fit`` call, or a library's)."""
        warnings.warn(message, category, stacklevel=_stacklevel())

    def log_iteration(self, it: int, **values: Any) -> None:
        """One line per outer iteration on the ``fsdask`` logger (INFO; the CLI's ``-v``).

        ``ctx.log_iteration(t, objective=f, change=delta)`` logs the paper's quantities and
        the time since the fit started.
        """
        if not log.isEnabledFor(logging.INFO):
            return
        parts = ", ".join(
            f"{k}={v:.6g}" if isinstance(v, (float, np.floating)) else f"{k}={v}"
            for k, v in values.items()
        )
        elapsed = time.perf_counter() - self._t0
        log.info("%s: iteration %d: %s (%.1f s)", self.method, it, parts, elapsed)


def iterate(
    name: str,
    state: S,
    step: Callable[[S], S],
    *,
    max_iter: int | None = None,
    done: Callable[[S], bool] | None = None,
    ctx: FitContext | None = None,
) -> Loop[S]:
    """The loop of a paper algorithm that is called inside a fit or on its own.

    With a ``ctx`` this is :meth:`FitContext.iterate` (checkpointed); without one the same
    steps run and nothing is saved — for the public core functions users call directly.

    Parameters
    ----------
    name, state, step, max_iter, done
        As in :meth:`FitContext.iterate`.
    ctx : FitContext, optional
        The fit the loop belongs to.

    Returns
    -------
    Loop
    """
    if ctx is not None:
        return ctx.iterate(name, state, step, max_iter=max_iter, done=done)
    return _run(state, step, max_iter, done, 0, None)


def _run(
    state: S,
    step: Callable[[S], S],
    max_iter: int | None,
    done: Callable[[S], bool] | None,
    n_iter: int,
    save: Callable[[int, S, bool, bool], None] | None,
) -> Loop[S]:
    """Steps from ``n_iter`` on until ``done`` or ``max_iter``; ``save(n, state, finished,
    final)`` after each step."""
    if max_iter is None and done is None:
        raise TypeError("iterate needs max_iter or done, or it never ends")
    finished, last = False, max_iter is not None and n_iter >= max_iter
    while not last:
        state = step(state)
        n_iter += 1
        finished = bool(done(state)) if done is not None else False
        last = finished or (max_iter is not None and n_iter >= max_iter)
        if save is not None:
            save(n_iter, state, finished, last)
    return Loop(state, n_iter, finished)


# --------------------------------------------------------------------------- state I/O
def _saved_value(value: Any) -> Any:
    """A state field as the checkpoint stores it (a Generator by its exact state)."""
    if isinstance(value, np.random.Generator):
        return checkpoint.rng_state(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _restored(initial: Any, saved: dict[str, Any]) -> Any:
    """``initial`` with the saved fields put back, each in the kind of its initial value."""
    changes = {}
    for f in dataclasses.fields(initial):
        if f.name not in saved:
            continue
        old, new = getattr(initial, f.name), saved[f.name]
        if isinstance(old, np.random.Generator):
            rng = np.random.default_rng()
            checkpoint.set_rng_state(rng, new)
            new = rng
        elif isinstance(old, np.ndarray):
            new = np.asarray(new, dtype=old.dtype)
        elif isinstance(old, tuple):
            new = tuple(new)
        elif isinstance(old, list):
            new = list(np.asarray(new).tolist()) if isinstance(new, np.ndarray) else list(new)
        elif isinstance(old, (bool, np.bool_)):
            new = bool(new)
        elif isinstance(old, (int, np.integer)) and not isinstance(new, np.ndarray):
            new = int(new)
        elif isinstance(old, (float, np.floating)) and not isinstance(new, np.ndarray):
            new = float(new)
        changes[f.name] = new
    return dataclasses.replace(initial, **changes)


def _stacklevel() -> int:
    """The ``stacklevel`` that points ``warnings.warn`` (called from :meth:`FitContext.warn`)
    at the first frame outside the fsdask package."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "fsdask":
        frame, level = frame.f_back, level + 1
    return level
