"""The loops of the core functions, inside a fit or outside one.

R1D, the ρ bisection and the ρ path are public functions that users and tests call on an A
of their own, without a fit, and that a fit calls with its
:class:`~fsdask.fitting.FitContext`.  With a context their loops run under
``ctx.iterate`` (checkpointed dataclass state) and SparsePM gets the fit's memory budget;
without one, :func:`iterate` runs the same loop and saves nothing.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from fsdask.fitting import FitContext, Loop

__all__ = ["driver", "iterate", "solver_options"]

S = TypeVar("S")


def iterate(
    name: str,
    state: S,
    step: Callable[[S], S],
    *,
    max_iter: int | None = None,
    done: Callable[[S], bool] | None = None,
) -> Loop[S]:
    """:meth:`FitContext.iterate` without a checkpoint: the same steps, nothing saved.

    Parameters
    ----------
    name : str, unused (the slot a fit would save the loop under)
    state : dataclass instance, the state before the first step
    step : callable ``step(state) -> state``
    max_iter : int, optional, at most this many steps
    done : callable ``done(state) -> bool``, optional, tested after each step

    Returns
    -------
    Loop
    """
    if max_iter is None and done is None:
        raise TypeError("iterate needs max_iter or done, or it never ends")
    n_iter, finished, last = 0, False, max_iter is not None and max_iter <= 0
    while not last:
        state = step(state)
        n_iter += 1
        finished = bool(done(state)) if done is not None else False
        last = finished or (max_iter is not None and n_iter >= max_iter)
    return Loop(state, n_iter, finished)


def driver(ctx: FitContext | None) -> Callable[..., Loop]:
    """``ctx.iterate`` for a loop inside a fit, else :func:`iterate`."""
    return ctx.iterate if ctx is not None else iterate


def solver_options(ctx: FitContext | None, kw: dict[str, Any]) -> dict[str, Any]:
    """SparsePM's keywords ``kw``, with the fit's memory budget unless ``kw`` names one."""
    if ctx is None or "memory_budget" in kw:
        return kw
    return {**kw, "memory_budget": ctx.budget}
