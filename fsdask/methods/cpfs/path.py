"""The CPFS regularisation path (Fig. 1 of the paper): λ from λ_max down, certified at every λ.

:func:`cpfs_path` does the work of a CPFS fit: it prepares the problem (4.2) from X
(:mod:`fsdask.methods.cpfs.problem`), solves it at a decreasing sequence of λ from
``λ_max = max_i 2‖(XᵀX)_i‖₁`` (where A = 0), each λ warm-started from the previous one and
stopped on its duality gap (:mod:`fsdask.methods.cpfs.solvers`), and, to keep exactly q
rows, refines λ by a safeguarded search in log λ.  Along the path, the sequential strong
rule (Tibshirani et al. 2012) seeds each λ's working set.  The path's progress is a
:class:`PathState` that the fit's checkpoint saves after every λ (never X).

Defaults follow glmnet: the grid ends at ``lambda_min_ratio·λ_max`` (1e-4 if n > p, else
1e-2), and the default path stops at ``max_features`` = min(n, p, 250) active rows (a FISTA
step costs O(|S|²·p)) or when the reconstruction stops improving.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Any, ClassVar, Sequence

import numpy as np
import xarray as xr

from fsdask._config import memory_budget
from fsdask._validation import (
    Int,
    InvalidParameterError,
    Real,
    StrOptions,
    assert_all_finite,
    check_array,
    constant_features,
    feature_names_of,
    validate_parameter_constraints,
)
from fsdask.errors import InputError, ParameterError
from fsdask.fitting import FitContext, check_client_array
from fsdask.linalg.reductions import compute_blocks
from fsdask.linalg.threads import fit_threads
from fsdask.methods.cpfs.problem import (
    CLIENT_ARRAYS,
    MAX_SCAN_FLOPS_DEFAULT,
    Problem,
    check_scan_cost,
    client_nbytes,
    diagonal,
    prepare_problem,
    row_abs_max,
    row_norms,
)
from fsdask.methods.cpfs.solvers import SOLVERS, solve_lambda

__all__ = [
    "BISECT_RTOL",
    "EXPLAINED_MIN_GAIN",
    "EXPLAINED_STOP",
    "LAMBDA_MIN_RATIO_TALL",
    "LAMBDA_MIN_RATIO_WIDE",
    "MAX_FEATURES_DEFAULT",
    "PARAMETER_CONSTRAINTS",
    "LambdaPath",
    "PathOptions",
    "PathState",
    "cpfs_path",
    "entry_lambda",
    "lambda_grid",
    "path_dataset",
    "path_defaults",
    "toward_q",
]

log = logging.getLogger("fsdask")

#: default path (glmnet's rule): λ_min/λ_max when n > p, and when n ≤ p
LAMBDA_MIN_RATIO_TALL, LAMBDA_MIN_RATIO_WIDE = 1e-4, 1e-2
#: default path: stop once this many rows are active (or min(n, p)): a FISTA step costs O(|S|²·p)
MAX_FEATURES_DEFAULT = 250
#: default path: stop once ‖X − XA‖² explains this share of ‖X‖² …
EXPLAINED_STOP = 0.999
#: … or the explained share grew by less than this from the previous λ
EXPLAINED_MIN_GAIN = 1e-5
#: the search for the λ that keeps q rows stops when its interval is this narrow (relative)
BISECT_RTOL = 1e-3
#: the per-λ values of the path (``path_<key>`` variables over ``lambda``)
_RECORD_KEYS = (
    "n_active",
    "primal",
    "dual",
    "loss",
    "gap",
    "n_iter",
    "kkt_rounds",
    "kkt_max_ratio",
    "seconds",
)

#: the options of CPFS and :func:`cpfs_path`, as scikit-learn parameter constraints
PARAMETER_CONSTRAINTS: dict = {
    "lam": [Real(0, None), None],
    "n_features_to_select": [Int(1), None],
    "n_lambdas": [Int(1)],
    "lambda_min_ratio": [Real(0, 1, closed="neither"), StrOptions({"auto"})],
    "lambdas": ["array-like", None],
    "max_features": [Int(1), StrOptions({"auto"}), None],
    "max_iter": [Int(1)],
    "tol": [Real(0, None, closed="neither")],
    "solver": [StrOptions(set(SOLVERS))],
    "scale": ["boolean"],
    "energy_tol": [Real(0, None)],
    "memory_budget": [Real(0, None), str, None],
    "max_bisect": [Int(0)],
    "max_scan_flops": [Real(0, None, closed="neither"), None],
    "on_constant": [StrOptions({"drop", "error"})],
    "on_duplicate": [StrOptions({"drop", "keep", "error"})],
}


@dataclasses.dataclass(frozen=True)
class PathOptions:
    """The options of one λ path (the parameters of :func:`cpfs_path`, which documents them).

    ``memory_budget`` is the budget of a path run outside an estimator (a fit's context
    carries its own); with ``method_name`` and :meth:`get_params` the options key the
    checkpoint of such a run.
    """

    method_name: ClassVar[str] = "cpfs"
    n_lambdas: int = 20
    lam: float | None = None
    lambda_min_ratio: float | str = "auto"
    lambdas: Sequence[float] | None = None
    max_features: int | str | None = "auto"
    n_features_to_select: int | None = None
    max_iter: int = 5000
    tol: float = 1e-4
    solver: str = "fista"
    scale: bool = False
    energy_tol: float = 1e-12
    max_bisect: int = 12
    on_duplicate: str = "drop"
    memory_budget: Any = None

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The options as a dict (what a checkpoint is keyed by)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def default_path(self) -> bool:
        """No ``lam``, ``lambdas`` or ``n_features_to_select``: the default path's stops apply."""
        return self.lam is None and self.lambdas is None and self.n_features_to_select is None


def path_defaults(n: int, p: int, options: PathOptions) -> tuple[float, int | None, bool]:
    """The resolved ``lambda_min_ratio``, ``max_features`` and whether the default-path stops
    apply (glmnet's choices: a ratio by n vs p; on the default path — no ``lam``, ``lambdas``
    or ``n_features_to_select`` — stop at min(n, p, 250) active rows or when the
    reconstruction stops improving)."""
    ratio = options.lambda_min_ratio
    if isinstance(ratio, str):
        ratio = LAMBDA_MIN_RATIO_TALL if n > p else LAMBDA_MIN_RATIO_WIDE
    mf = options.max_features
    if isinstance(mf, str):
        mf = min(n, p, MAX_FEATURES_DEFAULT) if options.default_path else None
    return float(ratio), mf, options.default_path and isinstance(options.lambda_min_ratio, str)


def lambda_grid(lam_max: float, options: PathOptions, ratio: float) -> np.ndarray:
    """The λ grid, decreasing: ``lambdas`` as given, else geometric from λ_max to ``lam`` or
    ``ratio·λ_max`` in ``n_lambdas`` points (ending at 0 when ``lam`` = 0)."""
    if options.lambdas is not None:
        return np.sort(np.asarray(options.lambdas, dtype=float))[::-1]
    lam, n_lambdas = options.lam, options.n_lambdas
    lo = lam if lam is not None else lam_max * ratio
    if lam is not None and lam >= lam_max:
        return np.array([float(lam)])
    if lo <= 0:
        grid = lam_max * np.geomspace(1.0, ratio, max(n_lambdas - 1, 1))
        return np.append(grid, 0.0)
    return lam_max * np.geomspace(1.0, lo / lam_max, n_lambdas) if n_lambdas > 1 else np.array([lo])


def toward_q(q: int, r1: dict, r2: dict, overshoot: bool = True) -> float | None:
    """The λ at which the count of nonzero rows, extrapolated linearly in log λ through two path
    points (λ₁ > λ₂, counts c₁ < c₂ < q), reaches ``q + ⌈q/20⌉`` — just past q, so that the
    next solve brackets q without the grid's long overshoot (each extra active row costs)."""
    (l1, c1), (l2, c2) = (r1["lambda"], r1["n_active"]), (r2["lambda"], r2["n_active"])
    if not (l1 > l2 > 0 and c2 > c1):
        return None
    slope = (c2 - c1) / math.log(l1 / l2)
    return l2 * math.exp(-(q + math.ceil(q / 20) * overshoot - c2) / slope)


def entry_lambda(path_row_norm: np.ndarray, lambdas: np.ndarray) -> np.ndarray:
    """Largest λ on the path at which each feature's row of A is nonzero (0 if never)."""
    order = np.argsort(-lambdas)
    nz = path_row_norm[order] > 0
    first = np.argmax(nz, axis=0)
    return np.where(nz.any(axis=0), lambdas[order][first], 0.0)


# --------------------------------------------------------------------------- the path
@dataclasses.dataclass
class PathState:
    """The λ path between two λ: what the next λ starts from and a checkpoint saves (never X).

    Attributes
    ----------
    grid : list of float
        The λ to solve, decreasing (a λ aimed just past q may be inserted).
    k : int
        ``grid[k]`` is the next λ.
    stop : (str, str)
        Where and why the path stops: ``path_stop`` and ``path_stop_reason``.
    stopped : bool
        A stop rule fired (the grid's end is the other way out).
    explained_prev : float or None
        Share of ‖X‖² reconstructed at the previous λ (the default path's stop).
    below : int
        The record with fewer rows than aimed at (-1: none yet).
    records : list of dict
        Per λ solved: ``lambda`` and the values of ``_RECORD_KEYS``.
    row_norm, diag : ndarray (n_λ, p)
        ``‖a_i‖_∞`` and ``a_ii`` per λ solved.
    lam, S, A, gl1 : float, ndarray, ndarray, ndarray
        The last λ solved, its nonzero rows S, ``A_S`` and KKT scan: the next warm start.
    prev_lam, prev_S, prev_A, prev_gl1
        The λ solved before it (a search for q rows may start from either).
    n_scans, n_exact_rows : int
        The problem's KKT-scan counters.
    """

    grid: list
    lam: float
    S: np.ndarray
    A: np.ndarray
    gl1: np.ndarray
    prev_lam: float
    prev_S: np.ndarray
    prev_A: np.ndarray
    prev_gl1: np.ndarray
    row_norm: np.ndarray
    diag: np.ndarray
    records: list = dataclasses.field(default_factory=list)
    stop: tuple = ("grid_end", "")
    k: int = 0
    stopped: bool = False
    explained_prev: float | None = None
    below: int = -1
    n_scans: int = 0
    n_exact_rows: int = 0


def _path_done(s: PathState) -> bool:
    return s.stopped or s.k >= len(s.grid)


@dataclasses.dataclass
class _Solved:
    """One λ solved: its record, ‖a_i‖_∞ and a_ii over p, and (S, A_S, KKT scan)."""

    record: dict[str, Any]
    row_norm: np.ndarray
    diag: np.ndarray
    S: np.ndarray
    A: np.ndarray
    gl1: np.ndarray


class LambdaPath:
    """Warm-started λ path (decreasing λ) with the sequential strong rule (Tibshirani et al. 2012).

    Parameters
    ----------
    prob : Problem
        The problem (4.2) of X.
    options : PathOptions
    ctx : FitContext
        The fit's context (progress lines).
    max_features : int or None
        Stop once this many rows are nonzero.
    watch_fit : bool
        Stop when the reconstruction reaches ``EXPLAINED_STOP`` or stops improving.
    """

    def __init__(
        self,
        prob: Problem,
        options: PathOptions,
        ctx: FitContext,
        max_features: int | None = None,
        watch_fit: bool = False,
    ):
        self.prob, self.options, self.ctx = prob, options, ctx
        self.max_features, self.watch_fit = max_features, watch_fit
        self.q = options.n_features_to_select
        self.aim = (
            None
            if options.lam is not None or options.lambdas is not None
            else (self.q if self.q is not None else max_features)
        )
        # the working set may start this large (the number of rows the path aims at)
        self.min_cap = self.aim or 0
        self.gl1_zero = prob.grad_l1(np.zeros(0, dtype=np.int64), np.zeros((0, prob.p)))
        allowed_g = self.gl1_zero[prob.allowed]
        self.lambda_max = float(allowed_g.max()) if allowed_g.size else 0.0
        self.sols: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def start(self, grid: Sequence[float], stop: tuple[str, str]) -> PathState:
        """The state before the first λ: A = 0 at λ_max."""
        S, A, p = np.zeros(0, dtype=np.int64), np.zeros((0, self.prob.p)), self.prob.p
        lam = self.lambda_max
        return PathState(
            grid=list(grid),
            lam=lam,
            S=S,
            A=A,
            gl1=self.gl1_zero,
            prev_lam=lam,
            prev_S=S,
            prev_A=A,
            prev_gl1=self.gl1_zero,
            row_norm=np.zeros((0, p)),
            diag=np.zeros((0, p)),
            stop=stop,
            n_scans=self.prob.n_scans,
            n_exact_rows=self.prob.n_exact_rows,
        )

    # ---- one λ
    def _working_set(
        self, lam: float, warm: tuple[np.ndarray, np.ndarray, np.ndarray, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows S that start λ (the warm start's nonzero rows and the strong rule's
        candidates) and A_S warm-started."""
        S0, A0, gl1, lam_prev = warm
        nz = S0[row_abs_max(A0) > 0] if S0.size else S0
        strong = np.flatnonzero(self.prob.allowed & (gl1 >= 2 * lam - lam_prev))
        if lam >= self.lambda_max:  # A = 0 is optimal iff max_i ‖∇f_i(0)‖₁ ≤ λ: nothing to solve
            nz, strong = nz[:0], strong[:0]
        # working-set cap: exactly low-rank X ties thousands of rows at the rule's threshold;
        # the KKT rounds of solve_lambda still guarantee optimality
        cap = max(2 * nz.size + 10, self.min_cap)
        if strong.size > cap:
            strong = strong[np.argsort(-gl1[strong], kind="stable")[:cap]]
        S = np.union1d(nz, strong).astype(np.int64)
        A = np.zeros((S.size, self.prob.p))
        if nz.size:
            A[np.searchsorted(S, nz)] = A0[np.searchsorted(S0, nz)]
        return S, A

    def solve(
        self, lam: float, warm: tuple[np.ndarray, np.ndarray, np.ndarray, float], it: int
    ) -> _Solved:
        """Solve (4.2) at λ from the warm start ``(S, A_S, KKT scan, its λ)``; ``it`` numbers
        the progress line."""
        t0 = time.perf_counter()
        S, A = self._working_set(lam, warm)
        o, p = self.options, self.prob.p
        res = solve_lambda(
            self.prob,
            lam,
            S,
            A,
            solver=o.solver,
            tol=float(o.tol),
            max_iter=int(o.max_iter),
            gl1_zero=self.gl1_zero,
        )
        keep = row_abs_max(res["A"]) > 0 if res["S"].size else np.zeros(0, bool)
        S, A = res["S"][keep], res["A"][keep]
        norms = row_norms(p, S, A)
        inactive = self.prob.allowed & (norms == 0)
        rec = {
            "lambda": lam,
            **{k: res[k] for k in ("primal", "dual", "loss", "gap", "n_iter", "kkt_rounds")},
            "n_active": int(S.size),
            "kkt_max_ratio": float(res["gl1"][inactive].max(initial=0.0) / lam) if lam > 0 else 0.0,
            "seconds": time.perf_counter() - t0,
        }
        self.sols[lam] = (S, A, res["gl1"])
        self.ctx.log_iteration(
            it,
            lam=lam,
            active_rows=int(S.size),
            gap=res["gap"],
            inner_iterations=res["n_iter"],
            kkt_rounds=res["kkt_rounds"],
        )
        return _Solved(rec, norms, diagonal(p, S, A), S, A, res["gl1"])

    def _solve_into(self, s: PathState, lam: float, warm: tuple | None = None) -> dict:
        """Solve λ (from ``warm``, else from the last λ) and add it to the state; its record."""
        self.prob.n_scans, self.prob.n_exact_rows = s.n_scans, s.n_exact_rows
        sol = self.solve(lam, warm or (s.S, s.A, s.gl1, s.lam), it=len(s.records) + 1)
        s.n_scans, s.n_exact_rows = self.prob.n_scans, self.prob.n_exact_rows
        s.records.append(sol.record)
        s.row_norm = np.vstack([s.row_norm, sol.row_norm[None]])
        s.diag = np.vstack([s.diag, sol.diag[None]])
        s.prev_lam, s.prev_S, s.prev_A, s.prev_gl1 = s.lam, s.S, s.A, s.gl1
        s.lam, s.S, s.A, s.gl1 = lam, sol.S, sol.A, sol.gl1
        return sol.record

    # ---- along the grid
    def step(self, s: PathState) -> PathState:
        """Solve the next λ of the grid and apply the stop rules (one checkpointed step)."""
        lam = float(s.grid[s.k])
        s.k += 1
        rec = self._solve_into(s, lam)
        stop = self._stop_rule(s, rec)
        if stop is not None:
            s.stop, s.stopped = stop, True
        return s

    def _stop_rule(self, s: PathState, rec: dict) -> tuple[str, str] | None:
        """Where the path stops after ``rec``, or None; aims the grid at q on the way."""
        q, n_active = self.q, rec["n_active"]
        if q is not None and n_active >= q:
            return ("n_features_to_select", f"{n_active} active rows ≥ n_features_to_select={q}")
        if self.aim is not None:
            before, s.below = s.below, len(s.records) - 1
            if before >= 0 and s.k < len(s.grid):
                lam_next = toward_q(self.aim, s.records[before], rec, overshoot=q is not None)
                if lam_next is not None and lam_next > s.grid[s.k]:
                    # a shorter step than the grid's, aimed just past q
                    s.grid.insert(s.k, lam_next)
        mf = self.max_features
        if mf is not None and n_active >= mf:
            return ("max_features", f"{n_active} active rows ≥ max_features={mf}")
        if not (self.watch_fit and n_active > 0):
            return None
        trG = self.prob.trG
        explained = 1.0 - rec["loss"] / trG if trG > 0 else 1.0
        if explained >= EXPLAINED_STOP:
            return (
                "reconstruction",
                f"XA reconstructs {explained:.4%} ≥ {EXPLAINED_STOP:.1%} of ‖X‖²",
            )
        if s.explained_prev is not None and explained - s.explained_prev < EXPLAINED_MIN_GAIN:
            return (
                "reconstruction",
                f"explained share of ‖X‖² grew by {explained - s.explained_prev:.2e} "
                f"< {EXPLAINED_MIN_GAIN:g} from the previous λ",
            )
        s.explained_prev = explained
        return None

    def remember_ends(self, s: PathState) -> None:
        """Know the last two λ's solutions of ``s`` (restored with it when the path resumed)."""
        self.sols.setdefault(s.prev_lam, (s.prev_S, s.prev_A, s.prev_gl1))
        self.sols.setdefault(s.lam, (s.S, s.A, s.gl1))

    # ---- to exactly q rows
    def bisect(self, s: PathState, q: int, below: dict, above: dict) -> dict:
        """Refine λ between ``below`` (fewer than q nonzero rows) and ``above`` (q or more).

        The new λ interpolates log λ linearly in the count of nonzero rows, kept within the
        middle 60% of the interval (so it shrinks by ≥ 20% a step, like a safeguarded
        regula falsi), and is warm-started from the nearer end.  Stops at exactly q rows, after
        ``max_bisect`` steps, or when the interval is narrower than ``BISECT_RTOL`` relative:
        rows that enter at the same λ (ties, e.g. in exactly low-rank data) cannot be split by
        λ, and the first q by ``ranking_`` are then selected from the solution with more than
        q rows.
        """
        hi, c_hi = below["lambda"], below["n_active"]  # count(hi) < q ≤ count(lo)
        lo, c_lo = above["lambda"], above["n_active"]
        best = above
        for _ in range(int(self.options.max_bisect)):
            if lo > 0 and hi / lo - 1.0 < BISECT_RTOL:
                break
            t = min(max((q - c_hi) / max(c_lo - c_hi, 1), 0.2), 0.8)
            mid = hi * (lo / hi) ** t if lo > 0 else hi / 2
            # warm start from the nearer end in log λ: from lo, the extra rows are zeroed by
            # the prox and the rows that stay need neither a KKT round nor many steps
            near = lo if lo > 0 and t > 0.5 else hi
            rec = self._solve_into(s, mid, (*self.sols[near], near))
            if rec["n_active"] >= q:
                lo, c_lo, best = mid, rec["n_active"], rec
                if rec["n_active"] == q:
                    break
            else:
                hi, c_hi = mid, rec["n_active"]
        return best


def path_dataset(s: PathState, names: np.ndarray) -> xr.Dataset:
    """The path's records over ``lambda`` (decreasing) and ``feature`` (the ``path_*``
    variables)."""
    order = sorted(range(len(s.records)), key=lambda i: -s.records[i]["lambda"])
    recs = [s.records[i] for i in order]
    data = {
        "path_row_norm": (("lambda", "feature"), s.row_norm[order]),
        "path_diag": (("lambda", "feature"), s.diag[order]),
    }
    for key in _RECORD_KEYS:
        data[f"path_{key}"] = ("lambda", np.array([r[key] for r in recs]))
    lam = np.array([r["lambda"] for r in recs])
    return xr.Dataset(data, coords={"lambda": lam, "feature": names})


# --------------------------------------------------------------------------- the core
def _check_lambdas(lambdas: Sequence[float] | None) -> None:
    if lambdas is None:
        return
    lams = np.asarray(lambdas, dtype=float)
    if lams.ndim != 1 or lams.size == 0 or not np.all(np.isfinite(lams)) or np.any(lams < 0):
        raise ParameterError("lambdas must be a non-empty list of finite numbers ≥ 0")


def _run_path(X: Any, options: PathOptions, ctx: FitContext) -> tuple[LambdaPath, PathState, dict]:
    """Prepare (4.2) from X and walk the grid (checkpointed per λ, ``"cpfs/path"``), then
    search λ for exactly q rows; the path, its state and the run's facts."""
    n, p = X.shape
    q = options.n_features_to_select
    _check_lambdas(options.lambdas)
    prob, info = prepare_problem(
        X,
        ctx.execution,
        scale=options.scale,
        energy_tol=options.energy_tol,
        on_duplicate=options.on_duplicate,
    )
    if q is not None and q > int(prob.allowed.sum()):
        raise ParameterError(
            f"n_features_to_select={q} but X has only {int(prob.allowed.sum())} usable "
            f"features ({p} non-constant, {info['n_duplicate_columns']} duplicate)"
        )
    ratio, max_features, watch_fit = path_defaults(n, p, options)
    path = LambdaPath(prob, options, ctx, max_features=max_features, watch_fit=watch_fit)
    grid = lambda_grid(path.lambda_max, options, ratio)
    stop = (
        ("lam", f"reached λ = {grid[-1]:.4g}")
        if options.lam is not None
        else ("grid_end", f"end of the grid, λ = {grid[-1]:.4g}")
    )
    # a killed fit continues after the last λ it saved
    s = ctx.iterate("cpfs/path", path.start(grid, stop), path.step, done=_path_done).state
    path.remember_ends(s)
    final = s.records[-1]
    log.info(
        "cpfs: path stopped at λ=%.4g (%d active rows): %s",
        final["lambda"],
        final["n_active"],
        s.stop[1],
    )
    if q is not None and options.lam is None and final["n_active"] != q and s.below >= 0:
        final = path.bisect(s, q, s.records[s.below], final)
    facts = {"final": final, "ratio": ratio, "max_features": max_features, **info}
    return path, s, facts


def _solve(X: Any, options: PathOptions, ctx: FitContext) -> xr.Dataset:
    """:func:`cpfs_path` on the features X holds (see there), in ``ctx``."""
    path, s, facts = _run_path(X, options, ctx)
    prob, final, p = path.prob, facts["final"], X.shape[1]
    S, A, gl1 = path.sols[final["lambda"]]
    ds = path_dataset(s, np.arange(p))
    entry = entry_lambda(ds["path_row_norm"].values, ds["lambda"].values)
    scores = row_norms(p, S, A)
    converged = bool(np.all(ds["path_gap"].values <= options.tol * 1.0000001))
    if not converged:
        ctx.warn(
            f"CPFS: the duality gap did not reach tol={options.tol} at every λ "
            f"(worst {float(ds['path_gap'].max()):.2e}); raise max_iter"
        )
    # rank: by entry λ, then ‖a_i‖_∞, then the KKT ratio
    rank = np.empty(p, dtype=np.int64)
    rank[np.lexsort((-gl1, -scores, -entry))] = np.arange(1, p + 1)
    ds["entry_lambda"] = ("feature", entry)
    ds["rank"] = ("feature", rank)
    ds["coef"] = (("coef_row", "feature"), A)
    ds = ds.assign_coords(coef_row=S)
    mf = facts["max_features"]
    ds.attrs = {
        "lambda": final["lambda"],
        "lambda_max": path.lambda_max,
        "duality_gap": final["gap"],
        "primal": final["primal"],
        "dual": final["dual"],
        "kkt_max_ratio_inactive": final["kkt_max_ratio"],
        "certificate": "relative duality gap (P - D)/P of eq. 4.2 on the rank-r factor B",
        "solver": options.solver,
        "n_kkt_scans": s.n_scans,
        "kkt_exact_rows_per_scan": s.n_exact_rows / max(s.n_scans, 1)
        if prob.G is None
        else float(prob.p),
        "gram_in_memory": prob.G is not None,
        "path_stop": s.stop[0],
        "path_stop_reason": s.stop[1],
        "lambda_min_ratio": facts["ratio"],
        "max_features": -1 if mf is None else int(mf),
        **{k: facts[k] for k in ("rank", "discarded_energy", "n_duplicate_columns")},
        "converged": converged,
    }
    return ds


def _over_all_features(ds: xr.Dataset, active: np.ndarray, names: np.ndarray | None) -> xr.Dataset:
    """The path of the active features laid out over all of X's: constant features get 0 and
    rank last, in feature order."""
    idx = np.flatnonzero(active)
    p = active.size
    out = {}
    for v, var in ds.data_vars.items():
        if var.dims[-1] != "feature" or idx.size == p:
            out[v] = (var.dims, var.values)
            continue
        full = np.zeros(var.shape[:-1] + (p,), dtype=var.dtype)
        full[..., idx] = var.values
        if v == "rank":
            full[~active] = np.arange(idx.size + 1, p + 1)
        out[v] = (var.dims, full)
    coords = {
        "lambda": ds["lambda"].values,
        "feature": names if names is not None else np.arange(p),
        "coef_row": idx[ds["coef_row"].values],
    }
    return xr.Dataset(out, coords=coords, attrs=ds.attrs)


def _standalone(X: Any, options: PathOptions, max_scan_flops: float | None) -> xr.Dataset:
    """:func:`cpfs_path` outside an estimator: X validated, constant features set aside (as
    a fit does), the path solved in a context of its own."""
    t0 = time.perf_counter()
    try:
        validate_parameter_constraints(
            PARAMETER_CONSTRAINTS,
            {**options.get_params(), "max_scan_flops": max_scan_flops},
            caller_name="cpfs_path",
        )
    except InvalidParameterError as exc:
        raise ParameterError(str(exc)) from None
    Xd = check_array(X, min_samples=2, check_finite=False)
    n, p = Xd.shape
    check_scan_cost(n, p, max_scan_flops)  # both by the shape alone, before X is read
    check_client_array(
        client_nbytes(n, p),
        CLIENT_ARRAYS,
        n=n,
        p=p,
        name="cpfs_path",
        method="cpfs",
        budget=memory_budget(options.memory_budget),
    )
    assert_all_finite(Xd)  # NaN/Inf refused here
    (const,) = compute_blocks(constant_features(Xd))
    if const.all():
        raise InputError(f"all {p} features of X are constant; there is nothing to select")
    active = ~np.asarray(const, bool)
    X_act = Xd if active.all() else Xd[:, active]
    if len(X_act.chunks[1]) > 1 and not active.all():
        X_act = X_act.rechunk({1: Xd.chunks[1][0]})
    with fit_threads(Xd):  # the door a fit enters: one BLAS thread for a small X
        ds = _solve(X_act, options, FitContext(options, options.memory_budget).bind(X_act))
    ds = _over_all_features(ds, active, feature_names_of(X))
    ds.attrs["wall_time_s"] = round(time.perf_counter() - t0, 3)
    if options.n_features_to_select is not None:
        ds.attrs["lambda_q"] = ds.attrs["lambda"]
    return ds


def cpfs_path(
    X: Any,
    n_lambdas: int = 20,
    *,
    lambda_min_ratio: float | str = "auto",
    lambdas: Sequence[float] | None = None,
    max_features: int | str | None = "auto",
    n_features_to_select: int | None = None,
    lam: float | None = None,
    max_iter: int = 5000,
    tol: float = 1e-4,
    solver: str = "fista",
    scale: bool = False,
    energy_tol: float = 1e-12,
    max_bisect: int = 12,
    on_duplicate: str = "drop",
    memory_budget: Any = None,
    max_scan_flops: float | None = MAX_SCAN_FLOPS_DEFAULT,
    ctx: FitContext | None = None,
) -> xr.Dataset:
    """The CPFS regularisation path (Fig. 1 of the paper) as an ``xarray.Dataset``.

    Variables over ``lambda`` (decreasing) and ``feature``: ``path_row_norm`` (‖a_i‖_∞),
    ``path_diag`` (a_ii), ``path_n_active``, ``path_primal``, ``path_dual``, ``path_gap``
    (relative duality gap, the certificate), ``path_loss``; ``entry_lambda(feature)``
    (largest λ with a nonzero row; features leave in increasing order of it), ``rank``
    (by entry λ, then ‖a_i‖_∞ at the final λ, then its KKT value ‖∇f_i‖₁) and ``coef``
    (the nonzero rows ``coef_row`` of A at the final λ).  With
    ``n_features_to_select=q`` the path is refined by bisection until q rows are nonzero;
    the attribute ``lambda_q`` is that λ.  Defaults (glmnet's): the grid ends at
    ``lambda_min_ratio·λ_max`` with the ratio 1e-4 if n > p else 1e-2, and the path stops
    early at ``max_features`` = min(n, p, 250) active rows or when the share of ‖X‖²
    reconstructed reaches 99.9 % or grows by less than 1e-5 per λ; the attributes
    ``path_stop`` (max_features, reconstruction, grid_end, n_features_to_select, lam) and
    ``path_stop_reason`` say where and why it stopped.

    Parameters
    ----------
    X : array-like (n, p)
        Samples × features (numpy, dask, xarray, pandas, scipy.sparse); with ``ctx``, the
        dask array of a fit's features (finite, non-constant).
    n_lambdas, lambda_min_ratio, lambdas, max_features, n_features_to_select, lam, max_iter, \
tol, solver, scale, energy_tol, max_bisect, on_duplicate, memory_budget, max_scan_flops
        As for :class:`~fsdask.CPFS`; the last two only without ``ctx`` (a
        fit's context carries its budget, and its estimator checks the scan cost).
    ctx : FitContext, optional
        The fit's context (budget, checkpoint, warnings, progress).  None: X is validated,
        its constant features set aside (weight 0, ranked last), and the path runs in a
        context of its own.

    Returns
    -------
    xarray.Dataset
        The path; its attributes hold the final λ, λ_max, the certificate (``duality_gap``,
        ``primal``, ``dual``), ``converged``, the factor's ``rank`` and the run's counts.
        Memory: the factor B (r·p·8 bytes), G when p²·8 bytes fit the budget, A's working
        rows (``|S|``·p·8 bytes) and two (n_λ × p) path arrays; X is never held.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import principal_sources
    >>> X = principal_sources(n_samples=40, n_features=100, n_sources=4).dataset["X"].values
    >>> path = fsdask.cpfs_path(X, n_lambdas=5)
    >>> path["path_row_norm"].dims, path.attrs["path_stop"]
    (('lambda', 'feature'), 'max_features')
    """
    options = PathOptions(
        n_lambdas=n_lambdas,
        lam=lam,
        lambda_min_ratio=lambda_min_ratio,
        lambdas=lambdas,
        max_features=max_features,
        n_features_to_select=n_features_to_select,
        max_iter=max_iter,
        tol=tol,
        solver=solver,
        scale=scale,
        energy_tol=energy_tol,
        max_bisect=max_bisect,
        on_duplicate=on_duplicate,
        memory_budget=memory_budget,
    )
    if ctx is None:
        return _standalone(X, options, max_scan_flops)
    return _solve(X, options, ctx)
