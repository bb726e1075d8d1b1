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

Execution: A is computed in **one streaming pass** over the feature blocks of X
(:func:`fsdask.linalg.row_dot_summary`; the same pass also counts NaN/Inf and finds
constant features, so the whole fit reads X once).  A is small (m × c).  If ``m·c·8``
bytes fit the fit's memory budget (``ctx.execution``; ``fsdask.memory-budget``, default
1 GiB, i.e. 1.3·10⁸ entries) it is held in memory and every later step is NumPy;
otherwise A stays a persisted dask array chunked by rows (:mod:`fsdask.linalg.tall`).

Checkpoint (not in the thesis): the pass is the costly step, so what it yields — A and the
screen's per-feature counts, O(m·c), never X — is saved as soon as it ends, when A is held
in memory (a larger A is not written, and a resumed fit reads X again).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import dask.array as da
import numpy as np

from fsdask.fitting import FitContext
from fsdask.linalg import row_dot_summary
from fsdask.linalg.reductions import compute_blocks
from fsdask.linalg.tall import scaled_rows

__all__ = ["hsic_matrix", "hsic_pass", "pass_screen", "scaled_A"]


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
    n = X.shape[0]
    C = (delta.T - delta.T.mean(axis=0)) / (n - 1)  # H Δᵀ / (n − 1), n × c
    return row_dot_summary(X, C, sd=standardize)


@dataclasses.dataclass
class PassState:
    """The checkpointed result of the pass: the stats of :func:`hsic_matrix`, in memory."""

    stats: np.ndarray | None = None


def hsic_pass(
    X: da.Array, delta: np.ndarray, ctx: FitContext, *, standardize: bool
) -> tuple[Any, bool]:
    """Step 2's pass over X: the stats of :func:`hsic_matrix` and whether they are in memory.

    In memory when A (m·c·8 bytes) fits the budget — then checkpointed at once (slot
    ``"hsic/A"``; O(m·c), the costly part of a fit), so a resumed fit never reads X again —
    else persisted (not written: that would hold it in memory, which the budget forbids).

    Parameters
    ----------
    X : dask array, n × m
    delta : ndarray (c, n), Δ
    ctx : FitContext, the fit's context (its execution counts the pass)
    standardize : bool, as for :func:`hsic_matrix`

    Returns
    -------
    (ndarray or persisted dask array (c + 3) × m, bool).  Memory: (c + 3)·m·8 bytes.
    """
    stats = hsic_matrix(X, delta, standardize=standardize)  # lazy
    ex = ctx.execution
    if not ex.fits(X.shape[1] * delta.shape[0] * 8):
        return ex.persist(stats)[0], False

    def step(state: PassState) -> PassState:
        return PassState(ex.compute(stats)[0])

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


def scaled_A(stats: Any, active: np.ndarray, sd: np.ndarray | None, ctx: FitContext) -> Any:
    """A from the pass's stats (step 2), each row divided by its feature's standard deviation
    ``sd`` (None: not standardised) and exactly 0 for an inactive (constant) feature — not
    rounding residue.  An in-memory A is written in one sweep (the transposed copy and the
    scaling together); a chunked one is persisted in row chunks that fit the budget.

    Parameters
    ----------
    stats : ndarray or dask array (c + 3) × m, from :func:`hsic_pass`
    active : bool ndarray (m,), the features kept
    sd : ndarray (m,) or None
    ctx : FitContext, the fit's context (its budget sizes the row chunks)

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
    return scaled_rows(At, factor, ctx.execution.rows_per_chunk(8 * At.shape[1]))
