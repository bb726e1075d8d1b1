"""ρ, the size penalty of (3.4): its noise level, its path, and its bisection for k features.

The thesis picks ρ by hand (§3.4.1); :func:`rho_noise` carries that choice to any scale,
:func:`rho_path` runs R1D over a grid of ρ, and :func:`rho_for_k` bisects ρ for a number of
selected features.  Every function screens rows first: a row with ‖A_i‖² ≤ ρ never enters
any M (:func:`~fsdask.methods.hsic.components.r1d`), so the work is proportional to the
candidate rows, not to m.

Checkpoints (not in the thesis): each step of the bisection and each point of the path are
saved at the asked cadence (``ctx.iterate``); a resumed call continues with the next one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from fsdask.errors import ParameterError
from fsdask.fitting import FitContext, iterate
from fsdask.linalg import tall
from fsdask.methods.hsic.components import Components, r1d, selection
from fsdask.methods.hsic.sparsepm import SparsePMResult, scatter, solver_options

__all__ = [
    "PATH_MAX_ROWS",
    "RHO_ALPHA",
    "STEP_DOWN",
    "rho_max",
    "rho_noise",
    "rho_path",
    "rho_for_k",
    "bisect",
    "Trials",
]

#: the default ρ path spans selections of up to this many features (rows screened first)
PATH_MAX_ROWS = 1000
#: level of the default ρ: all p features independent of y stay out with prob. 1 − α
RHO_ALPHA = 0.05
#: the bisection's low end steps down from its start by this factor until k are selected
STEP_DOWN = 4.0


def rho_max(A, row_norm2: np.ndarray | None = None) -> float:
    """Smallest ρ at which SparsePM selects nothing: max_i ‖A_i‖² / c (the start then has f ≤ 0).

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c
    row_norm2 : ndarray (m,), optional, the ‖A_i‖² if the caller has them

    Returns
    -------
    float
    """
    norm2 = tall.row_norm2(A) if row_norm2 is None else row_norm2
    return float(norm2.max() / A.shape[1])


def rho_noise(row_norm2: np.ndarray, delta: np.ndarray, alpha: float = RHO_ALPHA) -> float:
    """The default ρ ("auto"): the ‖A_i‖²/c that the largest of p features independent of y
    reaches with probability ``alpha`` (Bonferroni over the p rows).

    The thesis picks ρ by hand ("we have arbitrarily used ρ ≈ 0.015", §3.4.1), on the scale of
    its example; this default carries that choice to any scale.  For a standardised feature
    independent of y, A_i = x_iᵀ B with B = HΔᵀ/(n − 1), so ‖A_i‖² is distributed as
    Σ_j λ_j χ²₁, λ = eig(BᵀB) (c values); it is approximated by g·χ²_h (Satterthwaite:
    g = Σλ²/Σλ, h = (Σλ)²/Σλ²) whose scale is then matched to the median of the observed
    ‖A_i‖² (most features of a wide matrix are noise; the match also covers unstandardised X).
    A row enters M only when ‖A_{i,N}‖² > ρ|N| (3.6; |N| = c at the start), hence the /c.

    Parameters
    ----------
    row_norm2 : ndarray (p,), the ‖A_i‖² of every feature
    delta : ndarray (c, n), Δ (:func:`~fsdask.methods.hsic.response.response_factor`)
    alpha : float, the level

    Returns
    -------
    float ρ ≥ 0 (0 when every row is 0).  Memory: O(c²) besides ``row_norm2``.
    """
    from scipy.stats import chi2

    norm2 = np.asarray(row_norm2, dtype=np.float64)
    live = norm2[norm2 > 0]
    c = delta.shape[0]
    if live.size == 0:
        return 0.0
    Dc = delta - delta.mean(axis=1, keepdims=True)
    lam = np.clip(np.linalg.eigvalsh(Dc @ Dc.T), 0, None)
    if lam.sum() <= 0:
        return 0.0
    g, h = (lam**2).sum() / lam.sum(), lam.sum() ** 2 / (lam**2).sum()
    scale = float(np.median(live)) / (g * chi2.median(h))
    return float(scale * g * chi2.isf(alpha / norm2.size, h) / c)


# --------------------------------------------------------------------------- the ρ path
@dataclasses.dataclass
class PathState:
    """The ρ path's loop state: the next point ``t`` and the values of the points done."""

    t: int
    n_selected: np.ndarray
    objective: np.ndarray


def default_rhos(norm2: np.ndarray, c: int, n_rhos: int, max_rows: int | None) -> np.ndarray:
    """``n_rhos`` log-spaced ρ from ρ_lo to ρ_max = max ‖A_i‖²/c, where ρ_lo is 10⁻⁴·ρ_max
    raised, if need be, to the ``max_rows``-th largest ‖A_i‖² (None: no cap)."""
    m = norm2.size
    top = float(norm2.max() / c)
    lo = top * 1e-4
    if max_rows is not None and max_rows < m:
        lo = max(lo, float(np.partition(norm2, m - max_rows)[m - max_rows]))
    return np.geomspace(min(lo, top), top, n_rhos)


def rho_path(
    A,
    rhos: Sequence[float] | None = None,
    *,
    gamma: float = 1.1,
    n_components: int = 1,
    n_rhos: int = 25,
    max_rows: int | None = PATH_MAX_ROWS,
    row_norm2: np.ndarray | None = None,
    ctx: FitContext | None = None,
    name: str = "hsic/path",
    **kw,
) -> dict[str, np.ndarray]:
    """Number of selected features and final objective (3.4) over a grid of ρ.

    Default grid: ``n_rhos`` log-spaced values from ρ_lo to ρ_max (:func:`rho_max`), where
    ρ_lo is 10⁻⁴·ρ_max raised, if need be, to the ``max_rows``-th largest ‖A_i‖², so the
    path spans selections of up to ``max_rows`` features (None: no cap).
    Returns ``{"rho", "n_selected", "objective"}``; objective is the sum over components of
    the last value of each trace.

    Screening first: a row with ‖A_i‖² ≤ min ρ never enters any M on the grid (:func:`r1d`),
    so the whole path runs on the other rows — O(candidates), not O(m), per SparsePM step.
    With a fit's ``ctx`` the points run under ``ctx.iterate`` (slot ``name``): a resumed call
    continues with the next ρ.

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c
    rhos : sequence of float, optional, the grid (None: the default grid)
    gamma, n_components : as for :func:`r1d`
    n_rhos, max_rows : the default grid's size and the most rows its low end keeps
    row_norm2 : ndarray (m,), optional, the ‖A_i‖² if the caller has them
    ctx : FitContext, optional, the fit's context (None: nothing is checkpointed)
    name : str, the checkpoint slot of the path
    **kw : ``tol``, ``max_iter``, ``memory_budget`` of SparsePM (the fit's budget by default)

    Returns
    -------
    dict of ndarrays.  Memory: the candidate rows of A (an in-memory A), O(m) besides.
    """
    norm2 = tall.row_norm2(A) if row_norm2 is None else row_norm2
    m = A.shape[0]
    if rhos is None:
        rhos = default_rhos(norm2, A.shape[1], n_rhos, max_rows)
    rhos = np.asarray(rhos, dtype=np.float64)
    rows = np.flatnonzero(norm2 > rhos.min()) if rhos.size else np.zeros(0, int)
    if rows.size < m and tall.held_in_memory(A):
        A, norm2 = A[rows], norm2[rows]
    kw = solver_options(ctx, kw)

    def step(s: PathState) -> PathState:
        res = r1d(A, n_components, gamma, float(rhos[s.t]), row_norm2=norm2, **kw)
        s.n_selected[s.t] = selection(res, A.shape[0])[0].sum()
        s.objective[s.t] = sum(r.objective[-1] for r in res)
        s.t += 1
        return s

    start = PathState(0, np.zeros(rhos.size, dtype=np.int64), np.zeros(rhos.size))
    s = iterate(name, start, step, max_iter=rhos.size, ctx=ctx).state
    return {"rho": rhos, "n_selected": s.n_selected, "objective": s.objective}


# --------------------------------------------------------------------------- the bisection
@dataclasses.dataclass
class Bracket(Components):
    """The bisection's loop state: the bracket ``count(lo) ≥ k > count(hi)``, the steps of
    bisection taken, and the best selection found — ρ, its count and its components (on the
    candidate rows ``rows``; None: on all rows of A) — with the smallest count ≥ k."""

    lo: float = 0.0
    hi: float = 0.0
    n_bisect: int = 0
    best_rho: float | None = None
    best_count: int | None = None
    rows: np.ndarray | None = None

    def found(self, rho: float, trial: tuple, count: int, **bracket: Any) -> Bracket:
        """This state with the best selection ``trial`` = (rows, results) at ρ."""
        rows, res = trial
        m, c = (self.M.shape[1] if rows is None else rows.size), self.N.shape[1]
        comps = self.fields_of(res, m, c)
        return dataclasses.replace(
            self, **comps, **bracket, best_rho=rho, best_count=count, rows=rows
        )

    def best(self, m: int) -> list[SparsePMResult]:
        """The best selection's components over all m rows of A."""
        res = self.results()
        rows = self.rows
        return res if rows is None or rows.size == m else [scatter(r, rows, m) for r in res]


class Trials:
    """R1D at a trial ρ of the bisection, with the results left on the candidate rows.

    r1d's own screen (rows with ‖A_i‖² ≤ ρ are never selected): a trial costs
    O(candidates), and only the one returned is laid out over all m rows.  Candidates are
    taken from the last screen's rows when ρ is above its ρ (every bisection trial), so only
    a new low end of the bracket reads all m norms.  A chunked A is not screened (its rows
    are not cheap to take): its results are on all rows.

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c
    norm2 : ndarray (m,), ‖A_i‖²
    n_components, gamma : as for :func:`r1d`
    kw : SparsePM's keywords (``tol``, ``max_iter``, ``memory_budget``)

    Attributes
    ----------
    lowest : float, the lowest ρ tried so far (rows with ‖A_i‖² ≤ ``lowest`` never
        mattered: a caller holding only the rows above a bound checks it against this)
    """

    def __init__(self, A, norm2: np.ndarray, n_components: int, gamma: float, kw: dict):
        self.A, self.norm2, self.kw = A, norm2, kw
        self.n_components, self.gamma = n_components, gamma
        self.screened: tuple[float, np.ndarray] = (np.inf, np.zeros(0, int))
        self.lowest = np.inf

    def candidates(self, rho: float) -> np.ndarray:
        """Rows with ‖A_i‖² > ρ, in order."""
        if rho >= self.screened[0]:
            pool = self.screened[1]
            return pool[self.norm2[pool] > rho]
        self.screened = (rho, np.flatnonzero(self.norm2 > rho))
        return self.screened[1]

    def __call__(self, rho: float) -> tuple[tuple, int]:
        """((rows, results on those rows of A), number selected) at ρ (rows None: all of A)."""
        self.lowest = min(self.lowest, rho)
        A, m = self.A, self.A.shape[0]
        if not tall.held_in_memory(A):
            res = r1d(A, self.n_components, self.gamma, rho, row_norm2=self.norm2, **self.kw)
            return (None, res), int(selection(res, m)[0].sum())
        rows = self.candidates(rho)
        sub = A if rows.size == m else A[rows]
        res = r1d(sub, self.n_components, self.gamma, rho, row_norm2=self.norm2[rows], **self.kw)
        return (rows, res), int(selection(res, rows.size)[0].sum())


class Bisection:
    """The steps of :func:`rho_for_k` over its :class:`Bracket` state: first ρ_lo stepped
    down from ρ_hi by factors of :data:`STEP_DOWN` until ``count(lo) ≥ k``, then geometric bisection until
    exactly k, a jump, ``max_bisect`` steps or a bracket narrower than 1 + 10⁻⁹.

    Parameters
    ----------
    trial : Trials, R1D at a trial ρ
    k : int, the features wanted
    max_bisect : int, the most bisection steps
    """

    def __init__(self, trial: Trials, k: int, max_bisect: int):
        self.trial, self.k, self.max_bisect = trial, k, max_bisect
        self.top = rho_max(trial.A, trial.norm2)
        self.floor = self.top * 1e-12

    def step(self, s: Bracket) -> Bracket:
        """One trial: a lower ρ_lo while no ρ selects k features yet, else the bracket's midpoint."""
        k = self.k
        if s.best_rho is None:  # step ρ_lo down from ρ_hi
            lo = max(s.lo / STEP_DOWN, self.floor)
            found, c = self.trial(lo)
            if c >= k:
                return s.found(lo, found, c, lo=lo)
            if lo <= self.floor:
                raise ParameterError(
                    f"n_features_to_select={k}, but SparseHSIC selects at most {c} features even with ρ → 0 "
                    f"(γ={self.trial.gamma}, n_components={self.trial.n_components}): rows of A far from the "
                    "leading direction are never accepted by (3.6); raise n_components, lower gamma "
                    "towards 1, or ask for fewer features"
                )
            return dataclasses.replace(s, lo=lo, hi=lo)
        mid = float(np.sqrt(s.lo * s.hi))
        found, c = self.trial(mid)
        if c >= k:
            return s.found(mid, found, c, lo=mid, n_bisect=s.n_bisect + 1)
        return dataclasses.replace(s, hi=mid, n_bisect=s.n_bisect + 1)

    def done(self, s: Bracket) -> bool:
        """Whether the search ends after this state."""
        if s.best_rho is None:
            return False
        bisecting = s.n_bisect < self.max_bisect and (s.n_bisect == 0 or s.hi / s.lo >= 1 + 1e-9)
        return s.best_count == self.k or not bisecting


def rho_for_k(
    A,
    k: int,
    *,
    gamma: float = 1.1,
    n_components: int = 1,
    max_bisect: int = 60,
    row_norm2: np.ndarray | None = None,
    ctx: FitContext | None = None,
    name: str = "hsic/bisect",
    **kw,
) -> tuple[float, list[SparsePMResult], int]:
    """Bisect ρ (geometrically) for ``k`` selected features.

    The count is non-increasing in ρ for the first row step but not guaranteed overall
    (SparsePM's fixed point, and with R1D the later rounds, depend on ρ), so bisection keeps
    a bracket ``count(lo) ≥ k > count(hi)`` and stops at exactly k or at a jump; when the
    count jumps over k, the smallest count ≥ k found is returned and the caller keeps the k
    largest |u| among them.  Returns (ρ, results, count).

    Bracket: only rows with ‖A_i‖² > ρ can be selected (:func:`r1d`), so ρ_hi = the k-th
    largest ‖A_i‖² (or :func:`rho_max`, if smaller) selects fewer than k; ρ_lo is found by
    stepping down from there by factors of :data:`STEP_DOWN`.  Every trial ρ therefore stays near the top
    of the row norms, where few rows are candidates, and the search is cheap on a large A.
    With a fit's ``ctx`` the trials run under ``ctx.iterate`` (slot ``name``), the bracket
    and the best ρ saved after each; the steps read only that state, so a resumed call
    continues exactly where the killed one was.

    Parameters
    ----------
    A : ndarray or dask array chunked by rows, m × c
    k : int, the features wanted, 1 ≤ k ≤ m
    gamma, n_components : as for :func:`r1d`
    max_bisect : int, the most bisection steps after the bracket is found
    row_norm2 : ndarray (m,), optional, the ‖A_i‖² if the caller has them
    ctx : FitContext, optional, the fit's context (None: nothing is checkpointed)
    name : str, the checkpoint slot of the bisection
    **kw : ``tol``, ``max_iter``, ``memory_budget`` of SparsePM (the fit's budget by default)

    Returns
    -------
    (float, list of SparsePMResult on the m rows, int).  Memory: the candidate rows of A
    (an in-memory A), O(m) besides.

    Raises
    ------
    ParameterError
        When even ρ → 0 selects fewer than k features.
    """
    norm2 = tall.row_norm2(A) if row_norm2 is None else row_norm2
    trials = Trials(A, norm2, n_components, gamma, solver_options(ctx, kw))
    return bisect(trials, k, max_bisect=max_bisect, ctx=ctx, name=name)


def bisect(
    trials: Trials,
    k: int,
    *,
    max_bisect: int = 60,
    ctx: FitContext | None = None,
    name: str = "hsic/bisect",
) -> tuple[float, list[SparsePMResult], int]:
    """The bisection of :func:`rho_for_k` with its trials given: ρ for ``k`` features of
    ``trials.A``, whose ``trials.lowest`` then tells how low the search went.

    Parameters
    ----------
    trials : Trials, R1D at a trial ρ on A (m × c) with its row norms
    k : int, the features wanted, 1 ≤ k ≤ m
    max_bisect, ctx, name : as for :func:`rho_for_k`

    Returns
    -------
    (float, list of SparsePMResult on the m rows, int), as :func:`rho_for_k`.
    """
    m, norm2 = trials.A.shape[0], trials.norm2
    search = Bisection(trials, k, max_bisect)
    hi = min(search.top, float(np.partition(norm2, m - k)[m - k]))
    start = Bracket(**Components.fields_of([], m, trials.A.shape[1]), lo=hi, hi=hi)
    s = iterate(name, start, search.step, done=search.done, ctx=ctx).state
    return float(s.best_rho), s.best(m), int(s.best_count)
