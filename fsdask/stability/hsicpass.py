"""Every resample of SparseHSIC from one pass over X.

SparseHSIC reads X once, for A = X H Δᵀ/(n − 1) (p × c; :mod:`fsdask.methods.hsic.matrix`),
and the rest of its fit reads A only.  A resample S_r's matrix

    A_r = X_{S_r}ᵀ H_r Δ_rᵀ / (|S_r| − 1) = Σ_{i∈S_r} x_i δ̃_iᵀ

is a weighted sum over the samples of S_r, with δ̃ = H_r Δ_rᵀ/(|S_r| − 1) the resample's own
centred response factor (Δ_r built from y[S_r], as a refit builds it; zero outside S_r).  So
one product per block, X_bᵀ W_b with W (n × Σ c_r) stacking every resample's δ̃, gives every
A_r at once, and the membership products of the same call
(:func:`fsdask.linalg.colstats.membership_sums`) give each resample's shifted sums and sums of
squares: its standard deviations and the features constant within it.  Each resample's step 3
(SparsePM/R1D and ρ) then runs on its A_r in memory, the resamples in parallel on fsdask's
thread pool (:func:`fsdask.linalg.threads.parallel_map`), through
:meth:`~fsdask.methods.hsic.SparseHSIC.fit_stats` — the code a refit runs after its pass —,
so every resample selects what a refit on its samples selects, to rounding.

Memory: per block the partial sums, (Σ c_r + 2V + 4) × p_b float64 (V = resamples + 1, the
fit on all samples included); the client holds them for all p features, about
(R·c + 2R) × p float64, and :func:`fits` sends a fit whose sums exceed the memory budget
to the refits instead.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
from sklearn.base import clone

from fsdask.base import top_k_mask
from fsdask.linalg.colstats import MOMENT_MAXIMA, membership_rows, membership_sums
from fsdask.linalg.threads import parallel_map
from fsdask.methods.hsic import SparseHSIC
from fsdask.methods.hsic.matrix import centred_response

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


def pass_bytes(n_variants: int, n_weights: int, p: int) -> float:
    """Bytes of the summed statistics the client holds: (W + 2V + 4) × p float64."""
    return 8.0 * membership_rows(n_variants, 1, True, n_weights) * p


def fits(ctx: Any, n_variants: int, n_weights: int, p: int) -> bool:
    """Whether the pass's sums and a resample's A in each thread fit the fit's budget."""
    return ctx.execution.fits(pass_bytes(n_variants, n_weights, p), copies=2)


def resample_sums(ex: Any, X: Any, member: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Every resample's weighted sums (its A_r), shifted moments and X's screen, in one pass.

    Parameters
    ----------
    ex : Execution, the fit's (it counts the pass)
    X : dask array (n, p), sample or feature blocks, NumPy or CSR
    member, W : from :func:`weight_matrix`

    Returns
    -------
    ndarray (2V + Σ c_r + 4, p), float64: rows ``Σ_{i∈S_v} (x − K)`` (V), ``Σ (x − K)²``
    (V), ``Σ_i W_iw (x − K)`` (Σ c_r: A_r transposed, since the columns of W sum to 0),
    the NaN/Inf count, K, −min and max (:func:`fsdask.linalg.colstats.membership_sums`).
    Work: 2·(2V + Σ c_r)·n·p flop in BLAS products.
    """
    V, Wc = member.shape[1], W.shape[1]
    K = ex.first_row(X)
    # one row argument: a blocked reduction gives every row argument's columns one index
    rows = np.hstack([member.astype(np.float64), W])
    return ex.sum_blocks(
        functools.partial(_block, n_variants=V),
        X,
        rows,
        shape=(membership_rows(V, 1, True, Wc),),
        maxima=MOMENT_MAXIMA,
        columns=() if K is None else (K,),
    )


def _block(xb, rows, *shift, n_variants: int):
    """:func:`membership_sums` of one block: its rows' membership and weights unpacked."""
    member = rows[:, :n_variants].astype(np.int8)
    W = rows[:, n_variants:]
    return membership_sums(xb, member, W, shift[0] if shift else None, n_classes=1)


def resample_stats(
    sums: np.ndarray, v: int, offsets: np.ndarray, n_v: int, active: np.ndarray
) -> np.ndarray:
    """Resample v's stats in the layout of :func:`~fsdask.methods.hsic.hsic_pass`.

    Rows A_rᵀ (c_r), NaN/Inf counts (0: X was screened), ranges (0 where the feature is
    constant within the resample, as a refit's screen finds it) and standard deviations,
    over the ``active`` (not constant on all samples) features.

    Returns
    -------
    ndarray (c_r + 3, p_active), float64.
    """
    V = offsets.size - 1
    s1, s2 = sums[v], sums[V + v]
    A = sums[2 * V + offsets[v] : 2 * V + offsets[v + 1]]
    dev = np.maximum(s2 - s1 * s1 / n_v, 0.0)  # Σ (x − x̄)² over the resample
    const = dev <= CONSTANT_ULPS * n_v * np.finfo(np.float64).eps * s2
    range_ = np.where(const, 0.0, sums[-1] + sums[-2])  # the global max − min otherwise
    sd = np.sqrt(dev / (n_v - 1))
    out = np.vstack([A, np.zeros((1, A.shape[1])), range_, sd])
    return out if active.all() else out[:, active]


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
    k = max(1, int(round(k * p))) if isinstance(k, float) and 0 < k < 1 else int(k)
    key = np.full(p, -np.inf)
    key[active] = out.rank_key  # ranking_ <= k: the k best keys, ties in feature order
    return top_k_mask(key, k), scores


def resample_selections(
    ctx: Any, est: SparseHSIC, X: Any, y: Any, rows: list[np.ndarray | None], screen
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every resample's selection from one pass over X.

    Parameters
    ----------
    ctx : FitContext, the fit's (its execution counts the pass, warnings go through it)
    est : SparseHSIC, unfitted parameters only are used
    X : dask array (n, p), any layout
    y : ndarray (n,) or (n, t)
    rows : list of index arrays (None: all samples), the resamples
    screen : callable ``(bad, lo, hi) -> active``, the fit's screen of X (raises on NaN/Inf)

    Returns
    -------
    (bool ndarray (V, p_active), float ndarray (V, p_active), bool ndarray (p,)): each
    resample's support and scores over the active features, and the active mask.
    Memory: see the module docstring; each thread holds one resample's stats and A_r.
    """
    factors = resample_factors(est, y, rows)
    member, W, offsets = weight_matrix(factors, rows, X.shape[0])
    sums = resample_sums(ctx.execution, X, member, W)
    active = screen(sums[-4], -sums[-2], sums[-1])
    sizes = [X.shape[0] if r is None else r.size for r in rows]

    def one(v: int) -> tuple:
        stats = resample_stats(sums, v, offsets, sizes[v], active)
        return selection_of(est, stats, factors[v])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every resample says its warnings
        outs = parallel_map(one, range(len(rows)))
    if caught:
        ctx.warn(
            f"{len(caught)} warning(s) in the fits of {len(rows)} resamples "
            f"(first: {caught[0].message})",
            UserWarning,
        )
    support = np.array([o[0] for o in outs], bool)
    return support, np.array([o[1] for o in outs]), active


__all__ = [
    "one_pass_hsic",
    "resample_factors",
    "weight_matrix",
    "pass_bytes",
    "fits",
    "resample_sums",
    "resample_stats",
    "selection_of",
    "resample_selections",
]
