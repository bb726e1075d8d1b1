"""Refits of any selector on resamples, as parallel tasks.

Each refit is one task, ``refit_one(estimator, X_r, y_r)``, whose input is the resample's
rows of X: on a ``distributed`` cluster the tasks spread over the workers (the feature
blocks of X are read once and shared by every task's gather), and a task lost with its
worker is run again with the same input, so the result does not depend on the scheduler
or on failures.  Inside a task the fit runs on the synchronous scheduler: a task never
starts threads or asks the cluster for more work.  When one resample's rows of X exceed the
memory budget, the refits run one after another on the client instead, each fit a dask
graph over X's feature blocks.  Many refits are counted where they run
(:func:`refit_tally`, for stability frequencies and permutation p-values), few are
returned whole (:func:`refit_all`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import warnings
from typing import Any, Iterator

import dask
import numpy as np
from sklearn.base import clone

from fsdask.fitting import format_duration, progress_line

_LOCK = threading.Lock()
#: refits running in this process, and what they replaced while they run (the dask config
#: and the warnings' state)
_DEPTH: dict[str, Any] = {"n": 0, "config": None, "warnings": None, "show": None}
#: the warnings of the refit running on this thread (None: not in a refit)
_LOCAL = threading.local()


def _route(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` while refits run: a refit's thread keeps its warnings, any
    other thread's go where they went before."""
    said = getattr(_LOCAL, "said", None)
    if said is None:
        return _DEPTH["show"](message, category, filename, lineno, file, line)
    said.append(str(message))


@contextlib.contextmanager
def synchronous() -> Iterator[None]:
    """The synchronous scheduler, and warnings kept per thread, while any refit of this
    process runs.

    ``dask.config.set`` and ``warnings.catch_warnings`` change the whole process; refits
    running side by side on a worker's threads share one setting, made by the first and
    restored by the last (a per-task ``with`` would restore it under a refit still running).
    """
    with _LOCK:
        if _DEPTH["n"] == 0:
            _DEPTH["config"] = dask.config.set(scheduler="synchronous")
            _DEPTH["warnings"] = warnings.catch_warnings()
            _DEPTH["warnings"].__enter__()
            warnings.simplefilter("always")  # every refit says its warnings
            _DEPTH["show"], warnings.showwarning = warnings.showwarning, _route
        _DEPTH["n"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH["n"] -= 1
            if _DEPTH["n"] == 0:
                _DEPTH["warnings"].__exit__(None, None, None)
                _DEPTH["config"].__exit__(None, None, None)


def refit_one(estimator: Any, X: np.ndarray, y: np.ndarray | None) -> tuple:
    """Fit a clone of ``estimator`` on ``(X, y)``; return its support, scores and warnings.

    Parameters
    ----------
    estimator : Selector, unfitted parameters only are used
    X : ndarray (n_r, p)
    y : ndarray (n_r,) or None

    Returns
    -------
    (bool ndarray (p,), float ndarray (p,), list of str): the warnings' messages travel
    back to the client, which says them once for all refits
    """
    with synchronous():
        _LOCAL.said = []
        try:
            est = clone(estimator).fit(X, y)
            said = _LOCAL.said
        finally:
            _LOCAL.said = None
    return np.asarray(est.support_, bool), np.asarray(est.scores_, np.float64), said


def seeded(estimator: Any, seed: int) -> Any:
    """A clone of ``estimator`` whose ``random_state`` (when it has one and it is None) is
    ``seed``, so every refit is reproducible."""
    est = clone(estimator)
    params = est.get_params(deep=False)
    if "random_state" in params and params["random_state"] is None:
        est.set_params(random_state=int(seed))
    return est


#: refits counted per task of the reduction (each holds its refits' p-length results)
COUNT_GROUP = 4
#: partial counts merged per task of the reduction tree
MERGE_GROUP = 8


@dataclasses.dataclass
class Tally:
    """What the client keeps of R + 1 refits: the first one whole, the others counted.

    Attributes
    ----------
    support, scores : ndarray (p,)
        The first refit's selection and scores (the fit on all samples, or the observed
        labels of a permutation null).
    selected : int64 ndarray (p,)
        How many of the other R refits selected each feature.
    exceeded : int64 ndarray (p,)
        How many of the other R scored it at least as high as the first (``≥``).
    n_selected : int
        The features the other R selected, in all.
    n_refits : int
        R, the refits counted.
    warned : list of str
        The first warning of each refit that warned, the first refit included, in order.
    """

    support: np.ndarray
    scores: np.ndarray
    selected: np.ndarray
    exceeded: np.ndarray
    n_selected: int
    n_refits: int
    warned: list


def _count(first: tuple, *refits: tuple, own: bool = False) -> Tally:
    """A task: the tally of ``refits`` against ``first`` (each a :func:`refit_one` result),
    with the first refit's own warning when ``own``."""
    support, scores, said = first
    p = support.size
    selected, exceeded, n_selected = np.zeros(p, np.int64), np.zeros(p, np.int64), 0
    warned = list(said[:1]) if own else []
    for sup, sc, s in refits:
        selected += sup
        exceeded += sc >= scores
        n_selected += int(np.count_nonzero(sup))
        warned += s[:1]
    return Tally(support, scores, selected, exceeded, n_selected, len(refits), warned)


def _merge(*tallies: Tally) -> Tally:
    """A task: partial tallies of the same first refit, merged in their order."""
    first = tallies[0]
    return Tally(
        first.support,
        first.scores,
        sum(t.selected for t in tallies),
        sum(t.exceeded for t in tallies),
        sum(t.n_selected for t in tallies),
        sum(t.n_refits for t in tallies),
        [w for t in tallies for w in t.warned],
    )


def _tally_tree(tasks: list) -> Any:
    """The delayed :class:`Tally` of the refit tasks: counted in groups against the first,
    then merged as a tree, so no task and not the client holds R results of size p."""
    first, rest = tasks[0], tasks[1:]
    level = [dask.delayed(_count, pure=True)(first, own=True)] + [
        dask.delayed(_count, pure=True)(first, *rest[i : i + COUNT_GROUP])
        for i in range(0, len(rest), COUNT_GROUP)
    ]
    while len(level) > 1:
        level = [
            dask.delayed(_merge, pure=True)(*level[i : i + MERGE_GROUP])
            for i in range(0, len(level), MERGE_GROUP)
        ]
    return level[0]


def _as_tasks(ctx: Any, X: Any, resamples: list, ests: list) -> list | None:
    """The refits as delayed tasks when one resample's rows fit the memory budget, else
    None (they run one after another on the client)."""
    n_rows = max(X.shape[0] if r is None else r.size for r, _ in resamples)
    # a task holds its rows of X, the fit's float64 copy and a block's temporaries
    if not ctx.execution.fits(n_rows * X.shape[1] * max(8, X.dtype.itemsize), copies=3):
        return None
    ctx.execution.passes += 1  # the tasks share one read of X's blocks
    return [
        dask.delayed(refit_one, pure=True)(e, X if r is None else X[r], yr)
        for e, (r, yr) in zip(ests, resamples)
    ]


def _on_client(ctx: Any, X: Any, resamples: list, ests: list) -> Iterator[tuple]:
    """The refits one after another on the client, each a fit over X's blocks, with a
    progress line after each (throttled) saying how many are done and the time left."""
    t0 = time.perf_counter()
    for i, (e, (r, yr)) in enumerate(zip(ests, resamples), start=1):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fitted = clone(e).fit(X if r is None else X[r], yr)
        ctx.execution.passes += fitted.n_passes_ + 1
        spent = time.perf_counter() - t0
        left = format_duration(spent / i * (len(ests) - i))
        progress_line(
            f"{ctx.method}: refit {i} of {len(ests)} done after {format_duration(spent)}"
            + (f"; about {left} more" if i < len(ests) else ""),
            throttle=1 < i < len(ests),
        )
        yield fitted.support_, fitted.scores_, [str(w.message) for w in caught]


def _say(ctx: Any, warned: list, total: int) -> None:
    """One warning for all the refits that warned (``warned``: the first message of each)."""
    if warned:
        ctx.warn(f"{len(warned)} of {total} refits warned (first: {warned[0]})", UserWarning)


def refit_all(
    ctx: Any,
    estimator: Any,
    X: Any,
    y: np.ndarray | None,
    resamples: list[tuple[np.ndarray | None, np.ndarray | None]],
    seeds: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Refit ``estimator`` on every resample and return each refit's result.

    For a few resamples whose selections are needed one by one; :func:`refit_tally`
    counts many.

    Parameters
    ----------
    ctx : FitContext
        The fit's context (its execution's memory budget decides tasks or client fits,
        and the passes are counted there).
    estimator : Selector
    X : dask array (n, p)
    y : ndarray (n,) or None
    resamples : list of (rows, y_r)
        The rows of each refit (None: all) and its response (permuted for a null).
    seeds : int ndarray
        One seed per resample, for estimators with a ``random_state``.

    Returns
    -------
    (bool ndarray (R, p), float ndarray (R, p)): each refit's support and scores.
    Memory: 2 × R × p on the client; a task holds its resample's rows of X.
    """
    ests = [seeded(estimator, s) for s in seeds]
    tasks = _as_tasks(ctx, X, resamples, ests)
    outs = dask.compute(*tasks) if tasks is not None else list(_on_client(ctx, X, resamples, ests))
    _say(ctx, [o[2][0] for o in outs if o[2]], len(outs))
    return np.array([o[0] for o in outs], bool), np.array([o[1] for o in outs])


def refit_tally(
    ctx: Any,
    estimator: Any,
    X: Any,
    y: np.ndarray | None,
    resamples: list[tuple[np.ndarray | None, np.ndarray | None]],
    seeds: np.ndarray,
) -> Tally:
    """Refit ``estimator`` on every resample; keep the first refit and count the others.

    Stability selection needs of R subsamples only how often each feature was selected,
    and a permutation null only how often a permuted fit scored a feature at least as high
    as the observed one: both are counted where the refits run (groups of
    :data:`COUNT_GROUP`, merged as a tree), so R results of size p never meet in one
    place.

    Parameters
    ----------
    ctx, estimator, X, y, resamples, seeds
        As for :func:`refit_all`; the first resample is the one the others are counted
        against.

    Returns
    -------
    Tally
        Memory: O(p) on the client; a task holds its resample's rows of X, or
        :data:`COUNT_GROUP` + 1 refits' results, or :data:`MERGE_GROUP` tallies.
    """
    ests = [seeded(estimator, s) for s in seeds]
    tasks = _as_tasks(ctx, X, resamples, ests)
    if tasks is not None:
        (tally,) = dask.compute(_tally_tree(tasks))
    else:
        outs = _on_client(ctx, X, resamples, ests)
        first = next(outs)
        tally = _count(first, own=True)
        for out in outs:  # folded as they come: one refit's result at a time
            tally = _merge(tally, _count(first, out))
    _say(ctx, tally.warned, tally.n_refits + 1)
    return tally
