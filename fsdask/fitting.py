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
* ``ctx.log_iteration(it, **values)`` — one progress line per outer iteration, with the
  time left until the loop's ``max_iter`` at the pace so far (a loop that stops itself,
  by ``done``, names its bound by the estimator's ``progress_bound``: the name of the
  parameter that caps its outer iterations, e.g. Logo's ``"max_iter"``).

Progress lines (:func:`progress_line`) are INFO records of the ``fsdask`` logger; inside
:func:`progress_lines`, which ``fsdask select`` enters unless ``-q``/``--no-progress``, they
are printed on stderr as well, whatever the log level, so a long fit is never silent.

Only this module constructs an ``Execution`` or opens a checkpoint (``tests/test_layers.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import sys
import time
import warnings
from typing import Any, Callable, Generic, Iterator, TextIO, TypeVar

import numpy as np

from fsdask import checkpoint
from fsdask.cluster import current_workers
from fsdask.errors import ConvergenceWarning, InputError
from fsdask.linalg.execution import Execution

log = logging.getLogger("fsdask")

S = TypeVar("S")

#: the checkpoint entry that carries the fit's pass count along with a loop's state
_PASSES = "__passes__"
#: and whether ``done`` ended the loop (a loop that hit ``max_iter`` is complete, not finished)
_FINISHED = "__finished__"

#: seconds between two iteration lines inside :func:`progress_lines` (the first is always shown)
PROGRESS_EVERY = 5.0
#: the attribute of the log records :func:`progress_lines` has already printed
SHOWN = "fsdask_progress_shown"


@dataclasses.dataclass
class _Sink:
    """Where :func:`progress_lines` sends the lines, and when the last one went."""

    stream: TextIO
    every: float
    last: float = -np.inf


class _NotShownTwice(logging.Filter):
    """Keeps the records :func:`progress_lines` printed out of the root logger's handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, SHOWN, False)


#: the sink of the running :func:`progress_lines` block (None: the fsdask logger only)
_LINES: contextvars.ContextVar[_Sink | None] = contextvars.ContextVar("fsdask_lines", default=None)


@contextlib.contextmanager
def progress_lines(
    enabled: bool = True, stream: TextIO | None = None, every: float = PROGRESS_EVERY
) -> Iterator[None]:
    """Print the progress lines of the fits run inside the block on ``stream`` (stderr).

    Progress lines are INFO records of the ``fsdask`` logger (shown with the CLI's ``-v``,
    read by ``fsdask run --log-json``).  Inside the block each is also printed as one line
    ``fsdask: …`` on ``stream``, whatever the log level, and kept from the root logger's
    handlers (``-v`` does not show it twice).  Iteration lines are printed at most one per
    ``every`` seconds (a hundred fast iterations are not a hundred lines) — a loop's first
    iteration and the other lines always.

    Parameters
    ----------
    enabled : bool
        False: the records only (``-q``, ``--no-progress``).
    stream : file, optional
        Where to print (default: ``sys.stderr``, so stdout stays clean for results).
    every : float
        Seconds between two printed iteration lines (0: every iteration).

    Examples
    --------
    >>> with progress_lines():  # doctest: +SKIP
    ...     QAlpha().fit(X)
    """
    if not enabled:
        yield
        return
    token = _LINES.set(_Sink(stream or sys.stderr, float(every)))
    guard, handlers = _NotShownTwice(), list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(guard)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(guard)
        _LINES.reset(token)


def progress_line(message: str, *, throttle: bool = False) -> None:
    """One progress line: an INFO record of the ``fsdask`` logger, printed as well inside
    :func:`progress_lines`.

    Parameters
    ----------
    message : str
        The line, without the ``fsdask:`` prefix.
    throttle : bool
        Inside :func:`progress_lines`, print the line only when the last one printed is at
        least its ``every`` seconds old (the iterations after a loop's first).
    """
    sink = _LINES.get()
    now = time.perf_counter()
    shown = sink is not None and not (throttle and now - sink.last < sink.every)
    log.info("%s", message, extra={SHOWN: shown})
    if not shown:
        return
    sink.last = now
    try:
        print(f"fsdask: {message}", file=sink.stream, flush=True)
    except (OSError, ValueError):  # the stream was closed: progress is not worth a crash
        pass


@dataclasses.dataclass
class _Clock:
    """The pace of the running loop: its iteration count and time at its (re)start."""

    max_iter: int | None
    first: int
    t0: float
    #: what the lines call the bound (the parameter that sets it)
    name: str = "max_iter"

    @classmethod
    def of(cls, estimator: Any, first: int, t0: float) -> _Clock:
        """The clock of a loop bounded by the estimator's ``progress_bound``."""
        return cls(_max_iter_of(estimator), first, t0, _bound_name(estimator))

    def left(self, it: int) -> str:
        """``; at most 12 s more to max_iter=30`` at the mean pace since the start (or '')."""
        done = it - self.first
        if self.max_iter is None or done <= 0 or it >= self.max_iter:
            return ""
        per = (time.perf_counter() - self.t0) / done
        more = format_duration(per * (self.max_iter - it))
        return f"; at most {more} more to {self.name}={self.max_iter}"


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
        self.execution = Execution(memory_budget, workers=current_workers())
        self.method = getattr(estimator, "method_name", type(estimator).__name__)
        self._data: tuple[Any, Any] | None = None
        self._checkpoint: Any = None
        self._t0 = time.perf_counter()
        self._clock = _Clock.of(estimator, 0, self._t0)

    # ---- data and passes
    def bind(self, X: Any, y: Any = None) -> FitContext:
        """Name the data the method works on (keys the checkpoint); returns ``self``."""
        self._data = (X, y)
        self._checkpoint = None
        return self

    def admit(self, X: Any) -> Any:
        """X as the fit's tasks will read it: its largest task checked against the memory
        of the ``distributed`` workers the fit runs on, before anything is computed
        (:meth:`~fsdask.linalg.execution.Execution.admit`).

        Returns
        -------
        X, or X with its blocks worked on in pieces.

        Raises
        ------
        ClusterError
            One line naming the block size, the workers' limit and the remedy.
        """
        return self.execution.admit(X)

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
        bound: str = "max_iter",
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
        bound : str
            What the progress lines call ``max_iter`` (the parameter it comes from, e.g.
            ``"n_features_to_select"``).

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
        now = time.perf_counter()
        self._clock = (
            _Clock(max_iter, n_iter, now, bound)
            if max_iter is not None
            else _Clock.of(self.estimator, n_iter, now)
        )

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
        """One progress line per outer iteration (:func:`progress_line`).

        ``ctx.log_iteration(t, objective=f, change=delta)`` shows the paper's quantities, the
        time since the fit started and, while the ``max_iter`` of the loop run by
        :meth:`iterate` (or the parameter the estimator's ``progress_bound`` names) leaves
        iterations to go, the most they take at the mean pace of the iterations so far — a
        bound, as a loop may converge early.
        """
        if _LINES.get() is None and not log.isEnabledFor(logging.INFO):
            return  # nobody listens: spare the formatting
        parts = ", ".join(
            f"{k}={v:.6g}" if isinstance(v, (float, np.floating)) else f"{k}={v}"
            for k, v in values.items()
        )
        elapsed = time.perf_counter() - self._t0
        first = it == self._clock.first + 1  # a loop's first line is always shown
        progress_line(
            f"{self.method}: iteration {it}: {parts} ({elapsed:.1f} s{self._clock.left(it)})",
            throttle=not first,
        )


#: what to do about an array the fitting process cannot hold, unless the caller knows better
CLIENT_ARRAY_REMEDY = (
    "select fewer features first (e.g. --method variance -k N, then this method on the "
    "result's features) or use fewer samples"
)


def check_client_array(
    nbytes: float,
    what: str,
    *,
    n: int,
    p: int,
    name: str,
    method: str,
    budget: int,
    remedy: str = CLIENT_ARRAY_REMEDY,
) -> None:
    """Refuse, before X is read, a fit whose array held in this process would not fit in the
    machine's memory; announce one above the memory budget.

    The methods that finish on the client (the PCA baselines' factor, CPFS's factor,
    SparsePCASelector's centred X) hold one array there whatever the cluster: a 10⁷-feature
    factor is terabytes, and without this check the fit would read X for hours and then fail
    to allocate it.  The machine's memory is ``distributed.system.MEMORY_LIMIT`` (the
    cgroup's limit where there is one).

    Parameters
    ----------
    nbytes : float
        The array's size in bytes.
    what : str
        What it is and its shape, for the message (``"its factor B (min(n, p) × p float64)"``).
    n, p : int
        The problem's samples and features.
    name, method : str
        The estimator's class name (the message) and ``method_name`` (the progress line).
    budget : int
        The fit's memory budget in bytes (0: no budget).
    remedy : str
        What to do, for the message (default :data:`CLIENT_ARRAY_REMEDY`).

    Raises
    ------
    InputError
        One line: the size, the machine's memory and what to do.
    """
    from dask.utils import format_bytes
    from distributed.system import MEMORY_LIMIT

    if nbytes > MEMORY_LIMIT:
        raise InputError(
            f"{name} on {n} samples × {p} features holds {what} in this process: "
            f"{format_bytes(nbytes)}, more than this machine's memory "
            f"({format_bytes(MEMORY_LIMIT)}); {remedy}"
        )
    if budget and nbytes > budget:
        progress_line(
            f"{method}: {what} takes {format_bytes(nbytes)} in this process, above the "
            f"memory budget of {format_bytes(budget)} (it fits in this machine's memory)"
        )


def iterate(
    name: str,
    state: S,
    step: Callable[[S], S],
    *,
    max_iter: int | None = None,
    done: Callable[[S], bool] | None = None,
    ctx: FitContext | None = None,
    bound: str = "max_iter",
) -> Loop[S]:
    """The loop of a paper algorithm that is called inside a fit or on its own.

    With a ``ctx`` this is :meth:`FitContext.iterate` (checkpointed); without one the same
    steps run and nothing is saved — for the public core functions users call directly.

    Parameters
    ----------
    name, state, step, max_iter, done, bound
        As in :meth:`FitContext.iterate`.
    ctx : FitContext, optional
        The fit the loop belongs to.

    Returns
    -------
    Loop
    """
    if ctx is not None:
        return ctx.iterate(name, state, step, max_iter=max_iter, done=done, bound=bound)
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


def _max_iter_of(estimator: Any) -> int | None:
    """The cap of the estimator's outer iterations: the parameter its ``progress_bound``
    names, when that is a positive integer (else None: no time left is shown)."""
    name = getattr(estimator, "progress_bound", None)
    value = getattr(estimator, name, None) if isinstance(name, str) else None
    return int(value) if isinstance(value, (int, np.integer)) and value > 0 else None


def _bound_name(estimator: Any) -> str:
    """What the progress lines call the bound :func:`_max_iter_of` reads: the parameter
    ``progress_bound`` names (PFA's ``n_init``), or ``max_iter`` when it names an attribute
    derived from that (Logo's ``max_outer_iter``)."""
    name = getattr(estimator, "progress_bound", None)
    params = estimator.get_params(deep=False) if hasattr(estimator, "get_params") else {}
    return name if isinstance(name, str) and name in params else "max_iter"


def format_duration(seconds: float) -> str:
    """A time for a person to read: ``< 1 s``, ``42 s``, ``12 min``, ``3.5 h``.

    Parameters
    ----------
    seconds : float

    Returns
    -------
    str
    """
    if seconds < 1:
        return "< 1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _stacklevel() -> int:
    """The ``stacklevel`` that points ``warnings.warn`` (called from :meth:`FitContext.warn`)
    at the first frame outside the fsdask package."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "fsdask":
        frame, level = frame.f_back, level + 1
    return level
