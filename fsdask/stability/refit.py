"""Refits of any selector on resamples, as parallel tasks.

Each refit is one task, ``refit_one(estimator, X_r, y_r)``, whose input is the resample's
rows of X: on a ``distributed`` cluster the tasks spread over the workers (the feature
blocks of X are read once and shared by every task's gather), and a task lost with its
worker is run again with the same input, so the result does not depend on the scheduler
or on failures.  Inside a task the fit runs on the synchronous scheduler: a task never
starts threads or asks the cluster for more work.  When one resample's rows of X exceed the
memory budget, the refits run one after another on the client instead, each fit a dask
graph over X's feature blocks.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Any, Iterator

import dask
import numpy as np
from sklearn.base import clone

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


def refit_all(
    ctx: Any,
    estimator: Any,
    X: Any,
    y: np.ndarray | None,
    resamples: list[tuple[np.ndarray | None, np.ndarray | None]],
    seeds: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Refit ``estimator`` on every resample.

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
    n_rows = max(X.shape[0] if r is None else r.size for r, _ in resamples)
    ests = [seeded(estimator, s) for s in seeds]
    # a task holds its rows of X, the fit's float64 copy and a block's temporaries
    if ctx.execution.fits(n_rows * X.shape[1] * max(8, X.dtype.itemsize), copies=3):
        tasks = [
            dask.delayed(refit_one, pure=True)(e, X if r is None else X[r], yr)
            for e, (r, yr) in zip(ests, resamples)
        ]
        ctx.execution.passes += 1  # the tasks share one read of X's blocks
        outs = dask.compute(*tasks)
    else:  # a resample does not fit one task: fit after fit, each over X's blocks
        outs = []
        for e, (r, yr) in zip(ests, resamples):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fitted = clone(e).fit(X if r is None else X[r], yr)
            ctx.execution.passes += fitted.n_passes_ + 1
            outs.append((fitted.support_, fitted.scores_, [str(w.message) for w in caught]))
    warned = [o[2] for o in outs if o[2]]
    if warned:
        ctx.warn(
            f"{len(warned)} of {len(outs)} refits warned (first: {warned[0][0]})",
            UserWarning,
        )
    return np.array([o[0] for o in outs], bool), np.array([o[1] for o in outs])
