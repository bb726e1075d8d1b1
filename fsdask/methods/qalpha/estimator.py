"""The Q-α estimator: parameters, their validation, and the result of :func:`qalpha_weights`."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from fsdask._validation import Int, Real, StrOptions
from fsdask.base import FitOutput, Selector, top_k_mask
from fsdask.errors import InputError, ParameterError
from fsdask.fitting import FitContext
from fsdask.linalg.execution import TREE_SUM_COPIES
from fsdask.methods.qalpha.core import auto_cut, qalpha_weights
from fsdask.methods.qalpha.kernel import KERNELS
from fsdask.methods.qalpha.loop import QAlphaRun
from fsdask.methods.quadratic import SampleCost, SampleLimit, qalpha_cost

#: the ``variant`` parameter's values (``supervised``: Def. 6 with the power scheme)
VARIANTS = ("power", "basic", "ritz", "laplacian", "gap", "supervised", "kernel")


class QAlpha(SampleLimit, Selector):
    """Q-α feature weighting (Wolf & Shashua, JMLR 2005), as Dask graphs linear in the features.

    Parameters
    ----------
    k : int, default 2
        Number of clusters / leading eigenvectors of A_α (1 ≤ k < n_samples).
    variant : {"power", "basic", "ritz", "laplacian", "gap", "supervised", "kernel"}
        ``power`` — standard power-embedded Q-α (Def. 2); ``basic`` — alternate exact α and Q
        (§3); ``ritz`` — Ritz acceleration (Def. 4); ``laplacian`` — Laplacian spectrum
        (Def. 5); ``gap`` — maximise Σ_{≤k} λ² − Σ_{>k} λ² (§2.1); ``supervised`` — Def. 6
        (same as ``power`` with ``supervised=True``); ``kernel`` — Def. 14 (``kernel``
        defaults to ``"rbf"``).
    init : {"pca", "random"} or array (q × k)
        Q⁽⁰⁾: top-k eigenvectors of MᵀM (the paper is silent), seeded random, or given.
    gamma : float, default 0.5
        Weight γ of the between-class terms of the supervised criterion (5).
    kernel : None, "linear", "rbf", "poly", "sessions" or callable
        Kernel between feature vectors for Def. 14; a callable gets two (sample × features)
        blocks of preprocessed features and returns their (features × features) kernel.
        ``sessions`` is §6's Σ_s (m_i^sᵀ m_j^s)² over sections of 8 samples, on the centred,
        unit-norm feature map (see :func:`sessions_kernel`); rbf and poly (coef0 = 0) already
        have unit-norm φ, linear and poly (coef0 = 0) centred φ; a callable is used as given.
    kernel_params : dict
        ``sigma`` (rbf, default 1), ``degree``/``coef0`` (poly, 2/0), ``block`` (sessions, 8),
        or keyword arguments for a callable.
    max_iter : int, default 100
        Iterations at most.
    tol : float, default 1e-6
        Converged when ‖α⁽ʳ⁾ − α⁽ʳ⁻¹⁾‖ < tol.  ``converged_`` says whether it happened.
    n_features_to_select : None, int, float in (0, 1) or "auto"
        None and "auto" cut at the sharpest decay of the sorted weights (see :func:`auto_cut`).
    supervised : "auto", True or False
        Use Def. 6 when labels are given to ``fit`` (``"auto"``, with the power or basic
        schemes).
    k_within, k_between : int, default 2 and 1
        k^{gh} of Def. 6 for g = h and g ≠ h (the paper's typical choice).
    n_init : int, default 1
        Restarts: the first from ``init``, the others from seeded random Q⁽⁰⁾; the run with
        the highest final criterion is kept (the paper is silent; criterion (5) in particular
        has local maxima that favour noise from the uniform-α start on Weston's data).  One
        ConvergenceWarning is raised, for the kept start; it suggests restarts, because a
        start that creeps to ``max_iter`` often sits near a poor local maximum.
    alpha_solver : {"auto", "gram", "tsqr", "lanczos"}
        How α is found without G: the r × r Gram of W (``auto``: when it fits
        ``memory_budget`` with its tree-sum, r ≤ 4096 at 1 GiB), TSQR, or
        Lanczos on Wᵀ W (one pass per product, warm-started).
    random_state : int, default 0
        Seeds the random starts (``init="random"``, ``n_init``) and the ``max_samples``
        subsample.
    on_constant : {"drop", "error"}
        Constant features have no direction after centring: weight 0 and never selected
        (``drop``), or an error.
    memory_budget : int, str or None
        Bytes (or a size string, ``"1GiB"``) the fit may hold in memory: the Gram of W is
        summed when it fits with its tree-sum, and X is held when it is small; None reads
        the dask config key ``fsdask.memory-budget``.  More samples q than it holds the
        q × q affinity A_α for (8·TREE_SUM_COPIES·q² bytes; not the kernel form) are refused
        before X is read; 0 leaves that check off.
    max_samples : int or None, default None
        Fit on at most this many samples: a seeded (``random_state``) subsample, stratified
        by class when the labels are used (the supervised criterion; every class keeps
        ``k_within + 1``, or the subsample is refused), recorded in
        ``result_.attrs`` (``max_samples``, ``n_samples_used``, ``subsample_seed``,
        ``subsample_rows_sha256``; see :func:`fsdask.methods.quadratic.subsample`).  None
        uses every sample.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        α (0 for dropped constant features).
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    Q_ : ndarray or dict or None
        q × k (supervised: dict of Q^{gh}; kernel: None — Q lives in feature space).
    E_ : ndarray
        Kernel variant only: n × k with Q = Mᵀ E.
    n_iter_ : int
        Iterations run.
    objective_ : ndarray
        The criterion per iteration.
    converged_ : bool
        Whether ‖Δα‖ fell below ``tol``.
    result_ : xarray.Dataset
        ``weight``, ``rank``, ``selected`` over ``feature``, the fit's provenance in its
        attributes.
    n_passes_ : int
        Reads of X after the input check.  An X of at most ``fsdask.hold-x-below`` bytes
        (dask config, default 32 MiB) is read once into memory and iterated there
        (``n_passes_`` = 1); set it to 0 to keep every pass on dask.

    Notes
    -----
    Memory: every variant but the kernel one sums the q × q affinity A_α (q samples) over
    the feature blocks at each α-step, about ``TREE_SUM_COPIES`` (8) q × q float64 arrays
    while tree-summed: 8·8·q² bytes, 2.5 GiB at q = 6 000, 24 GiB at q = 20 000.  Work:
    ``2·p·q²`` flop per α-step for A_α plus α's part from W (p × qk), at most
    ``n_init · max_iter`` iterations (Ritz: two α-steps each); the kernel form keeps no
    q × q matrix and costs ``4·p²·q`` per iteration (see
    :func:`fsdask.methods.quadratic.qalpha_cost`).  Both are estimated from X's shape
    before X is read: the fit starts with a line stating them, and above the memory budget
    it is refused, naming ``max_samples`` and the budget as remedies.

    Examples
    --------
    The cluster model of §6: 3 clusters visible in features 0-4 only, unsupervised.

    >>> import numpy as np
    >>> import fsdask
    >>> from fsdask.datasets import qalpha_clusters
    >>> X = qalpha_clusters(n_clusters=3).dataset["X"].values
    >>> sel = fsdask.QAlpha(k=3, n_init=3).fit(X)
    >>> top5 = np.argsort(sel.ranking_)[:5]
    >>> len(set(top5.tolist()) & {0, 1, 2, 3, 4}) >= 3
    True
    """

    method_name = "qalpha"
    min_samples = 2
    _parameter_constraints: dict = {
        "k": [Int(1)],
        "variant": [StrOptions(set(VARIANTS))],
        "init": [StrOptions({"pca", "random"}), "array-like"],
        "gamma": [Real(0, None)],
        "kernel": [StrOptions(set(KERNELS)), callable, None],
        "kernel_params": [dict, None],
        "max_iter": [Int(1)],
        "tol": [Real(0, None)],
        "n_features_to_select": [Int(1), Real(0, 1, closed="neither"), StrOptions({"auto"}), None],
        "supervised": ["boolean", StrOptions({"auto"})],
        "k_within": [Int(1)],
        "k_between": [Int(1)],
        "alpha_solver": [StrOptions({"auto", "gram", "tsqr", "lanczos"})],
        "n_init": [Int(1)],
        "random_state": [Int(0), None],
        "on_constant": [StrOptions({"drop", "error"})],
        "memory_budget": [Real(0, None), str, None],
        "max_samples": [Int(2), None],
    }

    def __init__(
        self,
        k: int = 2,
        variant: str = "power",
        init: Any = "pca",
        gamma: float = 0.5,
        kernel: Any = None,
        kernel_params: dict | None = None,
        max_iter: int = 100,
        tol: float = 1e-6,
        n_features_to_select: Any = None,
        supervised: Any = "auto",
        k_within: int = 2,
        k_between: int = 1,
        alpha_solver: str = "auto",
        n_init: int = 1,
        random_state: int | None = 0,
        on_constant: Literal["drop", "error"] = "drop",
        memory_budget: Any = None,
        max_samples: int | None = None,
    ):
        self.k = k
        self.variant = variant
        self.init = init
        self.gamma = gamma
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.max_iter = max_iter
        self.tol = tol
        self.n_features_to_select = n_features_to_select
        self.supervised = supervised
        self.k_within = k_within
        self.k_between = k_between
        self.alpha_solver = alpha_solver
        self.n_init = n_init
        self.random_state = random_state
        self.on_constant = on_constant
        self.memory_budget = memory_budget
        self.max_samples = max_samples

    # ---- parameters
    @property
    def requires_y(self) -> bool:  # type: ignore[override]
        return self.variant == "supervised" or self.supervised is True

    def _default_support(self, scores: np.ndarray) -> np.ndarray:
        return top_k_mask(scores, auto_cut(scores))

    # ---- fit
    def _sample_cost(self, n: int, p: int) -> SampleCost:
        """The n-dependent cost (class Notes): A_α's ``TREE_SUM_COPIES`` copies on its tree-sum
        — more than the eigendecomposition of A_α then holds on the client (A_α, its
        symmetric part and the eigenvectors) — and the Gram of W when ``alpha_solver``
        takes it (as :class:`~fsdask.methods.qalpha.alpha.AlphaStep` decides); none for the
        kernel form (Def. 14)."""
        from fsdask._config import memory_budget

        kernel = self.kernel is not None or self.variant == "kernel"
        r2 = 8.0 * TREE_SUM_COPIES * (n * self.k) ** 2  # the tree-summed Gram of W (AlphaStep)
        gram = "forced" if self.alpha_solver == "gram" else "no"
        if self.alpha_solver in ("auto", "tsqr") and r2 <= memory_budget(self.memory_budget):
            gram = "fits"
        return qalpha_cost(
            n,
            p,
            k=self.k,
            copies=TREE_SUM_COPIES,
            max_iter=self.max_iter,
            n_init=self.n_init,
            variant="kernel" if kernel else self.variant,
            gram=gram,
        )

    @property
    def min_per_class(self) -> int:  # type: ignore[override]
        """Samples a stratified subsample keeps of each class: Def. 6's class blocks need
        ``k_within + 1``."""
        return self.k_within + 1

    def _strata(self, y: np.ndarray | None) -> np.ndarray | None:
        """The labels, when the fit uses them (the supervised criterion, Def. 6)."""
        return y if y is not None and self._uses_labels(y) else None

    def _uses_labels(self, y: np.ndarray | None) -> bool:
        if self.kernel is not None or self.variant == "kernel":
            return False
        return (
            self.variant == "supervised"
            or (
                y is not None
                and self.supervised in ("auto", True)
                and self.variant in ("power", "basic")
            )
            or self.supervised is True
        )

    def _fit(self, X: Any, y: np.ndarray | None, ctx: FitContext) -> FitOutput:
        variant, y_core = self._scheme(X, y)
        run = qalpha_weights(
            X,
            y_core,
            k=self.k,
            variant=variant,
            init=self.init,
            gamma=self.gamma,
            kernel="rbf" if self.kernel is None else self.kernel,
            kernel_params=self.kernel_params,
            max_iter=self.max_iter,
            tol=self.tol,
            k_within=self.k_within,
            k_between=self.k_between,
            alpha_solver=self.alpha_solver,
            n_init=self.n_init,
            random_state=self.random_state,
            ctx=ctx,
        )
        self.Q_ = run.Q
        if variant == "kernel":
            self.E_ = run.E
        if not run.converged:  # once, for the start that is kept
            ctx.warn(
                f"Q-α stopped at max_iter={self.max_iter} with ‖Δα‖ = {run.change:.2g} ≥ "
                f"tol={self.tol} (converged_ is False); try {self._restart_hint()}a larger "
                "max_iter or tol — the ranking often settles long before ‖Δα‖ does (compare "
                "scores_ of two max_iter)"
            )
        return self._output(run, variant, supervised=y_core is not None, ctx=ctx)

    def _scheme(self, X: Any, y: np.ndarray | None) -> tuple[str, np.ndarray | None]:
        """The core's (variant, labels) for these parameters; refuses what cannot be fitted."""
        q = X.shape[0]
        if self.supervised is True and self.variant not in ("power", "basic", "supervised"):
            raise ParameterError(
                f"supervised=True works with variant 'power' or 'basic', not {self.variant!r}"
            )
        if self.kernel is not None or self.variant == "kernel":
            return "kernel", None
        use_sup = self._uses_labels(y)
        if use_sup and y is None:
            raise InputError("the supervised Q-α (Def. 6) needs labels: fit(X, y)")
        if not use_sup and self.k >= q:
            raise InputError(
                f"k={self.k} but X has only {q} samples; Q-α needs k < n_samples "
                f"(centred rows span at most {q - 1} dimensions): lower k or add samples"
            )
        if use_sup:
            return ("basic" if self.variant == "basic" else "power"), np.asarray(y)
        return self.variant, None

    def _output(
        self, run: QAlphaRun, variant: str, *, supervised: bool, ctx: FitContext
    ) -> FitOutput:
        """The :class:`FitOutput` of the kept run: α, its selection and what result_ shows."""
        attrs = dict(run.attrs)
        attrs["n_passes"] = int(ctx.passes)
        out = FitOutput(
            scores=run.alpha,
            n_iter=run.n_iter,
            converged=run.converged,
            objective=list(run.objective),
            attrs=attrs,
        )
        if variant != "kernel":
            attrs["n_init"] = int(self.n_init)
        if variant != "kernel" and not supervised:  # Q (q × k) over the samples
            out.extras = {"Q": run.Q}
            out.extra_dims = {"Q": ("sample", "component")}
        if isinstance(self.n_features_to_select, str) or self.n_features_to_select is None:
            out.support = top_k_mask(out.scores, auto_cut(out.scores))
        return out

    def _restart_hint(self) -> str:
        """The restarts to suggest when a fit does not converge (the kernel form has none).

        On the §6 cluster model with 10 of 2000 features relevant, the starts that crept to
        max_iter had settled near a poor local maximum (objective ~2.1, 2–3 noise features
        selected) that more iterations only confirmed; restarts reached the relevant ones.
        """
        if self.kernel is not None or self.variant == "kernel":
            return ""
        return (
            f"restarts (n_init={max(5, 2 * self.n_init)} keeps the start with the largest "
            "objective_: a slow start often sits near a poor local maximum), or "
        )
