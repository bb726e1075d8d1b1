"""Δ: the factor of the response kernel, B = Δᵀ Δ (FeatureSelection, step 1).

Zarkoob (2010) §3.4: the kernel on y enters HSIC (3.1) only through H B H, and the
algorithms only through A = X H Δᵀ (:mod:`.matrix`), so a factor Δ (c × n) of B is all the
response contributes: class indicators normalised by the class sizes (§3.4.2), a standardised
y (linear kernel, §3.4.1), standardised columns of a multivariate Y (footnote 2 of §3.3), or
the leading eigenpairs of an RBF kernel's H B H.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from fsdask._validation import class_counts
from fsdask.errors import InputError, ParameterError

__all__ = [
    "Response",
    "RBF_TRACE_SHARE",
    "RBF_MAX_RANK",
    "MAX_CLASS_SHARE",
    "infer_response",
    "response_factor",
]

Response = Literal["auto", "categorical", "continuous", "multivariate", "rbf"]

#: RBF response kernel: keep the leading eigenpairs of HBH holding this share of its trace
RBF_TRACE_SHARE = 0.999
#: … but never more than this many (the rank of the factor Δ, i.e. the columns of A)
RBF_MAX_RANK = 50
#: a categorical y with more than this share of distinct values per sample looks continuous
MAX_CLASS_SHARE = 0.5


def infer_response(y: np.ndarray) -> str:
    """``response="auto"``: 2-D y → multivariate; integer/bool/string → categorical; float → continuous.

    Parameters
    ----------
    y : ndarray (n,) or (n, t)

    Returns
    -------
    str
    """
    if y.ndim == 2 and y.shape[1] > 1:
        return "multivariate"
    if y.dtype.kind in "biuOSUT":
        return "categorical"
    return "continuous"


def _standardise(y: np.ndarray, name: str) -> np.ndarray:
    if not np.issubdtype(y.dtype, np.number):
        raise InputError(
            f"{name} must be numeric for a continuous response (dtype {y.dtype}); "
            "use response='categorical' for labels"
        )
    y = y.astype(np.float64)
    bad = ~np.isfinite(y)
    if bad.any():
        raise InputError(
            f"{name} has {int(bad.sum())} NaN/Inf value(s) (first at sample "
            f"{int(np.flatnonzero(bad.ravel())[0])}); drop or impute those samples"
        )
    sd = y.std(axis=0, ddof=1)
    if np.any(sd == 0):
        raise InputError(
            f"{name} is constant{' in some column' if y.ndim == 2 else ''}; "
            "a response must vary across samples"
        )
    return (y - y.mean(axis=0)) / sd


def response_factor(
    y: Any,
    response: Response = "auto",
    *,
    kernel_rank: int | None = None,
    kernel_width: float | None = None,
) -> tuple[np.ndarray, str, dict]:
    """Δ (c × n) with B = Δᵀ Δ the kernel on y, the response kind used, and facts about it.

    * ``categorical``: Δ_ki = 1/n_k if sample i is in class k (the "linear indicator matrix
      normalised by the cardinal of the classes" of §3.4.2); c = number of classes.
    * ``continuous``: Δ = ỹᵀ with ỹ = (y − ȳ)/s_y (linear kernel on a standardised y, §3.4.1).
    * ``multivariate``: Δ = Ỹᵀ, each column of Y standardised (footnote 2 of §3.3).
    * ``rbf``: B_ij = exp(−(ỹ_i − ỹ_j)²/(2w²)), w = ``kernel_width`` or the median pairwise
      distance of ỹ; Δ = Λ_r^{1/2} W_rᵀ from the eigendecomposition of H B H, keeping the
      smallest r whose eigenvalues hold ``RBF_TRACE_SHARE`` (99.9 %) of the trace, capped at
      ``kernel_rank`` (default ``RBF_MAX_RANK`` = 50).  Because A = X H Δᵀ only sees H B H,
      factoring the centred kernel loses nothing but the discarded tail.

    Parameters
    ----------
    y : array-like (n,) or (n, t)
    response : the kind of response, or "auto" (:func:`infer_response`)
    kernel_rank, kernel_width : the RBF kernel's most eigenpairs and width (None: defaults)

    Returns
    -------
    (ndarray (c, n), str, dict).  Memory: O(c·n); ``rbf`` holds n × n matrices.
    """
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim not in (1, 2):
        raise InputError(
            f"y must be 1-D (n_samples,) or 2-D (n_samples, n_targets); got shape {y.shape}"
        )
    kind = infer_response(y) if response == "auto" else response
    info: dict = {"response": kind}
    if kind == "categorical":
        return _class_factor(y, info), kind, info
    if kind == "continuous":
        if y.ndim != 1:
            raise InputError(
                f"a continuous y must be 1-D; got shape {y.shape} (use response='multivariate')"
            )
        return _standardise(y, "y")[None, :], kind, info
    if kind == "multivariate":
        Y = y if y.ndim == 2 else y[:, None]
        return _standardise(Y, "Y").T, kind, info
    if kind == "rbf":
        return _rbf_factor(y, kernel_rank, kernel_width, info), kind, info
    raise ParameterError(
        f"response={response!r}; use 'auto', 'categorical', 'continuous', 'multivariate' or 'rbf'"
    )


def _class_factor(y: np.ndarray, info: dict) -> np.ndarray:
    """Δ of a categorical y (§3.4.2); the classes and their sizes go into ``info``."""
    n = y.shape[0]
    if y.ndim != 1:
        raise InputError(
            f"a categorical y must be 1-D; got shape {y.shape} (use response='multivariate')"
        )
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise InputError(
            f"y has {int((~np.isfinite(y)).sum())} NaN/Inf label(s); drop those samples"
        )
    classes, codes, counts = class_counts(y)
    if classes.size < 2:
        raise InputError(
            f"y has a single class ({classes[0]!r}); SparseHSIC with a categorical "
            "response needs at least two classes"
        )
    if classes.size > MAX_CLASS_SHARE * n:
        raise InputError(
            f"y has {classes.size} distinct values among {n} samples "
            f"({int((counts == 1).sum())} classes with a single sample): it looks like a "
            "continuous response, not class labels; use response='continuous' (or 'rbf'), "
            "or pass integer class codes"
        )
    delta = np.zeros((classes.size, n))
    delta[codes, np.arange(n)] = 1.0 / counts[codes]
    info.update(classes=classes, class_counts=counts)
    return delta


def _rbf_factor(
    y: np.ndarray, kernel_rank: int | None, kernel_width: float | None, info: dict
) -> np.ndarray:
    """Δ = Λ_r^{1/2} W_rᵀ of an RBF kernel on a standardised 1-D y; the width, rank and the
    share of the trace kept go into ``info``."""
    if y.ndim != 1:
        raise InputError(f"response='rbf' takes a 1-D y; got shape {y.shape}")
    n = y.shape[0]
    ys = _standardise(y, "y")
    d = np.abs(ys[:, None] - ys[None, :])
    w = kernel_width if kernel_width is not None else float(np.median(d[d > 0]))
    B = np.exp(-(d**2) / (2 * w**2))
    H = np.eye(n) - 1.0 / n
    lam, W = np.linalg.eigh(H @ B @ H)
    lam, W = lam[::-1].clip(min=0), W[:, ::-1]
    r = int(np.searchsorted(np.cumsum(lam) / lam.sum(), RBF_TRACE_SHARE) + 1)
    r = min(r, kernel_rank or RBF_MAX_RANK, n)
    info.update(kernel_width=w, kernel_rank=r, kernel_trace_kept=float(lam[:r].sum() / lam.sum()))
    return np.sqrt(lam[:r])[:, None] * W[:, :r].T
