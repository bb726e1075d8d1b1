"""Every resample of SparseHSIC from one pass over X.

SparseHSIC reads X once, for A = X H Δᵀ/(n − 1) (p × c; :mod:`fsdask.methods.hsic.matrix`),
and the rest of its fit reads A only.  A resample S_r's matrix

    A_r = X_{S_r}ᵀ H_r Δ_rᵀ / (|S_r| − 1) = Σ_{i∈S_r} x_i δ̃_iᵀ

is a weighted sum over the samples of S_r, with δ̃ = H_r Δ_rᵀ/(|S_r| − 1) the resample's own
centred response factor (Δ_r built from y[S_r], as a refit builds it; zero outside S_r).  So
one product per block, X_bᵀ W_b with W (n × Σ c_r) stacking every resample's δ̃, gives every
A_r at once, and the membership products of the same call
(:func:`fsdask.linalg.colstats.membership_sums`) give each resample's shifted sums and sums of
squares: its standard deviations and the features constant within it.  For class labels
(Δ_r: 1/n_k on the samples of class k) A_r is a function of the class sums alone,
``A_r[:, k] = (T_k/n_k − T/n_r)/(n_r − 1)``, so the pass makes only the membership products
of the class sums and squares, and the second half of each complementary pair costs nothing
(all samples minus the first, :func:`fsdask.stability.onepass.complements`).  Each
resample's step 3
(SparsePM/R1D and ρ) then runs on its A_r in memory, the resamples in parallel on fsdask's
thread pool (:func:`fsdask.linalg.threads.parallel_map`), through
:meth:`~fsdask.methods.hsic.SparseHSIC.fit_stats` — the code a refit runs after its pass —,
so every resample selects what a refit on its samples selects, to rounding.  With k given,
:mod:`fsdask.stability.hsictop` takes the same pass but keeps only each block's candidate
rows of every A_r.

Memory: per block the partial sums, (Σ c_r + 2V + 4) × p_b float64 (V = resamples + 1, the
fit on all samples included; for class labels 2·V_b·C + 4 rows, V_b ≈ V/2 with
complementary pairs); the client holds them for all p features — about R·(c + 2) × p
float64, R·C × p for C classes — and :func:`fits` sends a fit whose sums (twice) exceed the
memory budget to the refits instead.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any

import numpy as np
from sklearn.base import clone

from fsdask._validation import class_codes
from fsdask.base import top_k_mask
from fsdask.linalg.colstats import (
    MOMENT_MAXIMA,
    membership_rows,
    membership_sums,
    merged_screen,
)
from fsdask.linalg.threads import parallel_map
from fsdask.methods.hsic import SparseHSIC
from fsdask.methods.hsic.matrix import centred_response
from fsdask.stability.onepass import Variant, complements, membership, sources, variant_counts

#: a feature is constant within a resample when its sum of squared deviations is at most
#: this many ulps of its shifted sum of squares per sample (the rounding of the sums; exact
#: 0 for integer data), as a refit finds it from the resample's range
CONSTANT_ULPS = 4.0


def one_pass_hsic(estimator: Any) -> bool:
    """Whether a selector's resamples come from :func:`resample_selections`: SparseHSIC."""
    return isinstance(estimator, SparseHSIC)


def resample_factors(est: SparseHSIC, y: Any, rows: list[np.ndarray | None]) -> list[tuple]:
    """Step 1 of each resample: (Δ_r, kind, info) of y[S_r] (:meth:`SparseHSIC.response_of`).

    Parameters
    ----------
    est : SparseHSIC
    y : ndarray (n,) or (n, t)
    rows : list of index arrays (None: all samples)

    Returns
    -------
    list of (ndarray (c_r, |S_r|), str, dict).  Raises what a refit's step 1 raises (e.g. a
    resample with a single class), before X is read.
    """
    y = np.asarray(y)
    return [est.response_of(y if r is None else y[r]) for r in rows]


def weight_matrix(
    factors: list[tuple], rows: list[np.ndarray | None], n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which samples each resample holds, and the stacked centred factors W.

    Returns
    -------
    member : int8 ndarray (n, V), 0 where sample i is in resample v, −1 elsewhere
    W : float64 ndarray (n, Σ c_r), resample r's columns hold H_r Δ_rᵀ/(|S_r| − 1) on its
        samples and 0 elsewhere
    offsets : int ndarray (V + 1,), resample r's columns are ``offsets[r]:offsets[r + 1]``

    Memory: n × V bytes and n × Σ c_r float64.
    """
    widths = [f[0].shape[0] for f in factors]
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    member = np.full((n, len(rows)), -1, np.int8)
    W = np.zeros((n, int(offsets[-1])))
    for v, (f, r) in enumerate(zip(factors, rows)):
        sel = slice(None) if r is None else r
        member[sel, v] = 0
        W[sel, offsets[v] : offsets[v + 1]] = centred_response(f[0], f[0].shape[1])
    return member, W, offsets


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each resample's parts lie in the pass's sums (:func:`resample_sums`).

    Attributes
    ----------
    member : int8 ndarray (n, V_b), the membership of the resamples whose products are made
    weights : float ndarray (n, W) or None, the stacked centred factors (general Δ)
    offsets : int ndarray (V + 1,) or None, resample v's weight rows
    classes : tuple or None, for a categorical response: ``(base, derived, counts)`` —
        the resamples with products, those derived as all samples minus another
        (:func:`fsdask.stability.onepass.complements`) and the (V, C) class counts
    sizes : list of int, the samples of each resample
    """

    member: np.ndarray
    weights: np.ndarray | None
    offsets: np.ndarray | None
    classes: tuple | None
    sizes: list

    @property
    def n_classes(self) -> int:
        return 1 if self.classes is None else self.classes[2].shape[1]

    @property
    def widths(self) -> list[int]:
        """c_r of each resample: the columns of its A_r (the classes present in it, for a
        categorical response)."""
        if self.classes is None:
            return [int(c) for c in np.diff(self.offsets)]
        return [int(c) for c in (self.classes[2] > 0).sum(axis=1)]

    @functools.cached_property
    def class_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a categorical response, (source (V, 2), counts (V, C), sizes (V,)) float64
        but ``source``: each resample's sums as a base resample's (second −1) or one base's
        minus another's (:func:`~fsdask.stability.onepass.sources`), its class counts and
        its samples — the arguments of the compiled kernels of
        :mod:`fsdask.stability.hsictop`, made once per layout."""
        base, derived, counts = self.classes
        source = sources(base, derived, len(self.sizes)).reshape(-1, 2)
        return source, counts.astype(np.float64), np.asarray(self.sizes, dtype=np.float64)

    @property
    def rows(self) -> int:
        """Rows of the pass's sums."""
        V, W = self.member.shape[1], 0 if self.weights is None else self.weights.shape[1]
        return membership_rows(V, self.n_classes, W > 0, W)


def layout_of(factors: list[tuple], y: Any, rows: list[np.ndarray | None], n: int) -> Layout:
    """The products the pass makes: a categorical response's class sums (A_r is a function
    of them, and the second half of a complementary pair is all samples minus the first),
    any other response's stacked centred Δ (:func:`weight_matrix`)."""
    sizes = [n if r is None else r.size for r in rows]
    if factors[0][1] != "categorical":
        member, W, offsets = weight_matrix(factors, rows, n)
        return Layout(member, W, offsets, None, sizes)
    classes, codes = class_codes(np.asarray(y))
    variants = [Variant(r, codes if r is None else codes[r], None) for r in rows]
    derived = complements(variants, n)
    base = [k for k in range(len(rows)) if k not in derived]
    member = membership([variants[k] for k in base], n, classes.size)[0]
    counts = variant_counts(variants, n, classes.size)
    return Layout(member, None, None, (base, derived, counts), sizes)


def fits(ctx: Any, layout: Layout, p: int) -> bool:
    """Whether the pass's sums (twice: the blocks and their join) fit the fit's budget."""
    return ctx.execution.fits(8.0 * layout.rows * p, copies=2)


def resample_sums(ex: Any, X: Any, layout: Layout) -> np.ndarray:
    """Every resample's sums (its A_r), shifted moments and X's screen, in one pass.

    Parameters
    ----------
    ex : Execution, the fit's (it counts the pass)
    X : dask array (n, p), sample or feature blocks, NumPy or CSR
    layout : Layout, from :func:`layout_of`

    Returns
    -------
    ndarray (``layout.rows``, p), float64 (:func:`fsdask.linalg.colstats.membership_sums`):
    rows ``Σ_{i∈S_v, c} (x − K)`` (V_b·C), ``Σ_{i∈S_v, c} (x − K)²`` (V_b·C), for a general
    Δ ``Σ_i W_iw (x − K)`` (Σ c_r: A_r transposed, since the columns of W sum to 0), then
    the NaN/Inf count, K, −min and max.  Work: 2·(2·V_b·C + W)·n·p flop in BLAS products.
    """
    fn, rows, columns = pass_terms(ex, X, layout)
    return ex.sum_blocks(fn, X, rows, shape=(layout.rows,), maxima=MOMENT_MAXIMA, columns=columns)


def pass_terms(ex: Any, X: Any, layout: Layout) -> tuple:
    """The block function, its row argument and its column arguments (the shift K) of the
    pass of :func:`resample_sums`, for :meth:`~fsdask.linalg.execution.Execution.sum_blocks`
    and its kin."""
    V = layout.member.shape[1]
    K = ex.first_row(X)
    # one row argument: a blocked reduction gives every row argument's columns one index
    member = layout.member.astype(np.float64)
    rows = member if layout.weights is None else np.hstack([member, layout.weights])
    fn = functools.partial(_block, n_variants=V, n_classes=layout.n_classes)
    return fn, rows, () if K is None else (K,)


def _block(xb, rows, *shift, n_variants: int, n_classes: int):
    """:func:`membership_sums` of one block: its rows' membership and weights unpacked."""
    member = rows[:, :n_variants].astype(np.int64)
    W = rows[:, n_variants:] if rows.shape[1] > n_variants else None
    return membership_sums(xb, member, W, shift[0] if shift else None, n_classes=n_classes)


def resample_parts(sums: np.ndarray, v: int, layout: Layout, cols: Any = None) -> tuple:
    """Resample v's A_rᵀ (c_r × p), ``Σ (x − K)`` and ``Σ (x − K)²`` from the pass's sums
    (of the columns ``cols`` only: an index array or mask; None: all).

    For a categorical response Δ_r holds 1/n_k for the samples of class k (the classes
    present in the resample, in order), so
    ``A_r[:, k] = (T_k / n_k − T / n_r) / (n_r − 1)`` with T_k the class sums (the shift
    K cancels).  The arithmetic is column by column: a column's values do not depend on
    which other columns are taken.
    """

    def rows(a: int, b: int) -> np.ndarray:
        return sums[a:b] if cols is None else sums[a:b, cols]

    if layout.classes is None:
        V = layout.member.shape[1]
        A = rows(2 * V + layout.offsets[v], 2 * V + layout.offsets[v + 1])
        return A, rows(v, v + 1)[0], rows(V + v, V + v + 1)[0]
    base, derived, counts = layout.classes
    Vb, C = len(base), counts.shape[1]

    def part(which: int, k: int) -> np.ndarray:
        i = base.index(k)
        return rows(which * Vb * C + i * C, which * Vb * C + (i + 1) * C)

    if v in derived:
        f, j = derived[v]
        T, Q = part(0, f) - part(0, j), part(1, f) - part(1, j)
    else:
        T, Q = part(0, v), part(1, v)
    s1, n_v, present = T.sum(axis=0), layout.sizes[v], counts[v] > 0
    A = (T[present] / counts[v, present][:, None] - s1 / n_v) / (n_v - 1)
    return A, s1, Q.sum(axis=0)


def resample_stats(sums: np.ndarray, v: int, layout: Layout, active: np.ndarray) -> np.ndarray:
    """Resample v's stats in the layout of :func:`~fsdask.methods.hsic.hsic_pass`.

    Rows A_rᵀ (c_r), NaN/Inf counts (0: X was screened), ranges (0 where the feature is
    constant within the resample, as a refit's screen finds it) and standard deviations,
    over the ``active`` features (a mask: those not constant on all samples; or the
    indices of the columns wanted).

    Returns
    -------
    ndarray (c_r + 3, p_active), float64.
    """
    cols = None if active.dtype == bool and active.all() else active
    A, s1, s2 = resample_parts(sums, v, layout, cols)
    n_v = layout.sizes[v]
    dev = np.maximum(s2 - s1 * s1 / n_v, 0.0)  # Σ (x − x̄)² over the resample
    const = dev <= CONSTANT_ULPS * n_v * np.finfo(np.float64).eps * s2
    lo, hi = (sums[-2], sums[-1]) if cols is None else (sums[-2, cols], sums[-1, cols])
    range_ = np.where(const, 0.0, hi + lo)  # the global max − min otherwise
    sd = np.sqrt(dev / (n_v - 1))
    return np.vstack([A, np.zeros((1, A.shape[1])), range_, sd])


def resolved_k(k: Any, m: int) -> int:
    """``n_features_to_select`` (an int, or a fraction in (0, 1)) as step 3 resolves it
    over m active features."""
    return max(1, int(round(k * m))) if isinstance(k, float) and 0 < k < 1 else int(k)


def selection_of(est: SparseHSIC, stats: np.ndarray, response: tuple) -> tuple:
    """A resample's support and scores: a clone's step 3 on its stats, as its refit's
    ``support_`` and ``scores_`` (the top ``n_features_to_select`` by the fit's ranking).

    Returns
    -------
    (bool ndarray (p,), float ndarray (p,)).
    """
    out = clone(est).fit_stats(stats, response, None)
    active, p = np.asarray(out.active, bool), stats.shape[1]
    scores = np.zeros(p)
    scores[active] = out.scores
    k = est.n_features_to_select
    support = np.zeros(p, bool)
    if k is None:
        support[active] = out.support
        return support, scores
    k = resolved_k(k, p)
    key = np.full(p, -np.inf)
    key[active] = out.rank_key  # ranking_ <= k: the k best keys, ties in feature order
    return top_k_mask(key, k), scores


def resample_selections(
    ctx: Any, est: SparseHSIC, X: Any, factors: list[tuple], layout: Layout, screen
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every resample's selection from one pass over X.

    Parameters
    ----------
    ctx : FitContext, the fit's (its execution counts the pass, warnings go through it)
    est : SparseHSIC, unfitted parameters only are used
    X : dask array (n, p), any layout
    factors : list of (Δ_r, kind, info), each resample's :func:`resample_factors`
    layout : Layout, the products of the pass (:func:`layout_of`)
    screen : callable ``(bad, lo, hi) -> active``, the fit's screen of X (raises on NaN/Inf)

    Returns
    -------
    (bool ndarray (V, p_active), float ndarray (V, p_active), bool ndarray (p,)): each
    resample's support and scores over the active features, and the active mask.
    Memory: see the module docstring; each thread holds one resample's stats and A_r.
    """
    sums = resample_sums(ctx.execution, X, layout)
    active = screen(*merged_screen(sums))

    def one(v: int) -> tuple:
        stats = resample_stats(sums, v, layout, active)
        return selection_of(est, stats, factors[v])

    outs = each_resample(ctx, one, len(factors))
    support = np.array([o[0] for o in outs], bool)
    return support, np.array([o[1] for o in outs]), active


def each_resample(ctx: Any, one: Any, V: int) -> list:
    """``[one(v) for v in range(V)]`` on fsdask's thread pool, every resample's warnings
    collected into one warning of the fit (``ctx.warn``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every resample says its warnings
        outs = parallel_map(one, range(V))
    if caught:
        ctx.warn(
            f"{len(caught)} warning(s) in the fits of {V} resamples (first: {caught[0].message})",
            UserWarning,
        )
    return outs


__all__ = [
    "one_pass_hsic",
    "resample_factors",
    "weight_matrix",
    "Layout",
    "layout_of",
    "fits",
    "resample_sums",
    "pass_terms",
    "resample_parts",
    "resample_stats",
    "resolved_k",
    "selection_of",
    "resample_selections",
    "each_resample",
]
