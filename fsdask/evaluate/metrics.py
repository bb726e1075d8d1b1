"""Metrics for judging a selection: against known truth, across folds, and unsupervised.

=========================  =====================================================================
metric                     definition
=========================  =====================================================================
false_discovery_rate       |S \\ R| / |S|: the fraction of selected features that are irrelevant
sparsity_gap               mean weight of the relevant features / mean weight of the irrelevant
                           ones (Wolf & Shashua 2005, §6.1: "the ratio between the average weight
                           of the first five features and the average weight of the rest 120")
kuncheva_index             Kuncheva (2007) consistency of equal-size subsets, averaged over pairs:
                           KI(A, B) = (r·n − k²) / (k (n − k)),  r = |A ∩ B|, k = |A| = |B|
jaccard_stability          mean over pairs of |A ∩ B| / |A ∪ B|
reconstruction_error       ‖X − X_S X_S⁺ X‖²_F / ‖X‖²_F (Masaeli et al. 2010, §7, normalised E),
                           computed out of core: QR of the small n × |S| X_S, then one pass
pev                        1 − reconstruction_error (the identity E = 1 − PEV of Masaeli et al.)
=========================  =====================================================================
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

import dask.array as da
import numpy as np

from fsdask.errors import InputError, ParameterError


def _as_index_set(s: Any, n: int | None = None, name: str = "selected") -> np.ndarray:
    """Indices from a boolean mask or an index list (unique, sorted)."""
    a = np.asarray(s)
    if a.dtype == bool:
        if n is not None and a.size != n:
            raise InputError(f"{name}: boolean mask of length {a.size} but {n} features expected")
        return np.flatnonzero(a)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InputError(
            f"{name} must be a boolean mask or integer feature indices (got dtype {a.dtype})"
        )
    a = np.unique(a.astype(np.int64).ravel())
    if a.size and a.min() < 0:
        raise InputError(f"{name} has negative feature indices")
    if n is not None and a.size and a.max() >= n:
        raise InputError(f"{name} has feature index {a.max()} but there are only {n} features")
    return a


def false_discovery_rate(selected: Any, relevant: Any) -> float:
    """Fraction of the selected features that are not truly relevant, ``|S \\ R| / |S|``.

    Parameters
    ----------
    selected, relevant
        Boolean masks or integer indices of features.

    Returns
    -------
    float
        In [0, 1]; 0 when nothing is selected (no discovery, no false discovery).

    Examples
    --------
    >>> from fsdask.evaluate import false_discovery_rate
    >>> false_discovery_rate([0, 1, 7, 9], relevant=[0, 1, 2])
    0.5
    """
    S = _as_index_set(selected, name="selected")
    R = _as_index_set(relevant, name="relevant")
    if S.size == 0:
        return 0.0
    return float(np.setdiff1d(S, R).size / S.size)


def sparsity_gap(weights: Any, relevant: Any) -> float:
    """Mean weight of the relevant features divided by the mean weight of the irrelevant ones.

    This is the Q-α paper's "sparsity gap" (Wolf & Shashua 2005, §6.1, Fig. 3b): the ratio
    of the average weight of the relevant coordinates to the average weight of the rest.
    The weights are used as given (α is non-negative for Q-α); pass ``np.abs(w)`` for
    methods whose sign carries no relevance.

    Parameters
    ----------
    weights : array-like of shape (p,)
        The features' weights.
    relevant : array-like
        Boolean mask or integer indices of the relevant features.

    Returns
    -------
    float
        The ratio; ``inf`` when the irrelevant features all weigh 0.

    Examples
    --------
    >>> from fsdask.evaluate import sparsity_gap
    >>> round(sparsity_gap([0.9, 0.8, 0.1, 0.1, 0.05, 0.05], relevant=[0, 1]), 6)
    11.333333
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    R = _as_index_set(relevant, w.size, name="relevant")
    if R.size == 0 or R.size == w.size:
        raise InputError(
            f"sparsity_gap needs both relevant and irrelevant features; got {R.size} relevant "
            f"of {w.size}"
        )
    mask = np.zeros(w.size, bool)
    mask[R] = True
    num, den = w[mask].mean(), w[~mask].mean()
    if den == 0:
        return float("inf") if num > 0 else float("nan")
    return float(num / den)


def _sets(sets: Iterable[Any]) -> list[np.ndarray]:
    out = [_as_index_set(s, name="sets[i]") for s in sets]
    if len(out) < 2:
        raise InputError(f"stability needs at least 2 feature sets (one per fold); got {len(out)}")
    return out


def kuncheva_index(sets: Iterable[Any], n_features: int) -> float:
    """Kuncheva's consistency index averaged over all pairs of equal-size feature sets.

    ``KI(A, B) = (r n − k²) / (k (n − k))`` with ``r = |A ∩ B|``, ``k`` the common size and
    ``n`` the total number of features (Kuncheva, "A stability index for feature selection",
    AIAC 2007).

    Parameters
    ----------
    sets : iterable of array-like
        At least two feature sets of one size k (masks or indices), e.g. each fold's top k.
    n_features : int
        n, the number of features they were drawn from.

    Returns
    -------
    float
        1 = identical sets, ≈ 0 = chance overlap, negative = less than chance.

    Examples
    --------
    >>> from fsdask.evaluate import kuncheva_index
    >>> kuncheva_index([[0, 1, 2], [0, 1, 3]], n_features=100)
    0.6563573883161512
    """
    S = _sets(sets)
    k = {s.size for s in S}
    if len(k) != 1:
        raise ParameterError(
            f"kuncheva_index needs sets of one size; got sizes {sorted(k)} "
            "(use the top-k of each ranking)"
        )
    k = k.pop()
    n = int(n_features)
    if not 0 < k < n:
        raise ParameterError(f"kuncheva_index needs 0 < k < n_features; got k={k}, n_features={n}")
    vals = [
        (np.intersect1d(a, b).size * n - k * k) / (k * (n - k))
        for a, b in itertools.combinations(S, 2)
    ]
    return float(np.mean(vals))


def jaccard_stability(sets: Iterable[Any]) -> float:
    """Mean pairwise Jaccard similarity ``|A ∩ B| / |A ∪ B|`` of feature sets.

    Parameters
    ----------
    sets : iterable of array-like
        At least two feature sets (masks or indices), e.g. each fold's selection.

    Returns
    -------
    float
        In [0, 1]; 1 when all sets are identical.

    Examples
    --------
    >>> from fsdask.evaluate import jaccard_stability
    >>> jaccard_stability([[0, 1, 2], [0, 1, 3]])
    0.5
    """
    S = _sets(sets)
    vals = []
    for a, b in itertools.combinations(S, 2):
        union = np.union1d(a, b).size
        vals.append(1.0 if union == 0 else np.intersect1d(a, b).size / union)
    return float(np.mean(vals))


# ---------------------------------------------------------------------------------------------
# unsupervised: reconstruction error / PEV (Masaeli et al., SDM 2010, §7)
# ---------------------------------------------------------------------------------------------


def _orthonormal_prefix_basis(XS: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Orthonormal basis Q (n × r) built column by column (Gram–Schmidt, twice), so that
    ``span Q[:, :j] = span XS[:, :j]`` for every prefix j; a column dependent on the previous
    ones (relative residual < ``rtol``) contributes a zero column.  This is the QR of the small
    n × |S| matrix X_S with rank deficiency handled for every prefix at once."""
    n, r = XS.shape
    Q = np.zeros((n, r))
    for j in range(r):
        v = XS[:, j].astype(np.float64).copy()
        norm0 = np.linalg.norm(v)
        if norm0 == 0:
            continue
        for _ in range(2):  # re-orthogonalise: classical GS twice is as good as Householder here
            v -= Q[:, :j] @ (Q[:, :j].T @ v)
        nv = np.linalg.norm(v)
        if nv > rtol * norm0 and nv > 0:
            Q[:, j] = v / nv
    return Q


def _as_dask(X: Any) -> da.Array:
    from fsdask._validation import check_array

    return check_array(X, name="X", check_finite=False)


def reconstruction_curve(X: Any, ranking: Sequence[int], center: bool = True) -> np.ndarray:
    """Normalised reconstruction error of every prefix of ``ranking`` in one pass over X.

    ``out[q-1] = ‖X − X_{S_q} X_{S_q}⁺ X‖²_F / ‖X‖²_F`` with ``S_q`` the first q features of
    ``ranking`` (the papers' "error as features are added" curve, Masaeli et al. Fig. 2–9).
    X_S (n × q_max) is gathered once; its prefix-nested orthonormal basis Q is built in
    memory; then one streaming pass accumulates ``‖Q_jᵀ X_b‖²`` and ``‖X_b‖²`` over feature
    blocks: ``E_q = 1 − Σ_{j≤q} ‖q_jᵀX‖² / ‖X‖²``.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Samples × features (numpy, dask, xarray); read once, block by block.
    ranking : sequence of int
        Feature indices, best first (e.g. ``np.argsort(est.ranking_)[:50]``).
    center : bool, default True
        Centre every feature first (the paper assumes zero-centred columns).

    Returns
    -------
    ndarray of shape (len(ranking),)
        The normalised error after the first 1, 2, … features; non-increasing, in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from fsdask.evaluate import reconstruction_curve
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=(50, 2))
    >>> X = np.hstack([s, s @ rng.normal(size=(2, 8))])  # 8 columns made of the first 2
    >>> np.round(reconstruction_curve(X, [0, 1, 2]), 6)
    array([0.575822, 0.      , 0.      ])
    """
    from fsdask.linalg import sum_over_blocks

    Xd = _as_dask(X)
    n, p = Xd.shape
    idx = np.asarray(ranking, dtype=np.int64).ravel()
    if idx.size == 0:
        raise InputError("reconstruction error of an empty selection: select at least one feature")
    if idx.min() < 0 or idx.max() >= p:
        raise InputError(f"selection has feature index {idx.max()} but X has {p} features")
    if np.unique(idx).size != idx.size:
        raise InputError("the ranking repeats a feature index")
    XS = np.asarray(Xd[:, idx].compute(), dtype=np.float64)
    if center:
        XS = XS - XS.mean(axis=0)
    Q = _orthonormal_prefix_basis(XS)
    r = Q.shape[1]

    def term(xb, Q=Q, center=center):
        x = xb.astype(np.float64)
        if center:
            x = x - x.mean(axis=0)
        C = Q.T @ x  # r × p_b
        return np.concatenate([(C * C).sum(axis=1), [(x * x).sum()]])

    acc = sum_over_blocks(term, Xd, shape=(r + 1,)).compute()
    total = acc[-1]
    if total == 0:
        raise InputError("X is zero (after centring); the reconstruction error is undefined")
    explained = np.cumsum(acc[:-1])
    return np.clip(1.0 - explained / total, 0.0, 1.0)


def reconstruction_error(X: Any, selected: Any, center: bool = True) -> float:
    """Normalised reconstruction error ‖X − X_S X_S⁺ X‖²_F / ‖X‖²_F of the selection S.

    ``X_S X_S⁺`` is the orthogonal projector onto the span of the selected columns, so this
    is the error of reconstructing every feature from the selected ones by least squares
    (Masaeli et al. 2010, §4 and §7, E normalised by ‖X‖²_F as in their figures).
    Computed out of core: QR of the small n × ``|S|`` matrix X_S, then one streaming pass over
    X's feature blocks.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Samples × features (numpy, dask, xarray).
    selected : array-like
        Boolean mask or indices of the selected features.
    center : bool, default True
        Centre the features first (the paper's assumption).

    Returns
    -------
    float
        In [0, 1]: 0 when the selected columns span all of X.

    Examples
    --------
    >>> import numpy as np
    >>> from fsdask.evaluate import reconstruction_error
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=(50, 2))
    >>> X = np.hstack([s, s @ rng.normal(size=(2, 8))])
    >>> round(reconstruction_error(X, [0, 1]), 12)
    0.0
    """
    Xd = _as_dask(X)
    S = _as_index_set(selected, Xd.shape[1])
    return float(reconstruction_curve(Xd, S, center=center)[-1])


def pev(X: Any, selected: Any, center: bool = True) -> float:
    """Proportion of explained variance of the selection: ``1 − reconstruction_error``.

    Masaeli et al. (2010, §7) print ``PEV = tr((U_rᵀ X V_r)²) / tr(S²)``, which is
    dimensionally inconsistent (U_rᵀX is r × p, V_r is q × r) and state ``E = 1 − PEV``; we
    follow the identity: ``PEV = ‖U_rᵀ X‖²_F / ‖X‖²_F`` with U_r an orthonormal basis of the
    selected columns, i.e. the fraction of ‖X‖²_F captured by their span.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Samples × features (numpy, dask, xarray).
    selected : array-like
        Boolean mask or indices of the selected features.
    center : bool, default True
        Centre the features first.

    Returns
    -------
    float
        In [0, 1]: 1 when the selected columns span all of X.

    Examples
    --------
    >>> import numpy as np
    >>> from fsdask.evaluate import pev
    >>> rng = np.random.default_rng(0)
    >>> s = rng.normal(size=(50, 2))
    >>> round(pev(np.hstack([s, s @ rng.normal(size=(2, 8))]), [0, 1]), 12)
    1.0
    """
    return 1.0 - reconstruction_error(X, selected, center=center)
