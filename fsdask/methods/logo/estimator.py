"""The estimator: :class:`Logo`'s parameters, their validation, and its result.

The work is :func:`~fsdask.methods.logo.algorithm.logo_weights` (Algorithm 1); this module
turns its final state into the fit's :class:`~fsdask.base.FitOutput`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fsdask._validation import Int, Real, StrOptions
from fsdask.base import FitOutput, Selector
from fsdask.fitting import FitContext
from fsdask.linalg.execution import TREE_SUM_COPIES
from fsdask.methods.logo.algorithm import AUTHORS, CONVENTIONS, SOLVERS, LogoState, logo_weights
from fsdask.methods.quadratic import SampleCost, SampleLimit, logo_cost

__all__ = ["Logo"]


class Logo(SampleLimit, Selector):
    """Local-learning feature weighting for high-dimensional data (Sun et al., TPAMI 2010).

    Parameters
    ----------
    sigma : float, default 2.0
        Kernel width σ of ``k(d) = exp(−d/σ)`` (> 0).  The paper: 2 (spiral), 5
        (microarrays); a larger σ converges faster (Fig. 5b).
    lam : float, default 1.0
        ℓ1 regularisation λ ≥ 0 of eq. 7 (the paper: 1).
    theta : float, default 0.01
        Stop when ``‖w(t) − w(t−1)‖₂ < θ`` (the paper: 0.01; ``conventions="authors"``
        compares the max-normalised √w instead).
    max_iter : int, default 30
        Maximum number of outer (fixed-point) iterations (at most 11 under
        ``conventions="authors"``).
    solver : {"lbfgs", "gd"}
        ``"lbfgs"`` (L-BFGS-B on w ≥ 0, default, fewest passes over Z̄) or ``"gd"`` (the
        paper's v² gradient descent with line search, eq. 10).  Not used under
        ``conventions="authors"``, which solves eq. 7 as ``Logo.m`` does.
    n_features_to_select : int, float or None
        Top-k selection; ``None`` selects weights > ``support_threshold`` × max weight.
    elim_tol : float, default 1e-8
        Weights ≤ this leave the active set (the paper: 1e-8).
    eliminate : bool, default True
        ``False`` keeps every feature in every iteration (plain Algorithm 1).
    certify : bool, default True
        Check the optimality of every eliminated feature at the end (one pass) and let
        violators rejoin; ``False`` gives the paper's plain elimination.
    kkt_tol : float, default 1e-6
        A feature violates optimality when ``∂/∂w_j < −kkt_tol``.
    inner_tol, inner_max_iter : float, int
        Tolerance and iteration cap of the inner solver (under ``conventions="authors"`` the
        tolerance is ``Logo.m``'s 1 % change of the objective).
    support_threshold : float, default 0.01
        Without ``n_features_to_select``, the weights above this share of the largest are
        selected (the paper: 0.01, §4.2).
    memory_budget : int, str or None
        Bytes (or "1GiB"); None reads dask config ``fsdask.memory-budget``.  X's active
        columns and Z̄ are held in memory once N·J_active·8 bytes fit; above it they stay
        chunked (dask) and every product is a sweep.  More samples N than it holds the
        N × N matrices for (8·(TREE_SUM_COPIES + 1)·N² bytes) are refused before X is read;
        0 leaves that check off.
    on_constant : {"drop", "error"}
        ``"drop"`` (constant features get weight 0) or ``"error"``.
    standardize : bool, default True
        Divide every feature by its standard deviation first (Manhattan distances weigh
        features by their scale, so on raw data a high-variance noise feature outweighs a
        relevant one); ``False`` is the paper's exact behaviour (its data were standardised
        beforehand).  Costs one extra pass over X when X does not fit the memory budget.
    max_samples : int or None, default None
        Fit on at most this many samples, drawn per class in proportion to its size (every
        class keeps 2, a nearest hit for each of its samples; refused when ``max_samples``
        cannot keep them), seeded by ``random_state``; recorded in ``result_.attrs``
        (``max_samples``, ``n_samples_used``, ``subsample_seed``, ``subsample_rows_sha256``).
        None uses every sample.
    random_state : int or None, default 0
        Seed of the ``max_samples`` subsample (None: one is drawn and recorded).
    conventions : {"paper", "authors"}, default "paper"
        ``"paper"``: Algorithm 1 as the paper's text states it.  ``"authors"``: as the
        authors' own MATLAB code ``Logo.m`` (2010) runs it, which departs from the text in
        four ways: the stop compares the max-normalised square roots,
        ``‖√w(t)/max √w(t) − √w(t−1)/max √w(t−1)‖₂ < θ``; the first iteration's distances
        are divided by √J (J features: a kernel √J times wider at the start); the inner
        problem stops as soon as its objective changes by less than 1 %
        (``fsdask.methods.logo.solve_logo_m``); at most 11 outer iterations run.
        ``result_.attrs["delta_trace"]`` then holds the normalised change.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        The weights w (0 for eliminated and constant features).
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank``, ``selected`` over ``feature``; ``delta_trace`` (‖Δw‖ per
        outer iteration) and ``n_rejoined`` among its attributes.

    Notes
    -----
    Memory: the N × N distances D are tree-summed over the feature blocks (about
    ``TREE_SUM_COPIES`` = 8 copies) while the certification's bound S (N × N) is kept:
    8·9·N² bytes, 2.6 GiB at N = 6 000.  Work: each outer iteration computes D and
    ``z̄_n(j) = Σ_i Π_ni |x_nj − x_ij|`` over the active features, ``6·N²·J`` flop, at most
    ``max_iter`` times (see :func:`fsdask.methods.quadratic.logo_cost`).  Both are estimated
    from X's shape before X is read: the fit starts with a line stating them, and above the
    memory budget it is refused, naming ``max_samples`` and the budget as remedies.

    Examples
    --------
    Fermat's spiral: two classes wound around each other in features 0 and 1, among 50
    irrelevant ones.

    >>> import numpy as np
    >>> import fsdask
    >>> from fsdask.datasets import fermat_spiral
    >>> ds = fermat_spiral(n_irrelevant=50, n_per_class=50).dataset
    >>> logo = fsdask.Logo().fit(ds["X"].values, ds["y"].values)
    >>> sorted(np.argsort(logo.ranking_)[:2].tolist())
    [0, 1]
    """

    method_name = "logo"
    requires_y = True
    y_task = "classification"
    min_samples = 3
    _parameter_constraints: dict = {
        "sigma": [Real(0, None, closed="neither")],
        "lam": [Real(0, None)],
        "theta": [Real(0, None, closed="neither")],
        "max_iter": [Int(1)],
        "solver": [StrOptions(set(SOLVERS))],
        "n_features_to_select": [Int(1), Real(0, 1, closed="neither"), None],
        "elim_tol": [Real(0, None)],
        "eliminate": ["boolean"],
        "certify": ["boolean"],
        "standardize": ["boolean"],
        "kkt_tol": [Real(0, None)],
        "inner_tol": [Real(0, None, closed="neither")],
        "inner_max_iter": [Int(1)],
        "support_threshold": [Real(0, 1)],
        "memory_budget": [Real(0, None), str, None],
        "on_constant": [StrOptions({"drop", "error"})],
        "max_samples": [Int(3), None],
        "random_state": [Int(0), None],
        "conventions": [StrOptions(set(CONVENTIONS))],
    }

    def __init__(
        self,
        sigma: float = 2.0,
        lam: float = 1.0,
        theta: float = 0.01,
        max_iter: int = 30,
        solver: str = "lbfgs",
        n_features_to_select: Any = None,
        elim_tol: float = 1e-8,
        eliminate: bool = True,
        certify: bool = True,
        kkt_tol: float = 1e-6,
        inner_tol: float = 1e-10,
        inner_max_iter: int = 2000,
        support_threshold: float = 0.01,
        memory_budget: Any = None,
        on_constant: str = "drop",
        standardize: bool = True,
        max_samples: int | None = None,
        random_state: int | None = 0,
        conventions: str = "paper",
    ):
        self.sigma = sigma
        self.lam = lam
        self.theta = theta
        self.max_iter = max_iter
        self.solver = solver
        self.n_features_to_select = n_features_to_select
        self.elim_tol = elim_tol
        self.eliminate = eliminate
        self.certify = certify
        self.kkt_tol = kkt_tol
        self.inner_tol = inner_tol
        self.inner_max_iter = inner_max_iter
        self.support_threshold = support_threshold
        self.memory_budget = memory_budget
        self.on_constant = on_constant
        self.standardize = standardize
        self.max_samples = max_samples
        self.random_state = random_state
        self.conventions = conventions

    def _default_support(self, scores: np.ndarray) -> np.ndarray:
        """The paper's rule (§4.2): weights normalised to max 1, keep those > 0.01."""
        top = scores.max()
        if top <= 0:
            return np.zeros(scores.size, bool)
        return scores > self.support_threshold * top

    # ---- the algorithm
    #: a stratified subsample keeps a nearest hit for every sample (eq. 5)
    min_per_class = 2
    #: the attribute that caps Algorithm 1's outer loop (the progress lines' time left)
    progress_bound = "max_outer_iter"

    @property
    def max_outer_iter(self) -> int:
        """The cap on outer iterations: ``max_iter``, at most 11 under ``conventions="authors"``."""
        if self.conventions == "authors":
            return min(self.max_iter, AUTHORS["max_outer_iter"])
        return self.max_iter

    def _sample_cost(self, n: int, p: int) -> SampleCost:
        """Algorithm 1's N × N matrices and work (class Notes): D on its tree-sum and the
        certification's bound S; Π, its weighted copy C and the bounds' update come after D
        is summed, so they do not add to that peak."""
        return logo_cost(n, p, copies=TREE_SUM_COPIES + 1, max_iter=self.max_outer_iter)

    def _strata(self, y: np.ndarray | None) -> np.ndarray | None:
        return y

    def _fit(self, X: Any, y: np.ndarray, ctx: FitContext) -> FitOutput:
        state = logo_weights(
            X,
            y,
            ctx=ctx,
            sigma=self.sigma,
            lam=self.lam,
            theta=self.theta,
            max_iter=self.max_iter,
            solver=self.solver,
            elim_tol=self.elim_tol,
            eliminate=self.eliminate,
            certify=self.certify,
            kkt_tol=self.kkt_tol,
            inner_tol=self.inner_tol,
            inner_max_iter=self.inner_max_iter,
            standardize=self.standardize,
            conventions=self.conventions,
        )
        return self._output(state, ctx.passes)

    def _output(self, s: LogoState, passes: int) -> FitOutput:
        """The fit's output from Algorithm 1's final state."""
        per_iteration = {
            "delta": np.asarray(s.delta_trace),
            "active_size": np.asarray(s.active_sizes, dtype=np.int64),
            "inner_passes": np.asarray(s.inner_passes, dtype=np.int64),
        }
        return FitOutput(
            scores=s.w,
            n_iter=s.n_iter,
            converged=s.converged,
            objective=s.objective,
            extras=per_iteration,
            extra_dims={k: ("iteration",) for k in per_iteration},
            attrs={
                "delta_trace": [float(d) for d in s.delta_trace],
                "n_rejoined": len(s.rejoined),
                "rejoined_features": s.rejoined[:1000],
                "solver": "logo.m" if self.conventions == "authors" else self.solver,
                "conventions": self.conventions,
                "certified": bool(self.certify and s.converged),
                "n_certifications": s.n_certifications,
                "uncertified_features": [int(j) for j in s.final_violators[:1000]],
                "passes_over_X": passes,
            },
        )
