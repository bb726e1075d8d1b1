"""PCA-based feature selection baselines, as compared against in Masaeli et al. (SDM 2010, §7).

All work from the small factor ``B = S Vᵀ`` (r × p) of the centred X (``X = U S Vᵀ``,
:func:`fsdask.linalg.tsqr.centred_factor`: p × p Gram for small p, TSQR of the tall-skinny
Xᵀ otherwise), so the loadings ``V = Bᵀ S⁻¹`` (p × r) never need an n × p or p × p pass again.

Sample blocks (``streams_samples``): the p × p Gram of the centred X is a sum over row
blocks, so JolliffeI, JolliffeNI and PFA read a sample-blocked X (an AnnData CSR matrix, a
store chunked by samples) as it is stored, in one pass, CSR blocks never densified.  A
sample-blocked X is taken by feature blocks first when it has more features than samples
(its factor comes from the n × n side) or when the p × p Gram with the partial sums of its
tree-sum does not fit the memory budget (:func:`fsdask.linalg.tsqr.gram_over_samples`).  SparsePCASelector fits scikit-learn's ``SparsePCA`` on
the dense centred X itself, so it takes X by feature blocks as every other method.

* :class:`JolliffeI` — iterative (Jolliffe 2002, as described in §7): pick the feature with
  the largest |loading| on the first PC, remove it, recompute the first PC of the remaining
  features, repeat.  With ``Xᵀ_{-S}X_{-S} = B_{-S}ᵀB_{-S}`` the first PC comes from the r × r
  matrix ``BBᵀ − B_S B_Sᵀ`` (a downdate per pick).
* :class:`JolliffeNI` — non-iterative: for the k-th PC (k = 1 … q) take the unpicked
  feature with the largest |loading|.
* :class:`PFA` — principal feature analysis (Lu, Cohen, Zhou & Tian 2007): k-means (q
  clusters, several seeded restarts) on the rows of the p × q loading matrix; keep the
  feature nearest each centroid.
* :class:`SparsePCASelector` — the SPCA baseline as run in §7: one sparse component with
  exactly q nonzero loadings (scikit-learn's ``SparsePCA``, whose ℓ1 weight α is bisected
  to hit q nonzeros; note it is Mairal et al.'s dictionary-learning formulation, not Zou et
  al.'s elastic-net SPCA (6.6), for which no maintained Python implementation exists).
* top variance is :class:`fsdask.Filter` with ``statistic="variance"``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import dask.array as da
import numpy as np

from fsdask._validation import Int, StrOptions, is_sample_blocked
from fsdask.base import FitOutput, Selector
from fsdask.errors import ParameterError
from fsdask.fitting import FitContext, iterate
from fsdask.io.options import ReadOptions
from fsdask.io.rechunk import to_feature_blocks
from fsdask.linalg.tsqr import FACTOR, centred_factor, factor_nbytes, gram_over_samples


def _factor(X: da.Array, scale: bool, ctx: FitContext) -> tuple[np.ndarray, np.ndarray]:
    """B (r × p) and singular values s (r,) of the centred X; the passes over X are counted
    in the fit's execution."""
    if is_sample_blocked(X) and not gram_over_samples(X, ctx.execution):
        # a wide X (its n × n side), or a p × p Gram too large to tree-sum: feature blocks
        options = ReadOptions(memory_budget=ctx.budget)
        X = to_feature_blocks(X, where="X (PCA baseline)", options=options)
    B, s = centred_factor(X, scale, ctx.execution)
    return B, s[: B.shape[0]]


def _loadings(B: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The loadings ``V[:, :k]`` (p × k) of the first k PCs, from those rows of the factor
    ``B = diag(s) Vᵀ`` and their s: a transposed view of a new k × p array."""
    return (B / s[:, None]).T


def _check_q(q, p: int, name: str) -> int:
    if q is None:
        return max(1, int(np.ceil(p / 2)))
    if q > p:
        raise ParameterError(f"n_features_to_select={q} but X has only {p} non-constant features")
    return int(q)


def default_q(n: int, p: int) -> int:
    """How many features PFA and SPCA select when not told: the number of principal
    components of the centred X, at most half the features.

    The centred n × p X has at most n − 1 components, so n − 1 features in general position
    already span its columns (the reconstruction error of §7 is 0 from there on); more picks
    add only redundant features, and each costs PFA a k-means cluster and SPCA nonzero
    loadings.  Masaeli et al. sweep q and fix no default; on n ≥ p data this is the top half.

    Parameters
    ----------
    n, p : int
        Samples and (non-constant) features.

    Returns
    -------
    int
        ``max(1, min(⌈p / 2⌉, n − 1))``.
    """
    return max(1, min(int(np.ceil(p / 2)), n - 1))


def _order_to_scores(order: np.ndarray, p: int) -> np.ndarray:
    """Scores that reproduce a pick order: first pick highest, unpicked 0."""
    scores = np.zeros(p)
    scores[order] = np.arange(order.size, 0, -1, dtype=float) / order.size
    return scores


class _PCABase(Selector):
    #: the centred p × p Gram is a sum over sample blocks (:func:`_factor`)
    streams_samples = True
    _parameter_constraints: dict = {
        "n_features_to_select": [Int(1), None],
        "scale": ["boolean"],
        "on_constant": [StrOptions({"drop", "error"})],
    }

    def __init__(
        self,
        n_features_to_select: int | None = None,
        scale: bool = False,
        on_constant: Literal["drop", "error"] = "drop",
    ):
        self.n_features_to_select = n_features_to_select
        self.scale = scale
        self.on_constant = on_constant

    def _check_shape(self, n: int, p: int) -> None:
        """Refuse, before X is read, a factor B that this process cannot hold."""
        self._check_client_array(factor_nbytes(n, p), FACTOR, n, p)


class JolliffeI(_PCABase):
    """Jolliffe's iterative loading method: largest ``|loading|`` on PC1, remove, recompute.

    Parameters
    ----------
    n_features_to_select : int or None (half of p)
        Number of picks; the pick order is the ranking (unpicked features follow, by their
        ``|loading|`` on the last first-PC).
    scale : bool
        Standardise columns (default: centre only, as in the paper).
    on_constant : {"drop", "error"}
        Constant features get weight 0 and are never selected (``drop``), or raise.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        Higher for earlier picks.
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank`` and ``selected`` over ``feature``, the fit's provenance in its
        attributes.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import principal_sources
    >>> X = principal_sources(n_samples=40, n_features=100, n_sources=4).dataset["X"].values
    >>> sel = fsdask.JolliffeI(n_features_to_select=4).fit(X)
    >>> sel.get_support(indices=True)
    array([0, 1, 2, 3])
    """

    method_name = "jolliffe_i"

    def _fit(self, X: da.Array, y, ctx: FitContext) -> FitOutput:
        p = X.shape[1]
        q = _check_q(self.n_features_to_select, p, "JolliffeI")
        B, s = _factor(X, self.scale, ctx)
        order, last = jolliffe_i_picks(B, q, ctx, s=s)
        free = np.ones(p, bool)
        free[order] = False
        scores = _order_to_scores(order, p)
        rest = np.flatnonzero(free)
        if rest.size and last[rest].max() > 0:
            scores[rest] = 0.5 / order.size * last[rest] / last[rest].max()
        sup = np.zeros(p, bool)
        sup[order] = True
        return FitOutput(scores=scores, support=sup, attrs={"pick_order": [int(j) for j in order]})


@dataclasses.dataclass
class _Picks:
    """The state of Jolliffe's iterative picks: O(p), whatever the number of picks."""

    #: features not picked yet
    free: np.ndarray
    #: the picks so far, in order
    order: list
    #: |loadings| of the last first PC (the unpicked features' scores)
    last: np.ndarray


def jolliffe_i_picks(
    B: np.ndarray, q: int, ctx: FitContext | None = None, s: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Jolliffe's iterative picks from the factor ``B = S Vᵀ`` (r × p) of the centred X.

    Each pick is the free feature with the largest ``|loading|`` on the first PC of the
    features not picked yet.  ``X_{-S}ᵀX_{-S} = B_{-S}ᵀB_{-S}`` shares its nonzero spectrum
    with the r × r ``K = BBᵀ − B_S B_Sᵀ``, so a pick costs one r × r eigendecomposition, one
    r × p product and a rank-one downdate of K.  The rows of ``B = S Vᵀ`` are orthogonal,
    ``BBᵀ = S²``: given ``s``, K starts from that diagonal instead of the r²p product
    (2·10¹¹ flop at r = 1000, p = 10⁵).  Memory: K
    (r × r) and three length-p arrays besides B.

    Parameters
    ----------
    B : ndarray of shape (r, p)
        The factor of the centred X (:func:`fsdask.linalg.tsqr.centred_factor`).
    q : int
        Picks to make (1 ≤ q ≤ p).
    ctx : FitContext, optional
        The fit the picks belong to: a progress line per pick, and the picks checkpointed
        (a fit run again continues after its last saved pick).
    s : ndarray of shape (r,), optional
        The singular values with ``B = diag(s) Vᵀ`` (V with orthonormal columns, as
        :func:`fsdask.linalg.tsqr.centred_factor` gives); None forms ``BBᵀ``, for any B.

    Returns
    -------
    order : ndarray of shape (q,)
        The picks, first first.
    last : ndarray of shape (p,)
        ``|loadings|`` of the last first PC computed, 0 on picked features.
    """
    p = B.shape[1]
    # r × r, = B_{-S} B_{-S}ᵀ after the downdates
    K = np.diag(np.asarray(s[: B.shape[0]], dtype=np.float64) ** 2) if s is not None else B @ B.T
    downdated = [0]  # picks already taken out of K (a restored state brings several)

    def step(s: _Picks) -> _Picks:
        for j in s.order[downdated[0] :]:
            K[...] -= np.outer(B[:, j], B[:, j])
        downdated[0] = len(s.order)
        _, W = np.linalg.eigh(K)
        v = B.T @ W[:, -1]  # loadings of PC1 of X_{-S}, up to scale
        v[~s.free] = 0
        s.last = np.abs(v)
        j = int(np.argmax(s.last))
        s.order.append(j)
        s.free[j] = False
        if ctx is not None:
            ctx.log_iteration(len(s.order), feature=j, loading=float(s.last[j]))
        return s

    state = _Picks(free=np.ones(p, bool), order=[], last=np.zeros(p))
    loop = iterate(
        "jolliffe_i/picks", state, step, max_iter=q, ctx=ctx, bound="n_features_to_select"
    )
    picks = loop.state
    return np.asarray(picks.order, dtype=np.int64), picks.last


class JolliffeNI(_PCABase):
    """Jolliffe's non-iterative loading method: for PCs 1 … q, the unpicked feature with the largest ``|loading|``.

    The pick order (over min(p, r) PCs) is the ranking; features beyond are ranked by their
    largest ``|loading|`` weighted by the PC's singular value.

    Parameters
    ----------
    n_features_to_select : int or None (half of p)
        Features kept: the first picks.
    scale : bool
        Standardise columns (default: centre only, as in the paper).
    on_constant : {"drop", "error"}
        Constant features get weight 0 and are never selected (``drop``), or raise.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        Higher for earlier picks.
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank`` and ``selected`` over ``feature``, the fit's provenance in its
        attributes.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import principal_sources
    >>> X = principal_sources(n_samples=40, n_features=100, n_sources=4).dataset["X"].values
    >>> sel = fsdask.JolliffeNI(n_features_to_select=4).fit(X)
    >>> sel.get_support(indices=True)
    array([0, 1, 2, 3])
    """

    method_name = "jolliffe_ni"

    def _fit(self, X: da.Array, y, ctx: FitContext) -> FitOutput:
        p = X.shape[1]
        q = _check_q(self.n_features_to_select, p, "JolliffeNI")
        B, s = _factor(X, self.scale, ctx)
        r = B.shape[0]
        free = np.ones(p, bool)
        order = []
        w = np.zeros(p)  # max_k |V_ik| s_k: the unpicked features' scores
        for k in range(r):  # the loadings of PC k, V[:, k] = B[k] / s_k: no p × r copy of V
            a = np.abs(B[k] / s[k])
            if k < p:
                j = int(np.argmax(np.where(free, a, -1.0)))
                order.append(j)
                free[j] = False
            np.maximum(w, a * s[k], out=w)
        order = np.asarray(order)
        scores = _order_to_scores(order, p)
        rest = np.flatnonzero(free)
        if rest.size:
            w = w[rest]
            scores[rest] = 0.5 / order.size * w / max(w.max(), 1e-300)
        sup = np.zeros(p, bool)
        sup[np.argsort(-scores, kind="stable")[:q]] = True
        return FitOutput(scores=scores, support=sup)


class PFA(_PCABase):
    """Principal feature analysis (Lu et al. 2007): k-means on the rows of the loading matrix.

    Parameters
    ----------
    n_features_to_select : int or None
        q = number of clusters = features kept; None: the number of principal components of
        the centred X, at most half the features (:func:`default_q`).
    n_components : int or None
        Columns of the loading matrix (PCs); None uses q (capped at the rank).
    n_init : int
        k-means restarts (the paper: 10), seeds ``random_state + i``; the best inertia wins.
    random_state : int
        Base seed.
    max_iter : int
        k-means iterations per restart.
    scale : bool
        Standardise columns (default: centre only).
    on_constant : {"drop", "error"}
        Constant features get weight 0 and are never selected (``drop``), or raise.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        Higher for the features nearest their cluster's centre.
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank`` and ``selected`` over ``feature``, the fit's provenance in its
        attributes.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import principal_sources
    >>> X = principal_sources(n_samples=40, n_features=100, n_sources=4).dataset["X"].values
    >>> sel = fsdask.PFA(n_features_to_select=4).fit(X)
    >>> int(sel.get_support().sum())
    4
    """

    method_name = "pfa"
    #: a progress line per k-means restart, with the time left to the last
    progress_bound = "n_init"
    _parameter_constraints: dict = {
        **_PCABase._parameter_constraints,
        "n_components": [Int(1), None],
        "n_init": [Int(1)],
        "random_state": [Int(0)],
        "max_iter": [Int(1)],
    }

    def __init__(
        self,
        n_features_to_select: int | None = None,
        n_components: int | None = None,
        n_init: int = 10,
        random_state: int = 0,
        max_iter: int = 100,
        scale: bool = False,
        on_constant: Literal["drop", "error"] = "drop",
    ):
        super().__init__(n_features_to_select, scale, on_constant)
        self.n_components = n_components
        self.n_init = n_init
        self.random_state = random_state
        self.max_iter = max_iter

    def _fit(self, X: da.Array, y, ctx: FitContext) -> FitOutput:
        p = X.shape[1]
        q = _check_q(self.n_features_to_select or default_q(X.shape[0], p), p, "PFA")
        B, s = _factor(X, self.scale, ctx)
        k = min(self.n_components or q, B.shape[0])
        Z = _loadings(B[:k], s[:k])  # the first k PCs' loadings (p × k): no p × r copy
        best = None
        for i in range(int(self.n_init)):
            run = _kmeans(Z, q, np.random.default_rng(self.random_state + i), self.max_iter)
            if best is None or run[2] < best[2]:
                best = run
            ctx.log_iteration(i + 1, inertia=run[2], lloyd_iterations=run[3])
        labels, centers, _, n_iter = best
        d = np.sum((Z - centers[labels]) ** 2, axis=1)
        picks, sizes = [], []
        for c in range(q):
            members = np.flatnonzero(labels == c)
            if members.size:
                picks.append(_nearest(members, d[members]))
                sizes.append(members.size)
        picks = np.asarray(picks)[np.argsort(-np.asarray(sizes), kind="stable")]
        scores = _order_to_scores(picks, p)
        rest = np.setdiff1d(np.arange(p), picks)
        if rest.size:  # Σ_i B_ij², a slice of columns at a time: no r × p copy
            var = np.concatenate(
                [np.sum(B[:, c] ** 2, axis=0) for c in np.array_split(rest, -(-rest.size // 4096))]
            )
            scores[rest] = 0.5 / max(picks.size, 1) * var / max(var.max(), 1e-300)
        sup = np.zeros(p, bool)
        sup[picks] = True
        return FitOutput(scores=scores, support=sup, n_iter=n_iter, attrs={"n_components": int(k)})


#: distances to a centroid equal to this relative tolerance are a tie (rounding decides nothing)
TIE_RTOL = 1e-9


def _nearest(members: np.ndarray, d: np.ndarray) -> int:
    """The member nearest its centroid, ties to the lowest index: a cluster of two features
    has both at the same distance from its mean, and which one rounding favours would
    depend on the order the Gram was summed in (sample or feature blocks)."""
    return int(members[np.flatnonzero(d <= d.min() * (1 + TIE_RTOL))[0]])


def _kmeans(
    Z: np.ndarray, k: int, rng: np.random.Generator, max_iter: int
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Lloyd's k-means with k-means++ seeding (small, dense: p × k loadings); labels,
    centres, inertia and the number of Lloyd iterations."""
    p = Z.shape[0]
    centers = np.empty((k, Z.shape[1]))
    centers[0] = Z[rng.integers(p)]
    d2 = np.sum((Z - centers[0]) ** 2, axis=1)
    for c in range(1, k):
        tot = d2.sum()
        idx = rng.choice(p, p=d2 / tot) if tot > 0 else rng.integers(p)
        centers[c] = Z[idx]
        d2 = np.minimum(d2, np.sum((Z - centers[c]) ** 2, axis=1))
    labels = np.zeros(p, dtype=np.int64)
    n_iter = 0
    for _ in range(max_iter):
        n_iter += 1
        D = (Z * Z).sum(1)[:, None] - 2 * Z @ centers.T + (centers * centers).sum(1)[None, :]
        new = np.argmin(D, axis=1)
        for c in range(k):
            m = new == c
            if m.any():
                centers[c] = Z[m].mean(axis=0)
        if np.array_equal(new, labels) and _ > 0:
            break
        labels = new
    inertia = float(np.sum((Z - centers[labels]) ** 2))
    return labels, centers, inertia, n_iter


class SparsePCASelector(_PCABase):
    """SPCA selection as in §7: one sparse component with exactly q nonzero loadings.

    scikit-learn's ``SparsePCA(n_components=1, alpha)`` is fitted on the centred X (held in
    memory: a baseline for n × p that fits) and α is bisected on a log scale until q
    loadings are nonzero (or the closest count ≥ q, the q largest ``|loadings|`` kept).

    Parameters
    ----------
    n_features_to_select : int or None
        q, the nonzero loadings sought; None: the number of principal components of the
        centred X, at most half the features (:func:`default_q`).
    max_bisect : int
        Bisection steps on α at most.
    random_state : int
        Seed of ``SparsePCA``.
    scale : bool
        Standardise columns (default: centre only).
    on_constant : {"drop", "error"}
        Constant features get weight 0 and are never selected (``drop``), or raise.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        ``|loading|`` on the sparse component.
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank`` and ``selected`` over ``feature``, the fit's provenance in its
        attributes.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import principal_sources
    >>> X = principal_sources(n_samples=40, n_features=100, n_sources=4).dataset["X"].values
    >>> sel = fsdask.SparsePCASelector(n_features_to_select=4).fit(X)
    >>> int(sel.get_support().sum())
    4
    """

    method_name = "spca"
    #: a progress line per bisection step on α, with the most time left
    progress_bound = "max_bisect"
    #: SparsePCA fits the dense centred X itself, not a sum over samples
    streams_samples = False
    _parameter_constraints: dict = {
        **_PCABase._parameter_constraints,
        "max_bisect": [Int(1)],
        "random_state": [Int(0)],
    }

    def __init__(
        self,
        n_features_to_select: int | None = None,
        max_bisect: int = 30,
        random_state: int = 0,
        scale: bool = False,
        on_constant: Literal["drop", "error"] = "drop",
    ):
        super().__init__(n_features_to_select, scale, on_constant)
        self.max_bisect = max_bisect
        self.random_state = random_state

    def _check_shape(self, n: int, p: int) -> None:
        """Refuse, before X is read, a centred X that this process cannot hold."""
        self._check_client_array(8.0 * n * p, "the centred X (n × p float64)", n, p)

    def _fit(self, X: da.Array, y, ctx: FitContext) -> FitOutput:
        from sklearn.decomposition import SparsePCA

        p = X.shape[1]
        q = _check_q(self.n_features_to_select or default_q(X.shape[0], p), p, "SparsePCASelector")
        (Xc,) = ctx.execution.compute(X.astype(np.float64))  # on the client, never in one task
        Xc = Xc - Xc.mean(0)
        if self.scale:
            Xc = Xc / Xc.std(0, ddof=1)

        def load(alpha):
            m = SparsePCA(
                n_components=1, alpha=alpha, random_state=self.random_state, max_iter=200
            ).fit(Xc)
            return m.components_[0]

        # largest useful α: all loadings vanish once α ≥ max_j |x_jᵀ u| for the unit code u
        hi = 2.0 * float(np.abs(Xc).sum(axis=0).max())
        lo = 0.0
        best = load(1e-12 * hi)
        for it in range(int(self.max_bisect)):
            mid = np.sqrt(hi * lo) if lo > 0 else hi * 1e-3
            comp = load(mid)
            nnz = int(np.count_nonzero(comp))
            ctx.log_iteration(it + 1, alpha=mid, nonzero=nnz)
            if nnz >= q:
                lo, best = mid, comp
                if nnz == q:
                    break
            else:
                hi = mid
        scores = np.abs(best)
        sup = np.zeros(p, bool)
        sup[np.argsort(-scores, kind="stable")[:q]] = True
        return FitOutput(
            scores=scores,
            support=sup,
            attrs={"alpha": float(lo), "nnz": int(np.count_nonzero(best))},
        )
