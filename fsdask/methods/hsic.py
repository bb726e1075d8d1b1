"""HSIC feature selection with the sparse power method and rank-one downdate (R1D).

Zarkoob, *Feature selection for gene expression data based on Hilbert-Schmidt
independence criterion*, MMath thesis, Waterloo 2010, chapter 3.

The thesis writes X as m features × n samples; fsdask stores X as (sample, feature), so
the thesis' ``X`` is our ``Xᵀ`` and its row i (a feature) is our column i.

* eq. (3.1): HSIC(Z) = (n − 1)⁻² Tr(K H B H), H = I − n⁻¹ 1 1ᵀ.
* eq. (3.2)/(3.3): with a linear kernel on the projection uᵀX, maximise
  uᵀ X H B H Xᵀ u over unit, sparse u.
* B = Δᵀ Δ and A = X H Δᵀ, so Q = A Aᵀ and u is the leading left singular vector of A
  (m × c).  **Scale** (the thesis leaves it open, and with it the meaning of ρ): we use the
  normalisation of (3.1), ``A = X H Δᵀ / (n − 1)`` so ‖A‖²_F is the HSIC estimate; Δ has
  class-indicator entries 1/n_c (§3.4.2), or a standardised y (linear kernel, §3.4.1).
* eq. (3.4): f(M, N, u, σ, v) = ‖A_MN‖²_F − γ ‖A_MN − u_M σ v_Nᵀ‖²_F − ρ |M| |N|.
* eq. (3.5)/(3.6) and the column analogue: separable row/column contributions
  r_i = −(γ − 1)‖A_iN‖² + γ (A_iN v_N)² − ρ|N|,  c_j = −(γ − 1)‖A_Mj‖² + γ (A_Mjᵀ u_M)² − ρ|M|.
* Algorithms ``PowerMethod``, ``SparsePM`` (steps 1–14) and ``FeatureSelection``.

Execution: A is computed in **one streaming pass** over the feature blocks of X
(:func:`fsdask.linalg.row_dot_summary`; the same pass also counts NaN/Inf and finds
constant features, so the whole fit reads X once).  A is small (m × c).  If ``m·c·8``
bytes fit the memory budget (:mod:`fsdask.linalg.execution`, ``fsdask.memory-budget``,
default 1 GiB, i.e. 1.3·10⁸ entries) it is held in memory
and every later step — SparsePM, the downdates, the ρ bisection and path — is NumPy on the
candidate rows of A (rows with ‖A_i‖² ≤ ρ can never be selected); otherwise A stays a
persisted dask array chunked by rows and each SparsePM row/column step is one row-wise
map-reduce over it (the same code: the steps are written with full-length masked vectors,
which NumPy and dask evaluate alike).

Checkpoints (:mod:`fsdask.checkpoint`, ``fsdask select --checkpoint-every``; not in the
thesis): the pass is the costly step, so what it yields — A and the screen's per-feature
counts, O(m·c), never X — is saved as soon as it ends (when A is held in memory: a larger A
is not written, and a resumed fit reads X again).  Then each R1D component (M, N, u, σ, v:
O(m)), each step of the ρ bisection and each point of the ρ path are saved at the asked
cadence.  A resumed fit rebuilds the downdated A from the saved components (the same
subtractions in the same order, hence the same bits) and continues with the next one.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any, Literal, Sequence

import dask.array as da
import numpy as np
from sklearn.utils._param_validation import StrOptions

from fsdask import checkpoint
from fsdask._validation import Int, Real
from fsdask.base import FitOutput, Selector
from fsdask.errors import ConvergenceWarning, InputError, ParameterError
from fsdask.fitting import FitContext
from fsdask.linalg import row_dot_summary
from fsdask.linalg.execution import Execution, fits
from fsdask.linalg.reductions import compute_blocks

log = logging.getLogger("fsdask")

Response = Literal["auto", "categorical", "continuous", "multivariate", "rbf"]

#: RBF response kernel: keep the leading eigenpairs of HBH holding this share of its trace
RBF_TRACE_SHARE = 0.999
#: … but never more than this many (the rank of the factor Δ, i.e. the columns of A)
RBF_MAX_RANK = 50
#: the default ρ path spans selections of up to this many features (rows screened first)
PATH_MAX_ROWS = 1000
#: a categorical y with more than this share of distinct values per sample looks continuous
MAX_CLASS_SHARE = 0.5


# --------------------------------------------------------------------------------------
# Δ: the factor of the response kernel, B = Δᵀ Δ (FeatureSelection, step 1)
# --------------------------------------------------------------------------------------
def infer_response(y: np.ndarray) -> str:
    """``response="auto"``: 2-D y → multivariate; integer/bool/string → categorical; float → continuous."""
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
    """
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim not in (1, 2):
        raise InputError(
            f"y must be 1-D (n_samples,) or 2-D (n_samples, n_targets); got shape {y.shape}"
        )
    n = y.shape[0]
    kind = infer_response(y) if response == "auto" else response
    info: dict = {"response": kind}
    if kind == "categorical":
        if y.ndim != 1:
            raise InputError(
                f"a categorical y must be 1-D; got shape {y.shape} (use response='multivariate')"
            )
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise InputError(
                f"y has {int((~np.isfinite(y)).sum())} NaN/Inf label(s); drop those samples"
            )
        classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
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
        return delta, kind, info
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
        if y.ndim != 1:
            raise InputError(f"response='rbf' takes a 1-D y; got shape {y.shape}")
        ys = _standardise(y, "y")
        d = np.abs(ys[:, None] - ys[None, :])
        w = kernel_width if kernel_width is not None else float(np.median(d[d > 0]))
        B = np.exp(-(d**2) / (2 * w**2))
        H = np.eye(n) - 1.0 / n
        lam, W = np.linalg.eigh(H @ B @ H)
        lam, W = lam[::-1].clip(min=0), W[:, ::-1]
        r = int(np.searchsorted(np.cumsum(lam) / lam.sum(), RBF_TRACE_SHARE) + 1)
        r = min(r, kernel_rank or RBF_MAX_RANK, n)
        info.update(
            kernel_width=w, kernel_rank=r, kernel_trace_kept=float(lam[:r].sum() / lam.sum())
        )
        return np.sqrt(lam[:r])[:, None] * W[:, :r].T, kind, info
    raise ParameterError(
        f"response={response!r}; use 'auto', 'categorical', 'continuous', 'multivariate' or 'rbf'"
    )


# --------------------------------------------------------------------------------------
# A = X H Δᵀ / (n − 1) in one pass (FeatureSelection, step 2)
# --------------------------------------------------------------------------------------
def hsic_matrix(X: da.Array, delta: np.ndarray, *, standardize: bool = False) -> da.Array:
    """Lazy (c + 3) × m array: rows ``A = X H Δᵀ / (n − 1)`` (transposed), then per-feature
    non-finite counts, ranges (max − min) and standard deviations (zeros unless
    ``standardize``).  One pass over X (:func:`fsdask.linalg.row_dot_summary`).

    H Δᵀ has centred columns, so ``X H Δᵀ = Xᵀ_fsdask (H Δᵀ)`` needs no centring of X.
    """
    n = X.shape[0]
    C = (delta.T - delta.T.mean(axis=0)) / (n - 1)  # H Δᵀ / (n − 1), n × c
    return row_dot_summary(X, C, sd=standardize)


# --------------------------------------------------------------------------------------
# SparsePM (eq. 3.4–3.6) and R1D
# --------------------------------------------------------------------------------------
@dataclasses.dataclass
class SparsePMResult:
    """Output of :func:`sparse_pm`: row set M, column set N (boolean masks), u, σ, v and the
    trace of the objective (3.4): its value at the start and after every row and column step."""

    M: np.ndarray
    N: np.ndarray
    u: np.ndarray
    sigma: float
    v: np.ndarray
    objective: list[float]
    n_iter: int
    converged: bool


def _np(*xs):
    """Compute dask arrays (together), pass NumPy through."""
    if any(isinstance(x, da.Array) for x in xs):
        return compute_blocks(*xs)  # per-feature vectors joined on the client, not in a task
    return xs


def _as_vec(A, w: np.ndarray):
    """A full-length vector aligned with A's rows (dask chunks when A is dask)."""
    return da.from_array(w, chunks=(A.chunks[0],)) if isinstance(A, da.Array) else w


def _row_step(A, A2, v: np.ndarray, N: np.ndarray, gamma: float, rho: float):
    """Steps 7–9: ū = A_{:,N} v_N; r_i of (3.6); M = {i : r_i > 0}.  One row-wise map over A
    (``A2`` is A∘A, precomputed for a NumPy A, lazy for a dask A)."""
    vN = np.where(N, v, 0.0)
    u_bar = A @ vN
    norm2 = A2 @ N.astype(np.float64)
    u_bar, norm2 = _np(u_bar, norm2)
    r = -(gamma - 1) * norm2 + gamma * u_bar**2 - rho * N.sum()
    return u_bar, r


def _col_step(A, A2, u: np.ndarray, M: np.ndarray, gamma: float, rho: float):
    """Steps 10–11: v̄ = A_{M,:}ᵀ u_M; c_j; N = {j : c_j > 0}.  One reduction over A's rows."""
    v_bar = A.T @ _as_vec(A, u)
    norm2 = A2.T @ _as_vec(A, M.astype(np.float64))
    v_bar, norm2 = _np(v_bar, norm2)
    c = -(gamma - 1) * norm2 + gamma * v_bar**2 - rho * M.sum()
    return v_bar, c


def sparse_pm(
    A,
    gamma: float = 1.1,
    rho: float = 0.0,
    *,
    tol: float = 1e-12,
    max_iter: int = 200,
    memory_budget: Any = None,
    row_norm2: np.ndarray | None = None,
) -> SparsePMResult:
    """Algorithm ``[M, N, u, v, σ] = SparsePM(A)`` of §3.3.1, exactly as written.

    ``A`` is a NumPy array or a dask array chunked by rows (m × c).  Stagnation (step 14):
    M and N unchanged and u, v, σ each changed by at most ``tol`` (σ relatively).

    The objective (3.4) is separable, so its value after a row step is Σ_{i∈M} r_i and after
    a column step Σ_{j∈N} c_j; each step maximises it over its own variables with the others
    fixed, so the trace never decreases (tested).  If the largest row already has
    ‖A_i‖² ≤ ρ c the start has f ≤ 0 and no row is selected: M is returned empty.

    Exact pruning (not in the thesis, same result): since (A_iN v_N)² ≤ ‖A_iN‖² (v unit),
    r_i ≤ ‖A_iN‖² − ρ|N| ≤ ‖A_i‖² − ρ for every N ≠ ∅, so a row with ‖A_i‖² ≤ ρ never enters
    M, and rows outside M never touch the column step.  The iterations therefore run on the
    candidate rows only — one pass over A for the row norms, then (if the candidates fit the
    memory budget, :func:`fsdask.linalg.execution.memory_budget`) in memory.  For the ρ of a small selection this is a tiny matrix.
    """
    m, c = A.shape
    row_norm2 = _row_norm2(A) if row_norm2 is None else row_norm2
    cand = np.flatnonzero(row_norm2 > rho)
    if cand.size == 0:  # the start row has f = ‖A_i0‖² − ρc ≤ 0: step 8 selects nothing
        i0 = int(np.argmax(row_norm2))
        return SparsePMResult(
            np.zeros(m, bool),
            np.zeros(c, bool),
            np.zeros(m),
            0.0,
            np.zeros(c),
            [float(row_norm2[i0] - rho * c), 0.0],
            1,
            True,
        )
    Ac = A[cand] if cand.size < m else A
    if isinstance(Ac, da.Array) and fits(cand.size * c * 8, memory_budget):
        (Ac,) = compute_blocks(Ac)
    elif isinstance(Ac, da.Array) and cand.size < m:
        Ac = Ac.rechunk({0: A.chunks[0][0]})
    res = _sparse_pm_rows(Ac, row_norm2[cand], gamma, rho, tol, max_iter)
    return res if cand.size == m else _scatter(res, cand, m)


def _scatter(res: SparsePMResult, rows: np.ndarray, m: int) -> SparsePMResult:
    """A result on the rows ``rows`` of A, as a result on all m rows (u = 0, not in M elsewhere)."""
    M = np.zeros(m, bool)
    M[rows] = res.M
    u = np.zeros(m)
    u[rows] = res.u
    return dataclasses.replace(res, M=M, u=u)


def _row_norm2(A) -> np.ndarray:
    """‖A_i‖² for every row (one pass over a dask A).

    For a NumPy A with few columns the squares are added column by column: the same sum,
    in the same order, as ``(A * A).sum(axis=1)`` (a sequential sum below 8 terms), without
    an m × c temporary or NumPy's slow reduction over a short inner axis.
    """
    if isinstance(A, da.Array) or A.shape[1] >= 8 or A.shape[1] == 0:
        (norm2,) = _np((A * A).sum(axis=1))
        return np.asarray(norm2)
    norm2 = A[:, 0] * A[:, 0]
    for j in range(1, A.shape[1]):
        norm2 += A[:, j] * A[:, j]
    return norm2


def _sparse_pm_rows(
    A, row_norm2: np.ndarray, gamma: float, rho: float, tol: float, max_iter: int
) -> SparsePMResult:
    """SparsePM steps 1–14 on (candidate) rows A with their squared norms."""
    m, c = A.shape
    A2 = A * A
    # steps 1–5: start from the row of largest norm
    i0 = int(np.argmax(row_norm2))
    (a0,) = _np(A[i0])
    a0 = np.asarray(a0, dtype=np.float64)
    N = np.ones(c, bool)
    M = np.zeros(m, bool)
    M[i0] = True
    sigma = float(np.sqrt(row_norm2[i0]))
    u = np.zeros(m)
    u[i0] = 1.0
    v = a0 / sigma if sigma > 0 else np.zeros(c)
    trace = [float(row_norm2[i0] - rho * c)]  # f at the start: the single row is exactly rank one
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        M_old, N_old, u_old, v_old, s_old = M, N, u, v, sigma
        # steps 7–9
        u_bar, r = _row_step(A, A2, v, N, gamma, rho)
        M = r > 0
        if not M.any():
            trace.append(0.0)
            return SparsePMResult(
                M, np.zeros(c, bool), np.zeros(m), 0.0, np.zeros(c), trace, it, True
            )
        u = np.zeros(m)
        u[M] = u_bar[M] / np.sqrt(np.sum(u_bar[M] ** 2))
        trace.append(float(r[M].sum()))
        # steps 10–13
        v_bar, cc = _col_step(A, A2, u, M, gamma, rho)
        N = cc > 0
        if not N.any():
            trace.append(0.0)
            return SparsePMResult(
                np.zeros(m, bool), N, np.zeros(m), 0.0, np.zeros(c), trace, it, True
            )
        sigma = float(np.sqrt(np.sum(v_bar[N] ** 2)))
        v = np.where(N, v_bar, 0.0) / sigma
        trace.append(float(cc[N].sum()))
        # step 14: stagnation
        if (
            np.array_equal(M, M_old)
            and np.array_equal(N, N_old)
            and np.max(np.abs(u - u_old)) <= tol
            and np.max(np.abs(v - v_old)) <= tol
            and abs(sigma - s_old) <= tol * max(sigma, 1.0)
        ):
            converged = True
            break
    return SparsePMResult(M, N, u, sigma, v, trace, it, converged)


def power_method(A: np.ndarray, *, seed: int = 0, tol: float = 1e-12, max_iter: int = 10_000):
    """Algorithm ``[u, σ, v] = PowerMethod(A)`` of §3.3.1 (dense; for comparison and tests)."""
    rng = np.random.default_rng(seed)
    u_bar = rng.standard_normal(A.shape[0])  # step 1
    sigma = np.linalg.norm(u_bar)  # step 2
    u = u_bar / sigma  # step 3
    v = np.zeros(A.shape[1])
    for _ in range(max_iter):  # steps 4–10
        u_old, s_old = u, sigma
        v_bar = A.T @ u
        v = v_bar / np.linalg.norm(v_bar)
        u_bar = A @ v
        sigma = np.linalg.norm(u_bar)
        u = u_bar / sigma
        if np.max(np.abs(u - u_old)) <= tol and abs(sigma - s_old) <= tol * sigma:
            break
    return u, sigma, v


def _downdate(A, res: SparsePMResult):
    """R1D: A_{M,N} ← A_{M,N} − u_M σ v_Nᵀ (u and v are zero outside M and N)."""
    if isinstance(A, da.Array):
        uu = _as_vec(A, res.u)
        return (A - res.sigma * uu[:, None] * res.v[None, :]).persist()
    A = A.copy()
    A[np.ix_(res.M, res.N)] -= res.sigma * np.outer(res.u[res.M], res.v[res.N])
    return A


def r1d(
    A,
    n_components: int = 1,
    gamma: float = 1.1,
    rho: float = 0.0,
    *,
    row_norm2: np.ndarray | None = None,
    slot=checkpoint.NO_SLOT,
    **kw,
) -> list[SparsePMResult]:
    """Rank-one downdate: SparsePM, subtract u_M σ v_Nᵀ, repeat ``n_components`` times.

    Stops early when a round selects no row.  A is not modified.  ``slot`` (a
    :class:`fsdask.checkpoint.Slot`) saves the components found so far; a resumed call
    downdates A by them again and continues with the next.

    For an in-memory A every round runs on the rows with ‖A_i‖² > ρ only (``row_norm2``
    may be passed to skip recomputing the norms): a row at or below ρ never enters M
    (:func:`sparse_pm`), the downdate touches only rows of M, so by induction no round
    can select a row outside that set.  Same result, in time proportional to the candidate
    rows — the ρ bisection and path on a 10⁶-row A cost a few milliseconds per ρ.
    """
    norm2 = None
    if not isinstance(A, da.Array):
        m = A.shape[0]
        norm2 = _row_norm2(A) if row_norm2 is None else row_norm2
        rows = np.flatnonzero(norm2 > rho)
        if rows.size == 0:
            return []
        if rows.size < m:
            sub = r1d(A[rows], n_components, gamma, rho, row_norm2=norm2[rows], slot=slot, **kw)
            return [_scatter(r, rows, m) for r in sub]
    saved = slot.restore()  # a killed fit continues after the last component it saved
    out = [] if saved is None else _load(saved)
    if saved is not None and saved["final"]:
        return out
    for res in out:  # saved only while components remain, so each one was downdated
        A = _downdate(A, res)
    for k in range(len(out), n_components):
        res = sparse_pm(A, gamma, rho, row_norm2=norm2 if k == 0 else None, **kw)
        if not res.M.any():
            break
        out.append(res)
        if k + 1 < n_components:
            A = _downdate(A, res)
            slot.reached(k + 1, lambda: _dump(out))
    slot.reached(len(out), lambda: _dump(out), final=True)
    return out


def _dump(results: Sequence[SparsePMResult]) -> dict[str, Any]:
    """SparsePM results as checkpoint state: O(m) vectors per component."""
    return {
        "M": np.array([r.M for r in results]),
        "N": np.array([r.N for r in results]),
        "u": np.array([r.u for r in results]),
        "v": np.array([r.v for r in results]),
        "sigma": np.array([r.sigma for r in results]),
        "n_iter": np.array([r.n_iter for r in results], dtype=np.int64),
        "converged": np.array([r.converged for r in results], dtype=bool),
        "objective": [list(r.objective) for r in results],  # JSON keeps every float's bits
    }


def _load(saved: dict[str, Any]) -> list[SparsePMResult]:
    """The results :func:`_dump` saved."""
    return [
        SparsePMResult(
            saved["M"][k],
            saved["N"][k],
            saved["u"][k],
            float(saved["sigma"][k]),
            saved["v"][k],
            [float(f) for f in saved["objective"][k]],
            int(saved["n_iter"][k]),
            bool(saved["converged"][k]),
        )
        for k in range(len(saved["sigma"]))
    ]


def _selection(results: Sequence[SparsePMResult], m: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of the row sets, and the (first) component each feature came from (−1: none)."""
    comp = np.full(m, -1)
    for k in range(len(results) - 1, -1, -1):
        comp[results[k].M] = k
    return comp >= 0, comp


def rho_max(A, row_norm2: np.ndarray | None = None) -> float:
    """Smallest ρ at which SparsePM selects nothing: max_i ‖A_i‖² / c (the start then has f ≤ 0)."""
    norm2 = _row_norm2(A) if row_norm2 is None else row_norm2
    return float(norm2.max() / A.shape[1])


RHO_ALPHA = (
    0.05  # level of the default ρ: all p features independent of y stay out with prob. 1 − α
)


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

    Memory: O(c²) besides ``row_norm2``.  Returns ρ ≥ 0 (0 when every row is 0).
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


def rho_path(
    A,
    rhos: Sequence[float] | None = None,
    *,
    gamma: float = 1.1,
    n_components: int = 1,
    n_rhos: int = 25,
    max_rows: int | None = PATH_MAX_ROWS,
    row_norm2: np.ndarray | None = None,
    slot=checkpoint.NO_SLOT,
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
    ``slot`` saves the points done; a resumed call continues with the next ρ.
    ``row_norm2``: the ‖A_i‖² if the caller has them.
    """
    norm2 = _row_norm2(A) if row_norm2 is None else row_norm2
    m = A.shape[0]
    if rhos is None:
        top = rho_max(A, norm2)
        lo = top * 1e-4
        if max_rows is not None and max_rows < m:
            lo = max(lo, float(np.partition(norm2, m - max_rows)[m - max_rows]))
        rhos = np.geomspace(min(lo, top), top, n_rhos)
    rhos = np.asarray(rhos, dtype=np.float64)
    counts = np.zeros(rhos.size, dtype=np.int64)
    obj = np.zeros(rhos.size)
    rows = np.flatnonzero(norm2 > rhos.min()) if rhos.size else np.zeros(0, int)
    if rows.size < m and not isinstance(A, da.Array):
        A, norm2 = A[rows], norm2[rows]
    saved = slot.restore()  # a killed fit continues after the last ρ it saved
    done = 0 if saved is None else saved["iteration"]
    if saved is not None:
        counts[:done], obj[:done] = saved["n_selected"][:done], saved["objective"][:done]
    for t in range(done, rhos.size):
        res = r1d(A, n_components, gamma, float(rhos[t]), row_norm2=norm2, **kw)
        counts[t] = _selection(res, A.shape[0])[0].sum()
        obj[t] = sum(r.objective[-1] for r in res)
        slot.reached(
            t + 1, lambda: {"n_selected": counts, "objective": obj}, final=t + 1 == rhos.size
        )
    return {"rho": rhos, "n_selected": counts, "objective": obj}


def rho_for_k(
    A,
    k: int,
    *,
    gamma: float = 1.1,
    n_components: int = 1,
    max_bisect: int = 60,
    row_norm2: np.ndarray | None = None,
    slot=checkpoint.NO_SLOT,
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
    stepping down from there by factors of 4.  Every trial ρ therefore stays near the top
    of the row norms, where few rows are candidates, and the search is cheap on a large A.
    ``slot`` saves the bracket and the best ρ after each trial; the loops' conditions read
    only that state, so a resumed call continues exactly where the killed one was.
    ``row_norm2``: the ‖A_i‖² if the caller has them.
    """
    m = A.shape[0]
    norm2 = _row_norm2(A) if row_norm2 is None else row_norm2
    screened = [np.inf, None]  # the smallest ρ screened so far and its candidate rows

    def candidates(rho: float) -> np.ndarray:
        """Rows with ‖A_i‖² > ρ, in order; from the last screen's rows when ρ is above its ρ
        (every bisection trial), so only a new low end of the bracket reads all m norms."""
        if rho >= screened[0]:
            pool = screened[1]
            return pool[norm2[pool] > rho]
        screened[:] = rho, np.flatnonzero(norm2 > rho)
        return screened[1]

    def count(rho):
        """((rows, results on those rows of A), number selected) at ρ (rows None: all of A)."""
        if isinstance(A, da.Array):
            res = r1d(A, n_components, gamma, rho, row_norm2=norm2, **kw)
            return (None, res), int(_selection(res, m)[0].sum())
        # r1d's own screen (rows with ‖A_i‖² ≤ ρ are never selected), with the results left
        # on the candidate rows: a trial costs O(candidates), only the one returned is laid
        # out over all m rows
        rows = candidates(rho)
        sub = A if rows.size == m else A[rows]
        res = r1d(sub, n_components, gamma, rho, row_norm2=norm2[rows], **kw)
        return (rows, res), int(_selection(res, rows.size)[0].sum())

    def full(found) -> list[SparsePMResult]:
        rows, res = found
        return res if rows is None or rows.size == m else [_scatter(r, rows, m) for r in res]

    top = rho_max(A, norm2)
    lo = hi = min(top, float(np.partition(norm2, m - k)[m - k]))
    best, trials, n_bisect = None, 0, 0  # best: (ρ, results, count ≥ k) with the smallest count
    saved = slot.restore()  # a killed fit continues after the last trial it saved
    if saved is not None:
        lo, hi, trials, n_bisect = saved["lo"], saved["hi"], saved["iteration"], saved["n_bisect"]
        if saved["best_rho"] is not None:
            best = (saved["best_rho"], (None, _load(saved)), saved["best_count"])

    def state() -> dict[str, Any]:
        rho_b, found, c_b = best if best is not None else (None, (None, []), None)
        bracket = {"lo": lo, "hi": hi, "n_bisect": n_bisect}
        return {**_dump(full(found)), **bracket, "best_rho": rho_b, "best_count": c_b}

    while best is None:  # step ρ_lo down from ρ_hi
        lo, trials = max(lo / 4, top * 1e-12), trials + 1
        res, c = count(lo)
        if c >= k:
            best = (lo, res, c)
        elif lo <= top * 1e-12:
            raise ParameterError(
                f"n_features_to_select={k}, but SparseHSIC selects at most {c} features even with ρ → 0 "
                f"(γ={gamma}, n_components={n_components}): rows of A far from the leading direction are "
                "never accepted by (3.6); raise n_components, lower gamma towards 1, or ask for fewer features"
            )
        else:
            hi = lo
        slot.reached(trials, state)
    while best[2] != k and n_bisect < max_bisect and (n_bisect == 0 or hi / lo >= 1 + 1e-9):
        mid, trials, n_bisect = float(np.sqrt(lo * hi)), trials + 1, n_bisect + 1
        res, c = count(mid)
        if c >= k:
            lo, best = mid, (mid, res, c)
        else:
            hi = mid
        slot.reached(trials, state)
    slot.reached(trials, state, final=True)
    return best[0], full(best[1]), best[2]


# --------------------------------------------------------------------------------------
# the estimator (FeatureSelection)
# --------------------------------------------------------------------------------------
class SparseHSIC(Selector):
    """HSIC feature selection by the sparse power method and rank-one downdate (Zarkoob 2010, ch. 3).

    Parameters
    ----------
    gamma : float > 1, default 1.1
        γ of (3.4), the penalty on deviating from rank one.  γ ≤ 1 is refused: at γ = 1 the
        row test (3.6) no longer penalises a row's part orthogonal to v (it becomes a plain
        threshold on |A_iN v_N|, the thresholding §3.3.1 argues against) and for γ < 1 that
        orthogonal part counts *in favour* of a row.
    rho : float ≥ 0 or "auto", default "auto"
        ρ of (3.4), the size penalty |M||N|; larger ρ → fewer features.  A number is on the
        scale of A = X H Δᵀ/(n − 1) (see the module docstring; 0.015 is the value the thesis
        chose by hand for its §3.4.1 example).  "auto": the noise level of :func:`rho_noise`,
        which p features independent of y all stay below with probability 95 % — scale-free;
        when no feature rises above it, the few strongest are selected, with a warning.
        Ignored when ``n_features_to_select`` is given.
    n_components : int ≥ 1, default 1
        Rounds of R1D; the selection is the union of the row sets.
    response : {"auto", "categorical", "continuous", "multivariate", "rbf"}
        How Δ is built from y (see :func:`response_factor`); "auto" picks from the dtype.
    n_features_to_select : int, float in (0, 1) or None
        If given, ρ is bisected to select this many features (:func:`rho_for_k`).
    standardize : bool, default True
        Divide each feature by its standard deviation (A row-scaled, same pass): with the
        linear kernel A_i is a covariance, so on raw data a high-variance noise feature
        outranks a relevant one.  ``False`` is the thesis' exact behaviour (features only
        centred, by H).
    kernel_rank, kernel_width : for ``response="rbf"``.
    max_iter, tol : SparsePM stopping.
    memory_budget : int, str or None
        A is held in memory if m·c·8 bytes fit this budget (None: dask config
        ``fsdask.memory-budget``), else kept as a persisted, row-chunked dask array (each
        SparsePM step one pass over it).
    rho_grid : "auto", "default", None or sequence of float
        ρ values for the path stored in ``result_`` (``rho_path_n_selected(rho)``,
        ``rho_path_objective(rho)``), computed by ``fit``; "default" = 25 log-spaced values
        up to :func:`rho_max` (:func:`rho_path`); "auto" = not computed by ``fit``: the
        default path is ``rho_path_``, computed on first access (A in memory only).
    on_constant : {"drop", "error"}
        Constant features (A row exactly 0 after centring) get weight 0, or raise.

    Attributes
    ----------
    scores_ : |u| (max over components), zero outside the selected rows M.
    ranking_ : selected features by |u|, then the rest by ‖A_i‖ (their single-feature HSIC).
    components_ : (n_components_, n_features) the sparse vectors u.
    sigma_, v_ : σ and v of each component; ``hsic_A_`` the matrix A (when in memory);
    rho_ : the ρ used; objective_ : the trace of (3.4) for the first component.
    """

    method_name = "hsic"
    requires_y = True
    y_task = "any"
    min_samples = 3
    screen_in_fit = True  # NaN/Inf and constant features are found in the pass that computes A
    _parameter_constraints: dict = {
        "gamma": [Real(1, None, closed="neither")],
        "rho": [Real(0, None), StrOptions({"auto"})],
        "n_components": [Int(1)],
        "response": [StrOptions({"auto", "categorical", "continuous", "multivariate", "rbf"})],
        "n_features_to_select": [Int(1), Real(0, 1, closed="neither"), None],
        "standardize": ["boolean"],
        "kernel_rank": [Int(1), None],
        "kernel_width": [Real(0, None, closed="neither"), None],
        "max_iter": [Int(1)],
        "tol": [Real(0, None)],
        "memory_budget": [Real(0, None), str, None],
        "rho_grid": [StrOptions({"auto", "default"}), "array-like", None],
        "on_constant": [StrOptions({"drop", "error"})],
    }

    def __init__(
        self,
        gamma: float = 1.1,
        rho: float | str = "auto",
        n_components: int = 1,
        response: Response = "auto",
        n_features_to_select: int | float | None = None,
        standardize: bool = True,
        kernel_rank: int | None = None,
        kernel_width: float | None = None,
        max_iter: int = 200,
        tol: float = 1e-12,
        memory_budget: Any = None,
        rho_grid: Any = "auto",
        on_constant: str = "drop",
    ):
        self.gamma = gamma
        self.rho = rho
        self.n_components = n_components
        self.response = response
        self.n_features_to_select = n_features_to_select
        self.standardize = standardize
        self.kernel_rank = kernel_rank
        self.kernel_width = kernel_width
        self.max_iter = max_iter
        self.tol = tol
        self.memory_budget = memory_budget
        self.rho_grid = rho_grid
        self.on_constant = on_constant

    def _pass(self, X: da.Array, delta: np.ndarray, ex: Execution, ck) -> tuple[Any, bool]:
        """Step 2's pass over X: the stats of :func:`hsic_matrix` (NumPy when A fits the
        budget, else persisted) and whether they are in memory.  In memory they are
        checkpointed at once (O(m·c), the costly part of a fit), so a resumed fit never reads
        X again; a larger A is not written (that would hold it in memory, which the budget
        forbids)."""
        slot = ck.slot("hsic/A")
        saved = slot.restore()
        if saved is not None:
            ex.passes = saved["passes"]
            return saved["stats"], True
        stats = hsic_matrix(X, delta, standardize=self.standardize)  # lazy
        if not ex.fits(X.shape[1] * delta.shape[0] * 8):
            return ex.persist(stats)[0], False
        (stats,) = ex.compute(stats)
        slot.reached(1, lambda: {"stats": stats, "passes": ex.passes}, final=True)
        return stats, True

    def _fixed_rho(
        self, A, delta: np.ndarray, norm2: np.ndarray, kw: dict, ck
    ) -> tuple[float, list]:
        """SparsePM/R1D at the given ρ, or at the noise level (:func:`rho_noise`) for "auto"
        (``norm2``: the ‖A_i‖² the fit computed once)."""
        slot = ck.slot("hsic/r1d")
        if self.rho != "auto":
            rho = float(self.rho)
            return rho, r1d(A, self.n_components, self.gamma, rho, row_norm2=norm2, slot=slot, **kw)
        rho = rho_noise(norm2, delta)
        results = r1d(A, self.n_components, self.gamma, rho, row_norm2=norm2, slot=slot, **kw)
        if not results and norm2.max() > 0:
            warnings.warn(
                f"SparseHSIC: no feature's HSIC with y rises above the level {A.shape[0]} features "
                f"independent of y would reach (rho='auto' = {rho:.3g}); selected only the few "
                "strongest, at rho just below the largest ‖A_i‖²/c — give n_features_to_select=K "
                "to rank K features, or a smaller rho",
                UserWarning,
                stacklevel=5,
            )
            rho = rho_max(A, norm2) * (1 - 1e-9)
            slot = ck.slot("hsic/r1d/fallback")
            results = r1d(A, self.n_components, self.gamma, rho, row_norm2=norm2, slot=slot, **kw)
        return rho, results

    def _scaled_A(self, stats, dense: bool, ex: Execution) -> tuple[Any, np.ndarray]:
        """A from the pass's stats (step 2), each row divided by its feature's standard
        deviation (``standardize``) and exactly 0 for a constant feature (not rounding
        residue); and the mask of the other, active features.  A NumPy A is written in one
        sweep: the transposed copy and the scaling together."""
        if dense:
            nbad, rng_, sd = stats[-3], stats[-2], stats[-1]
        else:
            nbad, rng_, sd = compute_blocks(stats[-3], stats[-2], stats[-1])  # persisted stats
        active = self._apply_screen(nbad, rng_, np.zeros_like(rng_))  # constant ⇔ range 0
        factor = None
        if self.standardize:
            factor = np.where(sd > 0, 1.0 / np.where(sd > 0, sd, 1.0), 0.0)
        if not active.all():  # × 1 or × 0: the same bits as a second product
            factor = active.astype(np.float64) if factor is None else factor * active
        At = stats[:-3].T
        if not dense:
            At = At.rechunk({0: ex.rows_per_chunk(8 * At.shape[1]), 1: -1})
            if factor is not None:
                At = At * da.from_array(factor[:, None], chunks=(At.chunks[0], 1))
            return At.persist(), active
        if factor is None:
            return np.ascontiguousarray(At), active
        return np.multiply(At, factor[:, None], out=np.empty(At.shape)), active

    # ---- FeatureSelection ----
    def _fit(self, X: da.Array, y: np.ndarray, ctx: FitContext) -> FitOutput:
        n, p = X.shape
        self.__dict__.pop("rho_path_", None)  # a refit's path is computed afresh
        delta, kind, info = response_factor(
            y, self.response, kernel_rank=self.kernel_rank, kernel_width=self.kernel_width
        )  # step 1
        c = delta.shape[0]
        ex = Execution(self.memory_budget)
        ck = checkpoint.for_fit(self, X, y)
        stats, dense = self._pass(X, delta, ex, ck)  # step 2
        A, active = self._scaled_A(stats, dense, ex)
        norm2 = _row_norm2(A)  # ‖A_i‖²: one pass over A, for ρ, the errors and the ranking
        # step 3: SparsePM (with R1D rounds), ρ from the user or bisected for k features
        kw = {"tol": self.tol, "max_iter": self.max_iter, "memory_budget": ex.budget}
        k = self.n_features_to_select
        if isinstance(k, float) and 0 < k < 1:
            k = max(1, int(round(k * p)))
        if k is not None:
            if not isinstance(k, (int, np.integer)) or k < 1 or k > p:
                raise ParameterError(
                    f"n_features_to_select={self.n_features_to_select!r}; use an integer in "
                    f"[1, {p}], a fraction in (0, 1) or None"
                )
            rho, results, count = rho_for_k(
                A,
                int(k),
                gamma=self.gamma,
                n_components=self.n_components,
                row_norm2=norm2,
                slot=ck.slot("hsic/bisect"),
                **kw,
            )
        else:
            rho, results = self._fixed_rho(A, delta, norm2, kw, ck)
            if not results:
                raise ParameterError(
                    f"rho={rho:g} selects no feature: the largest row of A has ‖A_i‖²/c = {rho_max(A, norm2):.4g} "
                    f"(A = X H Δᵀ/(n−1), c = {c}); use rho below that, or n_features_to_select=K"
                )
        support, comp = _selection(results, p)
        U = np.array([r.u for r in results])
        scores = np.abs(U).max(axis=0)
        row_norm = np.sqrt(norm2)
        # ranking: the selected rows by |u|, then the others by ‖A_i‖ (constant features last)
        rank_key = np.where(support, 2.0 + scores, row_norm / (row_norm.max() or 1.0))
        for r in results:
            if not r.converged:
                warnings.warn(
                    f"SparsePM stopped at max_iter={self.max_iter} before stagnation; raise max_iter",
                    ConvergenceWarning,
                    stacklevel=4,
                )
        self.rho_ = rho
        self.response_ = kind
        self.sigma_ = np.array([r.sigma for r in results])
        self.v_ = np.array([r.v for r in results])
        self.components_ = U.reshape(-1, p)
        self.hsic_A_ = A if dense else None
        self.n_components_ = len(results)
        extras: dict = {
            "selected_by_component": comp,
            "hsic_row_norm": row_norm,
            "sigma": self.sigma_,
            "v": self.v_,
        }
        dims: dict = {
            "selected_by_component": ("feature",),
            "hsic_row_norm": ("feature",),
            "sigma": ("component",),
            "v": ("component", "response_component"),
        }
        coords: dict = {}
        grid = self.rho_grid
        if not (grid is None or isinstance(grid, str) and grid == "auto"):
            path = rho_path(
                A,
                None if isinstance(grid, str) else grid,
                gamma=self.gamma,
                n_components=self.n_components,
                row_norm2=norm2,
                slot=ck.slot("hsic/path"),
                **kw,
            )
            self.__dict__["rho_path_"] = path
            coords["rho"] = path["rho"]
            extras.update(
                rho_path_n_selected=path["n_selected"], rho_path_objective=path["objective"]
            )
            dims.update(rho_path_n_selected=("rho",), rho_path_objective=("rho",))
        attrs = {
            "rho": rho,
            "response": kind,
            "n_response_components": c,
            "n_components_found": len(results),
            "A_in_memory": bool(dense),
            "n_constant_features": int(active.size - active.sum()),
            "objective_traces": [r.objective for r in results],
            "sparsepm_iterations": [r.n_iter for r in results],
            "passes_over_X": ex.passes,
        }
        for key in ("kernel_width", "kernel_rank", "kernel_trace_kept"):
            if key in info:
                attrs[key] = info[key]
        if "classes" in info:
            attrs["classes"] = [str(v) for v in info["classes"]]
        on = slice(None) if active.all() else active  # no copies when every feature is active
        return FitOutput(
            scores=scores[on],
            support=support[on],
            rank_key=rank_key[on],
            active=active,
            n_iter=sum(r.n_iter for r in results),
            converged=all(r.converged for r in results),
            objective=results[0].objective,
            extras=extras,
            extra_dims=dims,
            coords=coords,
            attrs=attrs,
        )

    @property
    def rho_path_(self) -> dict[str, np.ndarray]:
        """The ρ path (:func:`rho_path`, default grid) on this fit's A, computed on first access
        (``rho_grid="auto"``); with ``rho_grid="default"`` or a grid it was computed by ``fit``."""
        if "rho_path_" not in self.__dict__:
            if getattr(self, "hsic_A_", None) is None:
                raise AttributeError(
                    "rho_path_: A was not kept in memory (memory_budget); call "
                    "fsdask.methods.hsic.rho_path on it, or fit with rho_grid='default'"
                )
            kw = {"tol": self.tol, "max_iter": self.max_iter}  # A is in memory: no budget needed
            self.__dict__["rho_path_"] = rho_path(
                self.hsic_A_, gamma=self.gamma, n_components=self.n_components, **kw
            )
        return self.__dict__["rho_path_"]
