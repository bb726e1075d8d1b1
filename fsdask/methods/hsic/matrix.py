"""A = X H Δᵀ / (n − 1) in one pass over X (FeatureSelection, step 2).

Zarkoob (2010) ch. 3, in the thesis' orientation (X is m features × n samples; fsdask's X
is its transpose, so the thesis' row i is our column i):

* eq. (3.1): HSIC(Z) = (n − 1)⁻² Tr(K H B H), H = I − n⁻¹ 1 1ᵀ.
* eq. (3.2)/(3.3): with a linear kernel on the projection uᵀX, maximise
  uᵀ X H B H Xᵀ u over unit, sparse u.
* B = Δᵀ Δ (:mod:`.response`) and A = X H Δᵀ, so Q = A Aᵀ and u is the leading left
  singular vector of A (m × c).  **Scale** (the thesis leaves it open, and with it the
  meaning of ρ): we use the normalisation of (3.1), ``A = X H Δᵀ / (n − 1)`` so ‖A‖²_F is
  the HSIC estimate; Δ has class-indicator entries 1/n_c (§3.4.2), or a standardised y
  (linear kernel, §3.4.1).

Execution: A is computed in **one streaming pass** over X whatever its layout — sample
blocks as stored (an AnnData CSR matrix, a store chunked by samples) or feature blocks.
H Δᵀ has centred columns, so ``X H Δᵀ = Σ_b X_bᵀ (H Δᵀ)_b`` is a sum over row blocks, and
so are the screen's statistics (NaN/Inf counts, minima and maxima merged by maximum, and
the moments about X's first row behind the standard deviations;
:mod:`fsdask.linalg.colstats`): :func:`hsic_sums` asks
:meth:`~fsdask.linalg.execution.Execution.sum_blocks` for them, a CSR block never densified.
A is small (m × c).  If ``m·c·8`` bytes fit the fit's memory budget (``ctx.execution``;
``fsdask.memory-budget``, default 1 GiB, i.e. 1.3·10⁸ entries) it is held in memory and
every later step is NumPy; otherwise X is taken by feature blocks
(:func:`fsdask.io.rechunk.to_feature_blocks`, a no-op for a feature-blocked X) and A stays a
persisted dask array chunked by rows (:func:`hsic_matrix`, :mod:`fsdask.linalg.tall`).
Everything after step 2 — SparsePM, R1D, the ρ search — reads A only, never X (§3.3.1).

Checkpoint (not in the thesis): the pass is the costly step, so what it yields — A and the
screen's per-feature counts, O(m·c), never X — is saved as soon as it ends, when A is held
in memory (a larger A is not written, and a resumed fit reads X again).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import dask.array as da
import numpy as np

from fsdask._validation import is_sample_blocked
from fsdask.fitting import FitContext
from fsdask.io.options import ReadOptions
from fsdask.io.rechunk import to_feature_blocks
from fsdask.linalg import row_dot_summary
from fsdask.linalg.colstats import MOMENT_MAXIMA, moment_rows, moment_sums, xt_dot
from fsdask.linalg.execution import Execution
from fsdask.linalg.reductions import compute_blocks
from fsdask.linalg.tall import scaled_rows

__all__ = ["centred_response", "hsic_matrix", "hsic_sums", "hsic_pass", "pass_screen", "scaled_A"]


def centred_response(delta: np.ndarray, n: int) -> np.ndarray:
    """H Δᵀ / (n − 1), n × c: the columns of Δᵀ centred, so X H Δᵀ needs no centring of X.

    Parameters
    ----------
    delta : ndarray (c, n), Δ
    n : int, the samples

    Returns
    -------
    ndarray (n, c), float64.
    """
    return (delta.T - delta.T.mean(axis=0)) / (n - 1)


def hsic_matrix(X: da.Array, delta: np.ndarray, *, standardize: bool = False) -> da.Array:
    """Lazy (c + 3) × m array: rows ``A = X H Δᵀ / (n − 1)`` (transposed), then per-feature
    non-finite counts, ranges (max − min) and standard deviations (zeros unless
    ``standardize``).  One pass over X (:func:`fsdask.linalg.row_dot_summary`).

    H Δᵀ has centred columns, so ``X H Δᵀ = Xᵀ_fsdask (H Δᵀ)`` needs no centring of X.

    Parameters
    ----------
    X : dask array, n × m (samples × features, chunked by feature blocks)
    delta : ndarray (c, n), Δ
    standardize : bool, compute the features' standard deviations too

    Returns
    -------
    dask array (c + 3) × m, lazy.
    """
    return row_dot_summary(X, centred_response(delta, X.shape[0]), sd=standardize)


def hsic_sums(X: Any, delta: np.ndarray, ex: Execution, *, standardize: bool) -> np.ndarray:
    """The stats of :func:`hsic_matrix`, in memory, from sums over the row blocks of X.

    One pass (:meth:`~fsdask.linalg.execution.Execution.sum_blocks`), whatever the layout:
    each block gives ``(X_bᵀ (H Δᵀ)_b)ᵀ/(n − 1)`` (:func:`fsdask.linalg.colstats.xt_dot`)
    and its screen and moments about K = X[0] (:func:`fsdask.linalg.colstats.moment_sums`:
    NaN/Inf count, minimum and maximum merged by maximum, ``S₁ = Σ(x − K)``,
    ``S₂ = Σ(x − K)²``); a CSR block is never densified.  The standard deviation is
    ``√((S₂ − S₁²/n)/(n − 1))``.

    Parameters
    ----------
    X : dask array (or ndarray / scipy.sparse), n × m, in sample or feature blocks
    delta : ndarray (c, n), Δ
    ex : Execution, the fit's execution (it counts the pass)
    standardize : bool, the standard deviations too (zeros unless)

    Returns
    -------
    ndarray (c + 3) × m, float64: rows A (c rows), NaN/Inf counts, ranges max − min (0 for
    a constant feature), standard deviations.  Memory: per task one block and
    (c + 7) × m partial sums.
    """
    n = X.shape[0]
    C = centred_response(delta, n)
    c = C.shape[1]
    K = ex.first_row(X)  # None: every block holds X's first row and shifts by it

    def block(xb, cb, *shift):
        codes = np.zeros(xb.shape[0], np.int64)
        moments = moment_sums(xb, codes, None, shift[0] if shift else None, n_classes=1)
        return np.concatenate([xt_dot(xb, cb).reshape(c, -1), moments])

    sums = ex.sum_blocks(
        block,
        X,
        C,
        shape=(c + moment_rows(1),),
        maxima=MOMENT_MAXIMA,
        columns=() if K is None else (K,),
    )
    s1, s2, bad, neg_min, high = sums[c], sums[c + 1], sums[c + 3], sums[-2], sums[-1]
    sd = np.zeros(sums.shape[1])
    with np.errstate(invalid="ignore"):  # ±Inf: NaN here, and the feature is refused
        range_ = high + neg_min
        if standardize:
            sd = np.sqrt(np.maximum(s2 - s1 * s1 / n, 0.0) / (n - 1))
    return np.vstack([sums[:c], bad, range_, sd])


@dataclasses.dataclass
class PassState:
    """The checkpointed result of the pass: the stats of :func:`hsic_matrix`, in memory."""

    stats: np.ndarray | None = None


def hsic_pass(X: Any, delta: np.ndarray, ctx: FitContext, *, standardize: bool) -> tuple[Any, bool]:
    """Step 2's pass over X: the stats of :func:`hsic_matrix` and whether they are in memory.

    In memory when A (m·c·8 bytes) fits the budget — the sums over X's row blocks
    (:func:`hsic_sums`), then checkpointed at once (slot ``"hsic/A"``; O(m·c), the costly
    part of a fit), so a resumed fit never reads X again — else X by feature blocks and the
    stats persisted (not written: that would hold them in memory, which the budget forbids).

    Parameters
    ----------
    X : dask array, n × m, sample- or feature-blocked
    delta : ndarray (c, n), Δ
    ctx : FitContext, the fit's context (its execution counts the pass)
    standardize : bool, as for :func:`hsic_matrix`

    Returns
    -------
    (ndarray or persisted dask array (c + 3) × m, bool).  Memory: (c + 3)·m·8 bytes.
    """
    ex = ctx.execution
    if not ex.fits(X.shape[1] * delta.shape[0] * 8):
        if is_sample_blocked(X):  # A by rows of a persisted array needs X by feature blocks
            options = ReadOptions(memory_budget=ctx.budget)
            X = to_feature_blocks(X, where="X (SparseHSIC, A above the budget)", options=options)
        return ex.persist(hsic_matrix(X, delta, standardize=standardize))[0], False

    def step(state: PassState) -> PassState:
        return PassState(hsic_sums(X, delta, ex, standardize=standardize))

    return ctx.iterate("hsic/A", PassState(), step, max_iter=1).state.stats, True


def pass_screen(stats: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The screen's rows of the pass's stats, in memory.

    Parameters
    ----------
    stats : ndarray or dask array (c + 3) × m, from :func:`hsic_pass`

    Returns
    -------
    (ndarray (m,), ndarray (m,), ndarray (m,)): per-feature NaN/Inf counts, ranges
    (max − min; 0 for a constant feature) and standard deviations.
    """
    nbad, rng_, sd = compute_blocks(stats[-3], stats[-2], stats[-1])
    return nbad, rng_, sd


def scaled_A(stats: Any, active: np.ndarray, sd: np.ndarray | None, ctx: FitContext | None) -> Any:
    """A from the pass's stats (step 2), each row divided by its feature's standard deviation
    ``sd`` (None: not standardised) and exactly 0 for an inactive (constant) feature — not
    rounding residue.  An in-memory A is written in one sweep (the transposed copy and the
    scaling together); a chunked one is persisted in row chunks that fit the budget.

    Parameters
    ----------
    stats : ndarray or dask array (c + 3) × m, from :func:`hsic_pass`
    active : bool ndarray (m,), the features kept
    sd : ndarray (m,) or None
    ctx : FitContext or None, the fit's context (its budget sizes the row chunks; None:
        one chunk)

    Returns
    -------
    ndarray or persisted dask array, m × c.  Memory: one m × c copy.
    """
    factor = None
    if sd is not None:
        factor = np.where(sd > 0, 1.0 / np.where(sd > 0, sd, 1.0), 0.0)
    if not active.all():  # × 1 or × 0: the same bits as a second product
        factor = active.astype(np.float64) if factor is None else factor * active
    At = stats[:-3].T
    rows = At.shape[0] if ctx is None else ctx.execution.rows_per_chunk(8 * At.shape[1])
    return scaled_rows(At, factor, rows)
