"""The CPFS estimator: parameters, validation, and the fit's output from :func:`cpfs_path`."""

from __future__ import annotations

from typing import Any, Literal, Sequence

import dask.array as da
import numpy as np
import xarray as xr

from fsdask.base import FitOutput, Selector
from fsdask.fitting import FitContext
from fsdask.methods.cpfs.path import PARAMETER_CONSTRAINTS, cpfs_path
from fsdask.methods.cpfs.problem import (
    CLIENT_ARRAYS,
    MAX_SCAN_FLOPS_DEFAULT,
    Problem,
    check_scan_cost,
    client_nbytes,
    prepare_problem,
    row_norms,
)

__all__ = ["CPFS", "DENSE_COEF_MAX_FEATURES"]

#: above this many features the estimator keeps only the nonzero rows of A in ``coef_``
DENSE_COEF_MAX_FEATURES = 2000


class CPFS(Selector):
    """Convex principal feature selection (Masaeli et al., SDM 2010), solved to a certificate.

    ``min_A ‖X − XA‖²_F + λ Σ_i ‖a_i‖_∞`` (eq. 4.2) on centred columns; features whose row
    of A is nonzero are selected.  λ is reached along a warm-started path from
    ``λ_max = max_i 2‖(XᵀX)_i‖₁`` (where A = 0) downwards.

    Parameters
    ----------
    lam : float or None
        The λ of (4.2).  None: with ``n_features_to_select=q``, the λ that keeps q rows
        (path, then bisection in log λ); otherwise the end of the default path.
    n_features_to_select : int or None
        q.  Selected = the nonzero rows at the λ that keeps q (if the path passes a λ with
        exactly q nonzero rows), else the first q by ``ranking_``.
    n_lambdas : int
        Points of the geometric λ grid (from λ_max to ``lam`` or ``lambda_min_ratio·λ_max``).
        With ``n_features_to_select`` or ``max_features``, extra λ are inserted where the
        strong rule predicts the grid would overshoot that many rows.
    lambda_min_ratio : float or "auto"
        End of the default grid, relative to λ_max; "auto" (glmnet's rule): 1e-4 if n > p,
        else 1e-2.  With "auto" on the default path, the path also stops when the share of
        ‖X‖² reconstructed reaches 99.9 % or grows by less than 1e-5 from one λ to the next.
    lambdas : sequence of float, optional
        An explicit grid (used as given, sorted decreasing).
    max_features : int, "auto" or None
        Stop the path once this many rows are nonzero (the p² wall); "auto":
        min(n, p, 250) on the default path (no ``lam``, ``lambdas``, ``n_features_to_select``),
        else no limit.  Where and why the path stopped: ``result_.attrs["path_stop"]`` and
        ``["path_stop_reason"]``.
    max_iter : int
        Inner iterations per λ and KKT round (FISTA steps or BCD sweeps).
    tol : float, default 1e-4
        Target relative duality gap ``(P − D)/P`` at every λ (the certificate).  The gap
        bounds how far P is from its optimum and often overstates it: at 1e-4 the primal
        was within 3e-8 (relative) of a 1e-8 solve on every λ of nips_words' default path,
        within 7e-7 on a rank-20 500 × 2·10⁴ X, within 1.4e-5 on a small noisy low-rank X.
        The selections matched a 1e-6 solve (nips: the same top 250 in the same order;
        500 × 10⁵ rank-20: 99 of the same 100) with 1.6× and 4.8× fewer FISTA steps.
        Lower it when the path's own values matter, not for the selection.
    solver : {"fista", "qp", "bcd"}
        Accelerated proximal gradient on (4.2); accelerated projected gradient on the paper's
        QP (5.5); or exact block-coordinate descent over rows (slow, a reference).
    scale : bool
        Divide centred columns by their standard deviation (the paper does not).
    energy_tol : float
        Singular directions of X with total energy ≤ ``energy_tol·‖X‖²`` are dropped from
        the factor B (numerical rank); reported as ``discarded_energy``.
    memory_budget : int, float, str or None
        Keep the p × p Gram in memory when it fits this budget (faster KKT scans); None
        reads dask config ``fsdask.memory-budget``.  Also chooses how X is factored
        (:func:`fsdask.linalg.gram_factor`).
    max_bisect : int
        Steps of the search in log λ (safeguarded interpolation on the count of nonzero
        rows) to hit exactly q nonzero rows; it also stops once the λ interval is narrower
        than ``BISECT_RTOL`` (1e-3) relative, where rows enter together.
    on_constant : {"drop", "error"}
        Constant columns carry no variance: weight 0, never selected (or raise).
    max_scan_flops : float or None
        Refuse, before X is read, a problem whose KKT scan from the factor would cost more
        than this many flops, ``2·p²·min(n, p)`` (the p² wall: at 100 × 10⁷ one scan is
        2·10¹⁶ flops, days); None lifts the limit.  Select candidates first (e.g. a
        ``Filter``) to bring p down.
    on_duplicate : {"drop", "keep", "error"}
        Exact duplicate columns: ``drop`` keeps the first copy's row free and fixes the
        others' rows at zero (they are still reconstructed; the optimum is unchanged, since
        merged rows never cost more penalty); ``keep`` leaves them free (the optimum is then
        not unique and copies may share the weight); ``error`` raises.

    Attributes
    ----------
    scores_ : ndarray of shape (p,)
        Row ∞-norms ``‖a_i‖_∞`` at the final λ.
    ranking_ : ndarray of shape (p,)
        By entry λ (the largest λ at which the row is nonzero), then ``scores_``; 1 = best.
    coef_ : ndarray
        A (p × p) when p ≤ 2000, else its nonzero rows (``coef_rows_`` gives their indices).
    lambda_ : float
        The final λ.
    lambda_max_ : float
        The smallest λ at which A = 0.
    duality_gap_ : float
        The relative duality gap at ``lambda_`` (the certificate, ≤ ``tol``).
    path_ : xarray.Dataset
        Over ``lambda``: row norms, diagonal of A, active counts, gaps (see :func:`cpfs_path`).
    result_ : xarray.Dataset
        ``weight``, ``rank``, ``selected`` per feature, and the path variables (dims
        ``lambda``, ``feature``).

    Examples
    --------
    Four source columns and 96 noisy multiples of them: CPFS keeps the sources.

    >>> import fsdask
    >>> from fsdask.datasets import principal_sources
    >>> syn = principal_sources(n_samples=40, n_features=100, n_sources=4, random_state=0)
    >>> sel = fsdask.CPFS(n_features_to_select=4).fit(syn.dataset["X"].values)
    >>> sel.get_support(indices=True)
    array([0, 1, 2, 3])
    >>> bool(sel.duality_gap_ <= 1e-4)
    True
    """

    method_name = "cpfs"
    _parameter_constraints: dict = PARAMETER_CONSTRAINTS

    def __init__(
        self,
        lam: float | None = None,
        n_features_to_select: int | None = None,
        *,
        n_lambdas: int = 20,
        lambda_min_ratio: float | str = "auto",
        lambdas: Sequence[float] | None = None,
        max_features: int | str | None = "auto",
        max_iter: int = 5000,
        tol: float = 1e-4,
        solver: Literal["fista", "qp", "bcd"] = "fista",
        scale: bool = False,
        energy_tol: float = 1e-12,
        memory_budget: Any = None,
        max_bisect: int = 12,
        max_scan_flops: float | None = MAX_SCAN_FLOPS_DEFAULT,
        on_constant: Literal["drop", "error"] = "drop",
        on_duplicate: Literal["drop", "keep", "error"] = "drop",
    ):
        self.lam = lam
        self.n_features_to_select = n_features_to_select
        self.n_lambdas = n_lambdas
        self.lambda_min_ratio = lambda_min_ratio
        self.lambdas = lambdas
        self.max_features = max_features
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.scale = scale
        self.energy_tol = energy_tol
        self.memory_budget = memory_budget
        self.max_bisect = max_bisect
        self.max_scan_flops = max_scan_flops
        self.on_constant = on_constant
        self.on_duplicate = on_duplicate

    # ---- the fit
    def _check_shape(self, n: int, p: int) -> None:
        """Refuse before any pass over X when one KKT scan would exceed ``max_scan_flops``,
        or when this process cannot hold the factor B and its scans' residuals."""
        check_scan_cost(n, p, self.max_scan_flops)
        self._check_client_array(client_nbytes(n, p), CLIENT_ARRAYS, n, p)

    def _prepare(self, X: da.Array) -> tuple[Problem, dict[str, Any]]:
        """The problem (4.2) of X under these options, outside a fit (:func:`prepare_problem`)."""
        ex = FitContext(self, self.memory_budget).execution
        return prepare_problem(
            X, ex, scale=self.scale, energy_tol=self.energy_tol, on_duplicate=self.on_duplicate
        )

    def _fit(self, X: da.Array, y: np.ndarray | None, ctx: FitContext) -> FitOutput:
        path = cpfs_path(
            X,
            self.n_lambdas,
            lambda_min_ratio=self.lambda_min_ratio,
            lambdas=self.lambdas,
            max_features=self.max_features,
            n_features_to_select=self.n_features_to_select,
            lam=self.lam,
            max_iter=self.max_iter,
            tol=self.tol,
            solver=self.solver,
            scale=self.scale,
            energy_tol=self.energy_tol,
            max_bisect=self.max_bisect,
            on_duplicate=self.on_duplicate,
            ctx=ctx,
        )
        return self._output(path)

    def _output(self, path: xr.Dataset) -> FitOutput:
        """The fit's output from the path: scores ‖a_i‖_∞ at the final λ, the path's ranking,
        and the nonzero rows as the selection — or the first q by that ranking when no λ
        keeps exactly q rows."""
        attrs = dict(path.attrs)
        converged = attrs.pop("converged")
        S, A = path["coef_row"].values, path["coef"].values
        rank = path["rank"].values
        scores = row_norms(rank.size, S, A)
        support = scores > 0
        q = self.n_features_to_select
        if q is not None and int(support.sum()) != q:
            support = rank <= q
        self._set_coef(S, A)
        self.lambda_ = attrs["lambda"]
        self.lambda_max_ = attrs["lambda_max"]
        self.duality_gap_ = attrs["duality_gap"]
        path_vars = [v for v in path.data_vars if v.startswith("path_")]
        return FitOutput(
            scores=scores,
            support=support,
            support_is_final=True,
            rank_key=(-rank.astype(np.float64),),
            n_iter=int(path["path_n_iter"].sum()),
            converged=converged,
            objective=[float(v) for v in path["path_primal"].values],
            extras={
                **{v: path[v].values for v in path_vars},
                "entry_lambda": path["entry_lambda"].values,
            },
            extra_dims={v: path[v].dims for v in path_vars},
            coords={"lambda": path["lambda"].values},
            attrs=attrs,
        )

    def _set_coef(self, S: np.ndarray, A: np.ndarray) -> None:
        """coef_ (p × p, or its nonzero rows above DENSE_COEF_MAX_FEATURES) over all features."""
        act = self.active_features_
        p = act.size
        idx = np.flatnonzero(act)
        rows = idx[S]
        if p <= DENSE_COEF_MAX_FEATURES:
            self.coef_ = np.zeros((p, p))
            self.coef_[np.ix_(rows, idx)] = A
        else:
            self.coef_ = np.zeros((rows.size, p))
            self.coef_[:, idx] = A
        self.coef_rows_ = rows

    @property
    def path_(self) -> xr.Dataset:
        """The λ path over all features (``path_*`` variables and ``entry_lambda`` of ``result_``)."""
        ds = self.result_
        return ds[[v for v in ds.data_vars if v.startswith("path_")] + ["entry_lambda"]]

    @property
    def leave_order_(self) -> np.ndarray:
        """Indices of the features that were ever nonzero, in the order they leave as λ grows."""
        entry = self.result_["entry_lambda"].values
        order = np.argsort(self.ranking_)[::-1]
        return order[entry[order] > 0]
