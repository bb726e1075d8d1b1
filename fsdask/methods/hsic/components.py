"""R1D: SparsePM, subtract u_M σ v_Nᵀ, repeat; the selection is the union of the row sets.

Zarkoob (2010) §3.3.1 builds SparsePM on Rank-One Downdate (R1D; Biggs, Ghodsi & Vavasis,
ICML 2008, the thesis' ref. [7]); ``FeatureSelection`` runs it for ``n_components`` rounds,
each on A downdated by the components found before.

Checkpoints (not in the thesis): each component (M, N, u, σ, v: O(m)) is saved at the asked
cadence (``ctx.iterate``).  A resumed fit rebuilds the downdated A from the saved components
(the same subtractions in the same order, hence the same bits) and continues with the next.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Self, Sequence

import numpy as np

from fsdask.fitting import FitContext, iterate
from fsdask.linalg import tall
from fsdask.methods.hsic.sparsepm import SparsePMResult, scatter, solver_options, sparse_pm

__all__ = ["Components", "Ranking", "downdate", "r1d", "ranked", "selection"]


@dataclasses.dataclass
class Components:
    """SparsePM results stacked by component: k × m row masks and u, k × c column masks and
    v, and per component σ, iterations, convergence and the objective trace (the lists keep
    every float's bits in a checkpoint).  The loop state of R1D and of the ρ bisection."""

    M: np.ndarray
    N: np.ndarray
    u: np.ndarray
    v: np.ndarray
    sigma: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray
    objective: list

    @staticmethod
    def fields_of(results: Sequence[SparsePMResult], m: int, c: int) -> dict:
        """The fields of :class:`Components` holding ``results`` (on m rows and c columns)."""
        return {
            "M": np.array([r.M for r in results], dtype=bool).reshape(-1, m),
            "N": np.array([r.N for r in results], dtype=bool).reshape(-1, c),
            "u": np.array([r.u for r in results], dtype=np.float64).reshape(-1, m),
            "v": np.array([r.v for r in results], dtype=np.float64).reshape(-1, c),
            "sigma": np.array([r.sigma for r in results], dtype=np.float64),
            "n_iter": np.array([r.n_iter for r in results], dtype=np.int64),
            "converged": np.array([r.converged for r in results], dtype=bool),
            "objective": [list(r.objective) for r in results],
        }

    def results(self) -> list[SparsePMResult]:
        """The components as :class:`SparsePMResult`."""
        return [
            SparsePMResult(
                self.M[k],
                self.N[k],
                self.u[k],
                float(self.sigma[k]),
                self.v[k],
                [float(f) for f in self.objective[k]],
                int(self.n_iter[k]),
                bool(self.converged[k]),
            )
            for k in range(len(self.sigma))
        ]

    def appended(self, res: SparsePMResult) -> Self:
        """This state with one more component."""
        results = [*self.results(), res]
        return dataclasses.replace(self, **self.fields_of(results, res.M.size, res.N.size))


def downdate(A, res: SparsePMResult):
    """R1D: A_{M,N} ← A_{M,N} − u_M σ v_Nᵀ (u and v are zero outside M and N).

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c; not modified
    res : SparsePMResult on the m rows of A

    Returns
    -------
    ndarray or persisted dask array, m × c (:func:`fsdask.linalg.tall.downdate`).  Memory:
    one copy of A.
    """
    return tall.downdate(A, res.sigma, res.u, res.v, res.M, res.N)


@dataclasses.dataclass
class R1DState(Components):
    """R1D's loop state: the components so far, and whether a round selected no row."""

    stopped: bool = False


class _Downdated:
    """A downdated by the components of a state, each subtraction made once and in order."""

    def __init__(self, A):
        self.A, self.k = A, 0

    def by(self, state: Components):
        for res in state.results()[self.k :]:
            self.A = downdate(self.A, res)
        self.k = len(state.sigma)
        return self.A


def r1d(
    A,
    n_components: int = 1,
    gamma: float = 1.1,
    rho: float = 0.0,
    *,
    row_norm2: np.ndarray | None = None,
    ctx: FitContext | None = None,
    name: str = "hsic/r1d",
    **kw,
) -> list[SparsePMResult]:
    """Rank-one downdate: SparsePM, subtract u_M σ v_Nᵀ, repeat ``n_components`` times.

    Stops early when a round selects no row.  A is not modified.  With a fit's ``ctx`` the
    rounds run under ``ctx.iterate`` (slot ``name``): the components found so far are saved,
    and a resumed call downdates A by them again and continues with the next.  ``kw`` go to
    :func:`~fsdask.methods.hsic.sparsepm.sparse_pm` (``memory_budget``: the fit's by default).

    For an in-memory A every round runs on the rows with ‖A_i‖² > ρ only (``row_norm2``
    may be passed to skip recomputing the norms): a row at or below ρ never enters M
    (:func:`sparse_pm`), the downdate touches only rows of M, so by induction no round
    can select a row outside that set.  Same result, in time proportional to the candidate
    rows — the ρ bisection and path on a 10⁶-row A cost a few milliseconds per ρ.

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c
    n_components : int, the most rounds
    gamma, rho : γ and ρ of (3.4)
    row_norm2 : ndarray (m,), optional, the ‖A_i‖² if the caller has them
    ctx : FitContext, optional, the fit's context (None: nothing is checkpointed)
    name : str, the checkpoint slot of the rounds
    **kw : ``tol``, ``max_iter``, ``memory_budget`` of :func:`sparse_pm`

    Returns
    -------
    list of SparsePMResult (at most ``n_components``) on the m rows.  Memory: one
    downdated copy of A.
    """
    norm2 = None
    if tall.held_in_memory(A):
        m = A.shape[0]
        norm2 = tall.row_norm2(A) if row_norm2 is None else row_norm2
        rows = np.flatnonzero(norm2 > rho)
        if rows.size == 0:
            return []
        if rows.size < m:
            sub = r1d(
                A[rows], n_components, gamma, rho, row_norm2=norm2[rows], ctx=ctx, name=name, **kw
            )
            return [scatter(r, rows, m) for r in sub]
    kw = solver_options(ctx, kw)
    downdated = _Downdated(A)

    def step(state: R1DState) -> R1DState:
        first = len(state.sigma) == 0
        res = sparse_pm(downdated.by(state), gamma, rho, row_norm2=norm2 if first else None, **kw)
        if not res.M.any():
            return dataclasses.replace(state, stopped=True)
        return state.appended(res)

    start = R1DState(**Components.fields_of([], A.shape[0], A.shape[1]))
    loop = iterate(name, start, step, max_iter=n_components, done=_stopped, ctx=ctx)
    return loop.state.results()


def _stopped(state: R1DState) -> bool:
    return state.stopped


def selection(results: Sequence[SparsePMResult], m: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of the row sets, and the (first) component each feature came from (−1: none).

    Parameters
    ----------
    results : SparsePMResult of each component, on m rows
    m : int

    Returns
    -------
    (bool ndarray (m,), int ndarray (m,)).
    """
    comp = np.full(m, -1)
    for k in range(len(results) - 1, -1, -1):
        comp[results[k].M] = k
    return comp >= 0, comp


class Ranking(NamedTuple):
    """The outcome of the components over m rows (:func:`ranked`)."""

    support: np.ndarray  #: bool (m,), the union of the row sets
    component: np.ndarray  #: int (m,), the first component each row came from (−1: none)
    scores: np.ndarray  #: float (m,), max over components of |u|
    row_norm: np.ndarray  #: float (m,), ‖A_i‖
    key: np.ndarray  #: float (m,), the ranking: selected rows by 2 + |u|, the others by ‖A_i‖ / max


def ranked(results: Sequence[SparsePMResult], norm2: np.ndarray) -> Ranking:
    """The selection, scores and ranking key of the components: the selected rows first, by
    |u|, then the others by ‖A_i‖ (the key 2 + |u| against ‖A_i‖ / max ‖A_i‖ ≤ 1).

    Parameters
    ----------
    results : SparsePMResult of each component, on m rows
    norm2 : ndarray (m,), ‖A_i‖²

    Returns
    -------
    Ranking.
    """
    support, comp = selection(results, norm2.size)
    scores = np.abs(np.array([r.u for r in results])).max(axis=0)
    row_norm = np.sqrt(norm2)
    key = np.where(support, 2.0 + scores, row_norm / (row_norm.max() or 1.0))
    return Ranking(support, comp, scores, row_norm, key)
