"""The SparseHSIC estimator: ``FeatureSelection`` of Zarkoob (2010), ch. 3.

It validates the parameters, then runs the core: step 1, Δ from y (:mod:`.response`);
step 2, A = X H Δᵀ/(n − 1) in one pass over X (:mod:`.matrix`); step 3, SparsePM with R1D
rounds (:mod:`.components`) at the given ρ, at the noise level (:func:`.rho.rho_noise`) or
at the ρ bisected for ``n_features_to_select`` (:func:`.rho.rho_for_k`); the ρ path
(:func:`.rho.rho_path`) on request.  It builds the :class:`~fsdask.base.FitOutput`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from fsdask._validation import Int, Real, StrOptions
from fsdask.base import FitOutput, Selector
from fsdask.errors import ConvergenceWarning, ParameterError
from fsdask.fitting import FitContext
from fsdask.linalg.tall import row_norm2
from fsdask.methods.hsic.components import r1d, ranked
from fsdask.methods.hsic.matrix import hsic_pass, pass_screen, scaled_A
from fsdask.methods.hsic.response import Response, response_factor
from fsdask.methods.hsic.rho import rho_for_k, rho_max, rho_noise, rho_path
from fsdask.methods.hsic.sparsepm import SparsePMResult

__all__ = ["SparseHSIC", "warn_unconverged"]


class SparseHSIC(Selector):
    """HSIC feature selection by the sparse power method and rank-one downdate (Zarkoob 2010, ch. 3).

    Parameters
    ----------
    gamma : float > 1, default 1.1
        γ of (3.4), the penalty on deviating from rank one.  γ ≤ 1 is refused: at γ = 1 the
        row test (3.6) no longer penalises a row's part orthogonal to v (it becomes a plain
        threshold on ``|A_iN v_N|``, the thresholding §3.3.1 argues against) and for γ < 1 that
        orthogonal part counts *in favour* of a row.
    rho : float ≥ 0 or "auto", default "auto"
        ρ of (3.4), the size penalty ``|M||N|``; larger ρ → fewer features.  A number is on the
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
    kernel_rank, kernel_width : int or None, float or None
        For ``response="rbf"``: the rank of the kernel factor (None: what keeps 99.9 % of
        its trace, at most 50) and the kernel width (None: the median heuristic).
    max_iter, tol : int, float
        SparsePM stopping: iterations at most, and the change of the objective below
        which it stops.
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
    scores_ : ndarray of shape (n_features,)
        ``|u|`` (max over components), zero outside the selected rows M.
    ranking_ : ndarray of shape (n_features,)
        Selected features by ``|u|``, then the rest by ‖A_i‖ (their single-feature HSIC).
    components_ : ndarray of shape (n_components, n_features)
        The sparse vectors u.
    sigma_, v_ : ndarray
        σ and v of each component; ``hsic_A_`` is the matrix A (when in memory).
    rho_ : float
        The ρ used.
    objective_ : ndarray
        The trace of (3.4) for the first component.
    result_ : xarray.Dataset
        ``weight``, ``rank``, ``selected`` over ``feature``, the fit's provenance in its
        attributes.

    Examples
    --------
    Zarkoob's §3.4.1 problem: y = sin(x₄) + sin(x₉) + x₁₄² + noise over 60 features.

    >>> import fsdask
    >>> from fsdask.datasets import zarkoob_regression
    >>> ds = zarkoob_regression().dataset
    >>> sel = fsdask.SparseHSIC(n_features_to_select=3).fit(ds["X"].values, ds["y"].values)
    >>> sel.get_support(indices=True)
    array([ 4,  9, 14])
    """

    method_name = "hsic"
    requires_y = True
    y_task = "any"
    min_samples = 3
    screen_in_fit = True  # NaN/Inf and constant features are found in the pass that computes A
    #: A = X H Δᵀ and the screen are sums over sample blocks (:func:`.matrix.hsic_sums`);
    #: every later step reads A only
    streams_samples = True
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

    # ---- FeatureSelection ----
    def _fit(self, X: Any, y: np.ndarray, ctx: FitContext) -> FitOutput:
        delta, kind, info = self.response_of(y)  # step 1
        stats, dense = hsic_pass(X, delta, ctx, standardize=self.standardize)  # step 2
        return self.fit_stats(stats, (delta, kind, info), ctx, dense=dense)

    def response_of(self, y: Any) -> tuple[np.ndarray, str, dict]:
        """Step 1: Δ of ``y`` with this estimator's response parameters
        (:func:`response_factor`)."""
        return response_factor(
            y, self.response, kernel_rank=self.kernel_rank, kernel_width=self.kernel_width
        )

    def fit_stats(
        self, stats: Any, response: tuple, ctx: FitContext | None, *, dense: bool = True
    ) -> FitOutput:
        """Step 3 from the pass's stats: the screen, A, the components, the output.

        What ``fit`` does after its pass over X; :class:`~fsdask.Stability` calls it on each
        resample's stats from its one pass (:mod:`fsdask.stability.hsicpass`).

        Parameters
        ----------
        stats : ndarray or dask array (c + 3) × m, as :func:`~.matrix.hsic_pass` returns
        response : (Δ, kind, info) of :meth:`response_of`
        ctx : FitContext or None
            The fit's context; None: nothing checkpointed, warnings go to ``warnings.warn``
            and ``passes_over_X`` is 0.
        dense : bool, whether ``stats`` is in memory

        Returns
        -------
        FitOutput.  Memory: one m × c copy of A.
        """
        delta, kind, info = response
        p = stats.shape[1]
        self.__dict__.pop("rho_path_", None)  # a refit's path is computed afresh
        nbad, range_, sd = pass_screen(stats)
        active = self._apply_screen(nbad, range_, np.zeros_like(range_))  # constant ⇔ range 0
        A = scaled_A(stats, active, sd if self.standardize else None, ctx)
        norm2 = row_norm2(A)  # ‖A_i‖²: one pass over A, for ρ, the errors and the ranking
        rho, results = self._components(A, delta, norm2, ctx)  # step 3
        warn_unconverged(results, self.max_iter, ctx)
        self.rho_ = rho
        self.response_ = kind
        self.sigma_ = np.array([r.sigma for r in results])
        self.v_ = np.array([r.v for r in results])
        self.components_ = np.array([r.u for r in results]).reshape(-1, p)
        self.hsic_A_ = A if dense else None
        self.n_components_ = len(results)
        attrs = {"rho": rho, "response": kind, "n_response_components": delta.shape[0]}
        attrs.update(self._attrs(results, dense, active, ctx))
        for key in ("kernel_width", "kernel_rank", "kernel_trace_kept"):
            if key in info:
                attrs[key] = info[key]
        if "classes" in info:
            attrs["classes"] = [str(v) for v in info["classes"]]
        out = self._output(results, norm2, active, attrs)
        self._path(A, norm2, out, ctx)
        return out

    @staticmethod
    def _attrs(
        results: list[SparsePMResult], dense: bool, active: np.ndarray, ctx: FitContext | None
    ) -> dict[str, Any]:
        """The run's facts for ``result_.attrs``."""
        return {
            "n_components_found": len(results),
            "A_in_memory": bool(dense),
            "n_constant_features": int(active.size - active.sum()),
            "objective_traces": [r.objective for r in results],
            "sparsepm_iterations": [r.n_iter for r in results],
            "passes_over_X": 0 if ctx is None else ctx.passes,
        }

    def _solver(self) -> dict[str, Any]:
        """SparsePM's stopping parameters (its memory budget is the fit's, from ``ctx``)."""
        return {"tol": self.tol, "max_iter": self.max_iter}

    def _components(
        self, A: Any, delta: np.ndarray, norm2: np.ndarray, ctx: FitContext | None
    ) -> tuple[float, list[SparsePMResult]]:
        """Step 3: SparsePM with R1D rounds, at ρ from the user or bisected for k features."""
        p, k = A.shape[0], self.n_features_to_select
        if isinstance(k, float) and 0 < k < 1:
            k = max(1, int(round(k * p)))
        if k is None:
            rho, results = self._fixed_rho(A, delta, norm2, ctx)
            if not results:
                raise ParameterError(
                    f"rho={rho:g} selects no feature: the largest row of A has ‖A_i‖²/c = {rho_max(A, norm2):.4g} "
                    f"(A = X H Δᵀ/(n−1), c = {delta.shape[0]}); use rho below that, or n_features_to_select=K"
                )
            return rho, results
        if not isinstance(k, (int, np.integer)) or k < 1 or k > p:
            raise ParameterError(
                f"n_features_to_select={self.n_features_to_select!r}; use an integer in "
                f"[1, {p}], a fraction in (0, 1) or None"
            )
        opts = {"gamma": self.gamma, "n_components": self.n_components, **self._solver()}
        rho, results, _ = rho_for_k(A, int(k), row_norm2=norm2, ctx=ctx, **opts)
        return rho, results

    def _fixed_rho(
        self, A: Any, delta: np.ndarray, norm2: np.ndarray, ctx: FitContext | None
    ) -> tuple[float, list[SparsePMResult]]:
        """SparsePM/R1D at the given ρ, or at the noise level (:func:`rho_noise`) for "auto"
        (``norm2``: the ‖A_i‖² the fit computed once)."""
        rounds = (A, self.n_components, self.gamma)
        kw = {"row_norm2": norm2, "ctx": ctx, **self._solver()}
        if self.rho != "auto":
            rho = float(self.rho)
            return rho, r1d(*rounds, rho, name="hsic/r1d", **kw)
        rho = rho_noise(norm2, delta)
        results = r1d(*rounds, rho, name="hsic/r1d", **kw)
        if not results and norm2.max() > 0:
            _warn(
                ctx,
                f"SparseHSIC: no feature's HSIC with y rises above the level {A.shape[0]} features "
                f"independent of y would reach (rho='auto' = {rho:.3g}); selected only the few "
                "strongest, at rho just below the largest ‖A_i‖²/c — give n_features_to_select=K "
                "to rank K features, or a smaller rho",
                UserWarning,
            )
            rho = rho_max(A, norm2) * (1 - 1e-9)
            results = r1d(*rounds, rho, name="hsic/r1d/fallback", **kw)
        return rho, results

    def _output(
        self, results: list[SparsePMResult], norm2: np.ndarray, active: np.ndarray, attrs: dict
    ) -> FitOutput:
        """The FitOutput of the components: scores |u|, the selection (union of the row
        sets) and the ranking — the selected rows by |u|, then the others by ‖A_i‖
        (constant features last)."""
        support, comp, scores, row_norm, rank_key = ranked(results, norm2)
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
            coords={},
            attrs=attrs,
        )

    def _path(self, A: Any, norm2: np.ndarray, out: FitOutput, ctx: FitContext | None) -> None:
        """The ρ path of ``rho_grid`` (unless "auto" or None) into ``out`` and ``rho_path_``."""
        grid = self.rho_grid
        if grid is None or isinstance(grid, str) and grid == "auto":
            return
        path = rho_path(
            A,
            None if isinstance(grid, str) else grid,
            gamma=self.gamma,
            n_components=self.n_components,
            row_norm2=norm2,
            ctx=ctx,
            name="hsic/path",
            **self._solver(),
        )
        self.__dict__["rho_path_"] = path
        out.coords["rho"] = path["rho"]
        out.extras.update(
            rho_path_n_selected=path["n_selected"], rho_path_objective=path["objective"]
        )
        out.extra_dims.update(rho_path_n_selected=("rho",), rho_path_objective=("rho",))

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
            # A is in memory: no budget needed
            self.__dict__["rho_path_"] = rho_path(
                self.hsic_A_, gamma=self.gamma, n_components=self.n_components, **self._solver()
            )
        return self.__dict__["rho_path_"]


def warn_unconverged(results: list[SparsePMResult], max_iter: int, ctx: FitContext | None) -> None:
    """A :class:`~fsdask.errors.ConvergenceWarning` for each component whose SparsePM
    stopped at ``max_iter`` before stagnation (through ``ctx``, or ``warnings.warn``)."""
    for r in results:
        if not r.converged:
            _warn(
                ctx,
                f"SparsePM stopped at max_iter={max_iter} before stagnation; raise max_iter",
            )


def _warn(
    ctx: FitContext | None, message: str, category: type[Warning] = ConvergenceWarning
) -> None:
    """A warning through the fit's context, or ``warnings.warn`` without one (a resample's
    step 3 in :class:`~fsdask.Stability`, whose caller collects them)."""
    if ctx is not None:
        ctx.warn(message, category)
    else:
        warnings.warn(message, category, stacklevel=3)
