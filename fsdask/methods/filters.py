"""Univariate baseline filters, each a single streaming pass over the feature blocks.

Every block holds all samples, so each statistic is a blockwise map ``X_b -> score_b``
(:func:`fsdask.linalg.map_features`) with no communication between blocks.

=============  ==========================================================  =================
score          statistic (higher = more relevant)                          response
=============  ==========================================================  =================
variance       sample variance (ddof=1)                                    none
pearson        |Pearson r| between feature and y                           continuous/binary
fisher         Σ_c n_c(μ_c − μ)² / Σ_c n_c σ_c²  (Fisher score)            classes
f              ANOVA F = [BSS/(C−1)] / [WSS/(n−C)]  (BSS/WSS, Dudoit)      classes
ttest          |t|, Welch's (``equal_var=False``) or Student's             2 classes
snr            |μ₁ − μ₂| / (σ₁ + σ₂)  (Golub's signal-to-noise)            2 classes
fold_change    |log₂(μ₁/μ₂)|, or |μ₁ − μ₂| for log-scale data              2 classes
ks             Kolmogorov–Smirnov two-sample D                             2 classes
=============  ==========================================================  =================
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Literal

import numpy as np
import scipy.special
from sklearn.utils import ClassifierTags

from fsdask._validation import Int, Real, StrOptions
from fsdask.base import FitOutput, Selector, top_k_mask
from fsdask.errors import InputError, ParameterError
from fsdask.fitting import FitContext
from fsdask.linalg import map_features, sample_pairwise
from fsdask.linalg.execution import TREE_SUM_COPIES
from fsdask.linalg.moments import Moments, class_moments
from fsdask.linalg.threads import cores, parallel_map
from fsdask.linalg.twosample import ks_columns
from fsdask.methods import FILTER_SCORES

BINARY_ONLY = {"ttest", "snr", "fold_change", "ks"}
CLASS_SCORES = {"fisher", "f"} | BINARY_ONLY


#: rows of per-feature statistics each score's block function returns: the score, then (ttest)
#: its degrees of freedom or (fold_change) the second class mean
STAT_ROWS = {"ttest": 2, "fold_change": 2}

#: scores with a p-value (computed from the statistics only when asked: see ``Filter``)
PVALUE_SCORES = ("ttest", "f", "pearson")

#: scores with a direction of the effect (``result_["direction"]``)
DIRECTED_SCORES = ("ttest", "snr", "fold_change", "pearson")


def _stats_from_moments(
    m: Moments, score: str, n: int, n_classes: int, yc: np.ndarray | None, equal_var: bool
) -> np.ndarray:
    """Per-feature statistics (rows, width) from the class moments; see :func:`stats_block`."""
    counts, mean, var = m.counts, m.mean, m.var
    if score == "variance":
        return var[:1]
    if score == "pearson":  # yc is centred, so yc·x = yc·(x − x̄)
        denom = np.sqrt(var[0] * (n - 1)) * np.sqrt((yc * yc).sum())
        return (m.dot / np.where(denom > 0, denom, np.inf))[None, :]
    if score in ("fisher", "f"):
        mu = (counts @ mean) / n
        between = (counts[:, None] * (mean - mu) ** 2).sum(0)
        within_pop = ((counts - 1)[:, None] * var).sum(0)
        if score == "fisher":
            return (between / np.where(within_pop > 0, within_pop, np.inf))[None, :]
        dfb, dfw = n_classes - 1, n - n_classes
        return ((between / dfb) / np.where(within_pop > 0, within_pop / dfw, np.inf))[None, :]
    (n1, n2), (m1, m2), (v1, v2) = counts, mean, var
    if score == "ttest":
        if equal_var:
            sp = ((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2)
            se2 = sp * (1 / n1 + 1 / n2)
            df = np.full_like(m1, n1 + n2 - 2)
        else:
            a, b = v1 / n1, v2 / n2
            se2 = a + b
            den = a**2 / (n1 - 1) + b**2 / (n2 - 1)
            df = np.where(
                den > 0, se2**2 / np.where(den > 0, den, 1), n1 + n2 - 2
            )  # Welch–Satterthwaite
        se = np.sqrt(se2)
        t = (m2 - m1) / np.where(se > 0, se, np.inf)
        return np.stack([t, df])
    if score == "snr":
        sd = np.sqrt(v1) + np.sqrt(v2)
        return ((m2 - m1) / np.where(sd > 0, sd, np.inf))[None, :]
    if score == "fold_change":
        return np.stack([m1, m2])
    raise ParameterError(f"unknown score {score!r}")


def stats_block(
    xb: np.ndarray,
    score: str,
    codes: np.ndarray | None,
    n_classes: int,
    yc: np.ndarray | None,
    equal_var: bool,
    with_screen: bool = False,
) -> np.ndarray:
    """Per-feature statistics of one feature block.

    Parameters
    ----------
    xb : ndarray (n, p_b), one feature block with all samples
    score : str, one of :data:`fsdask.methods.FILTER_SCORES`
    codes : int ndarray (n,) of class codes 0 … C−1, or None (variance, pearson)
    n_classes : int, C
    yc : ndarray (n,), the centred response (pearson), or None
    equal_var : bool, Student's pooled t instead of Welch's (ttest)
    with_screen : bool, append the three screen rows (NaN/Inf count, min, max), from the
        same sweep

    Returns
    -------
    ndarray (rows, p_b), float64: one row (the score) for most filters; ``ttest``: t and
    its degrees of freedom (for the p-value, see :func:`pvalues_from_stats`);
    ``fold_change``: the two class means (the score needs the data's global minimum to
    decide the scale, known only after the pass).  The t, SNR and Pearson rows are signed
    (positive: larger in the second class, or growing with y); the score is their absolute
    value (:func:`scores_from_stats`).  Memory: a few float64 copies of the
    block.
    """
    n, p_b = xb.shape
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if (
            score == "ks"
        ):  # sorted-key kernel (it tiles the block); the screen comes from the same sort
            return ks_columns(xb, codes == 0, with_screen)
        m = class_moments(xb, codes, n_classes if codes is not None else 1, yc)
        st = _stats_from_moments(m, score, n, n_classes, yc, equal_var)
    return np.concatenate([st, m.screen]) if with_screen else st


def pvalues_from_stats(score: str, stats: np.ndarray, n: int, n_classes: int) -> np.ndarray:
    """Two-sided p-values from the per-feature statistics of :func:`stats_block`.

    ttest: 2·P(T_df > |t|) (Welch–Satterthwaite or pooled df); pearson: the t-test of r with
    n − 2 df (|r| clipped below 1); f: P(F_{C−1, n−C} > F).  The incomplete beta function
    costs more than the statistics' pass, so they are computed only when asked for.

    Parameters
    ----------
    score : {"ttest", "pearson", "f"}
    stats : ndarray (rows, p), the statistics of :func:`stats_block`
    n : int, samples
    n_classes : int, C (f)

    Returns
    -------
    ndarray (p,).  Memory: a few arrays of p.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if score == "ttest":
            return 2 * scipy.special.stdtr(stats[1], -np.abs(stats[0]))
        if score == "pearson":
            rc = np.clip(np.abs(stats[0]), 0, 1 - 1e-15)
            return 2 * scipy.special.stdtr(n - 2, -rc * np.sqrt((n - 2) / (1 - rc**2)))
        if score == "f":
            return scipy.special.fdtrc(n_classes - 1, n - n_classes, stats[0])
    raise ParameterError(f"score={score!r} has no p-value; use one of {', '.join(PVALUE_SCORES)}")


def _threaded_pvalues(score: str, stats: np.ndarray, n: int, n_classes: int) -> np.ndarray:
    """:func:`pvalues_from_stats` in one slice per core on fsdask's thread pool (scipy's
    ufuncs release the GIL)."""
    p = stats.shape[1]
    parts = min(cores(), max(1, p // 65536))
    if parts == 1:
        return pvalues_from_stats(score, stats, n, n_classes)
    bounds = np.linspace(0, p, parts + 1).astype(int)
    pieces = parallel_map(
        lambda j: pvalues_from_stats(score, stats[:, bounds[j] : bounds[j + 1]], n, n_classes),
        range(parts),
    )
    return np.concatenate(pieces)


def _shown(label: Any) -> str:
    """A class label as the user wrote it (``1``, ``'AML'``), not NumPy's ``np.int64(1)``."""
    return repr(label.item() if isinstance(label, np.generic) else label)


def fold_change_scores(m1: np.ndarray, m2: np.ndarray, log_scale: bool) -> np.ndarray:
    """The fold change of each feature.

    Parameters
    ----------
    m1, m2 : ndarray (p,), the two class means
    log_scale : bool, the data are already on a log scale

    Returns
    -------
    ndarray (p,): |μ₁ − μ₂| for log-scale data, else |log₂(μ₁/μ₂)|.  Memory: the result.
    """
    if log_scale:
        return np.abs(m1 - m2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(np.log2(m1 / m2))


def score_block(
    xb: np.ndarray,
    score: str,
    codes: np.ndarray | None,
    n_classes: int,
    yc: np.ndarray | None,
    equal_var: bool,
    log_scale: bool,
) -> np.ndarray:
    """Scores of one feature block (pure NumPy).

    Parameters
    ----------
    xb, score, codes, n_classes, yc, equal_var : as for :func:`stats_block`
    log_scale : bool, as for :func:`fold_change_scores`

    Returns
    -------
    ndarray (p_b,), higher = more relevant.  Memory: as :func:`stats_block`.
    """
    return scores_from_stats(
        score, stats_block(xb, score, codes, n_classes, yc, equal_var), log_scale
    )


def scores_from_stats(score: str, stats: np.ndarray, log_scale: bool) -> np.ndarray:
    """The scores (higher = more relevant) from the statistics of :func:`stats_block`.

    Parameters
    ----------
    score : str, one of :data:`fsdask.methods.FILTER_SCORES`
    stats : ndarray (rows, p), the statistics of :func:`stats_block`
    log_scale : bool, as for :func:`fold_change_scores`

    Returns
    -------
    ndarray (p,)
    """
    if score == "fold_change":
        return fold_change_scores(stats[0], stats[1], log_scale)
    if score in DIRECTED_SCORES:
        return np.abs(stats[0])
    return stats[0]


def directions_from_stats(score: str, stats: np.ndarray) -> np.ndarray:
    """The direction of the effect, +1, −1 or 0 per feature (see :class:`Filter`).

    Parameters
    ----------
    score : one of :data:`DIRECTED_SCORES`
    stats : ndarray (rows, p), the statistics of :func:`stats_block`

    Returns
    -------
    ndarray (p,), float64
    """
    diff = stats[1] - stats[0] if score == "fold_change" else stats[0]
    return np.sign(np.nan_to_num(diff)).astype(np.float64)


def bh_adjust(pvalues: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (the false discovery rate at which each feature
    would be called), over the finite p-values; NaN stays NaN.

    Parameters
    ----------
    pvalues : ndarray (p,)

    Returns
    -------
    ndarray (p,).  Memory: a few arrays of p.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = np.argsort(p[ok], kind="stable")
    scaled = p[ok][order] * m / np.arange(1, m + 1)
    adj = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    out[ok[order]] = adj
    return out


class DeferredPValues:
    """The p-values of a fit, computed once when first asked for, and their BH adjustment.

    Parameters
    ----------
    score, stats, n, n_classes : as for :func:`pvalues_from_stats`
    """

    def __init__(self, score: str, stats: np.ndarray, n: int, n_classes: int):
        self.args = (score, stats, n, n_classes)
        self.values: np.ndarray | None = None

    def __call__(self) -> np.ndarray:
        """The p-values."""
        if self.values is None:
            self.values = _threaded_pvalues(*self.args)
        return self.values

    def adjusted(self) -> np.ndarray:
        """The Benjamini–Hochberg adjusted p-values."""
        return bh_adjust(self())


class Filter(Selector):
    """Univariate filter: score each feature alone in one streaming pass.

    Parameters
    ----------
    statistic : {"variance", "pearson", "fisher", "f", "ttest", "snr", "fold_change", "ks"}
        The statistic (see the module docstring).  Higher scores rank first.  ``score=`` is
        a deprecated alias (``FutureWarning``).
    n_features_to_select : int, float in (0, 1) or None
        How many to select; None keeps the top half.
    equal_var : bool, default False
        t-test only: Student's pooled-variance t instead of Welch's.
    log_scale : {"auto", True, False}
        fold_change only: data already on a log scale (then the fold change is
        ``|μ₁ − μ₂|``).
        ``auto`` says yes when X has any value ≤ 0 (raw intensities are positive).
    on_constant : {"drop", "error"}
        Constant features get weight 0 and are never selected (``drop``), or raise.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        The statistic of each feature (higher = more relevant; 0 for constant features).
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank``, ``selected`` over ``feature`` (and ``pvalue``, ``pvalue_adj``,
        ``direction`` where the statistic has them), the fit's provenance in its attributes.
    pvalues_ : (p,) array or None
        ttest, f, pearson: two-sided p-values (NaN for constant features, as in scipy), also
        ``result_["pvalue"]``.  They are computed from the fitted statistics the first time
        ``pvalues_`` or ``result_`` is read (they cost about as much as the fit's own pass),
        not during ``fit``; the values are the same either way.  ``result_["pvalue_adj"]``
        holds their Benjamini–Hochberg adjustment (over the non-constant features).

    Notes
    -----
    ttest, snr, fold_change and pearson also give ``result_["direction"]``: +1 where the
    feature is larger in the second class (classes in sorted order, as ``np.unique`` gives
    them) or grows with y (pearson), −1 the other way, 0 for no difference, NaN for constant
    features.

    Examples
    --------
    >>> import numpy as np
    >>> import fsdask
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(30, 100)), np.repeat([0, 1], 15)
    >>> X[y == 1, :3] += 2.0  # features 0-2 differ between the classes
    >>> sel = fsdask.Filter(statistic="ttest", n_features_to_select=3).fit(X, y)
    >>> sel.get_support(indices=True)
    array([0, 1, 2])
    >>> bool((sel.pvalues_[:3] < 1e-3).all())
    True
    """

    _parameter_constraints: dict = {
        "statistic": [StrOptions(set(FILTER_SCORES))],
        "n_features_to_select": [Int(1), Real(0, 1, closed="neither"), None],
        "equal_var": ["boolean"],
        "log_scale": ["boolean", StrOptions({"auto"})],
        "on_constant": [StrOptions({"drop", "error"})],
    }

    def __init__(
        self,
        statistic: str = "ttest",
        n_features_to_select: int | float | None = None,
        equal_var: bool = False,
        log_scale: bool | Literal["auto"] = "auto",
        on_constant: Literal["drop", "error"] = "drop",
        **deprecated: Any,
    ):
        if "score" in deprecated:  # the former name shadowed scikit-learn's score()
            warnings.warn(
                "Filter(score=...) is renamed Filter(statistic=...); score= will be removed "
                "in the next release",
                FutureWarning,
                stacklevel=2,
            )
            statistic = deprecated.pop("score")
        if deprecated:
            raise TypeError(
                f"Filter got unexpected keyword argument(s) {', '.join(map(repr, deprecated))}"
            )
        self.statistic = statistic
        self.n_features_to_select = n_features_to_select
        self.equal_var = equal_var
        self.log_scale = log_scale
        self.on_constant = on_constant

    @property
    def method_name(self) -> str:  # type: ignore[override]
        return str(self.statistic)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if (
            self.statistic in BINARY_ONLY
        ):  # two-class statistics: scikit-learn's checks give two classes
            tags.classifier_tags = ClassifierTags(multi_class=False)
        return tags

    @property
    def requires_y(self) -> bool:  # type: ignore[override]
        return self.statistic != "variance"

    @property
    def y_task(self) -> str:  # type: ignore[override]
        s = self.statistic
        return (
            "classification" if s in CLASS_SCORES else ("regression" if s == "pearson" else "any")
        )

    def _prepare(
        self, n: int, y: np.ndarray | None
    ) -> tuple[np.ndarray | None, int, np.ndarray | None]:
        """Validate y for the statistic; return class codes, number of classes, centred response."""
        codes, n_classes, yc = None, 0, None
        stat = self.statistic
        if stat in CLASS_SCORES:
            classes, codes = np.unique(y, return_inverse=True)
            n_classes = classes.size
            counts = np.bincount(codes)
            if stat in BINARY_ONLY and n_classes != 2:
                raise InputError(
                    f"statistic={stat!r} compares two classes but y has {n_classes} "
                    f"({', '.join(map(_shown, classes[:6]))}"
                    f"{', …' if n_classes > 6 else ''}); use statistic='f' or 'fisher' for several classes"
                )
            if counts.min() < 2 and stat in ("ttest", "snr"):
                raise InputError(
                    f"class {_shown(classes[counts.argmin()])} has a single sample; the {stat} "
                    "needs a variance in each class (at least 2 samples)"
                )
            if stat == "f" and n - n_classes < 1:
                raise InputError("the F statistic needs more samples than classes")
        elif stat == "pearson":
            yv = np.asarray(y, dtype=np.float64)
            if yv.ndim != 1:
                raise InputError("pearson needs a single response vector y")
            yc = yv - yv.mean()
        return codes, n_classes, yc

    def _lazy_stats(self, X, codes, n_classes, yc, with_screen: bool = False):
        return map_features(
            stats_block,
            X,
            out_rows=STAT_ROWS.get(self.statistic, 1) + (3 if with_screen else 0),
            dtype=np.float64,
            score=self.statistic,
            codes=codes,
            n_classes=n_classes,
            yc=yc,
            equal_var=self.equal_var,
            with_screen=with_screen,
        )

    def _finish(self, stats: np.ndarray, n: int, n_classes: int, data_min: float) -> FitOutput:
        """Scores (and, deferred, p-values) from the per-feature statistics of the active features."""
        log_scale = self.log_scale
        stat = self.statistic
        if stat == "fold_change" and log_scale == "auto":
            log_scale = bool(data_min <= 0)
        scores = scores_from_stats(stat, stats, log_scale)
        deferred = {}
        if stat in PVALUE_SCORES:  # evaluated when result_ / pvalues_ is first read
            pv = DeferredPValues(stat, stats, n, n_classes)
            deferred["pvalue"] = pv
            deferred["pvalue_adj"] = pv.adjusted
        if stat in DIRECTED_SCORES:
            deferred["direction"] = functools.partial(directions_from_stats, stat, stats)
        return FitOutput(
            scores=scores, attrs={"score": stat, "log_scale": str(log_scale)}, deferred=deferred
        )

    def _fit_lazy(self, X, y):
        """One pass: the screen and the statistics of every feature share a single read of X."""
        n = X.shape[0]
        codes, n_classes, yc = self._prepare(n, y)
        lazy = self._lazy_stats(X, codes, n_classes, yc, with_screen=True)

        def finish(stats, active, lo, hi):
            every = bool(active.all())  # the usual case: no copy of the statistics
            data_min = 0.0
            if self.statistic == "fold_change" and active.any():
                data_min = float((lo if every else lo[active]).min())
            return self._finish(stats if every else stats[:, active], n, n_classes, data_min)

        return lazy, finish, True

    @property
    def pvalues_(self) -> np.ndarray | None:
        """Two-sided p-values (ttest, f, pearson) or None; see the class docstring."""
        res = self.result_
        return res["pvalue"].values if "pvalue" in res else None


# the deprecated ``score=`` alias is not a parameter: scikit-learn's introspection sees statistic only
Filter.__init__.__signature__ = inspect.signature(Filter.__init__).replace(
    parameters=[
        p for p in inspect.signature(Filter.__init__).parameters.values() if p.kind != p.VAR_KEYWORD
    ]
)


class LaplacianScore(Selector):
    """Laplacian score (He, Cai & Niyogi 2005), unsupervised: a baseline of the Q-α and CPFS papers.

    Builds the kNN heat-kernel graph S between samples from the N × N squared distances
    (one pass over the feature blocks), then scores each feature in a second pass:
    ``L_r = f̃ᵀ L f̃ / f̃ᵀ D f̃`` with ``f̃ = f − (fᵀD1 / 1ᵀD1) 1``.  Smaller L_r is better, so
    ``scores_ = −L_r`` (higher = more relevant).

    Parameters
    ----------
    n_neighbors : int, default 5
        k of the kNN graph between samples.
    t : float or None
        Heat-kernel width; None uses the mean squared distance.
    n_features_to_select : int, float or None
        How many to select (a fraction of the features if a float); None keeps the top half.
    on_constant : {"drop", "error"}
        Constant features get weight 0 and are never selected (``drop``), or raise.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        −L_r (higher = more relevant).
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank`` and ``selected`` over ``feature``, the fit's provenance in its
        attributes.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import qalpha_clusters
    >>> X = qalpha_clusters(n_clusters=3).dataset["X"].values  # features 0-4 show clusters
    >>> sel = fsdask.LaplacianScore(n_features_to_select=5).fit(X)
    >>> int(sel.get_support().sum())
    5
    """

    method_name = "laplacian_score"
    _parameter_constraints: dict = {
        "n_neighbors": [Int(1)],
        "t": [Real(0, None, closed="neither"), None],
        "n_features_to_select": [Int(1), Real(0, 1, closed="neither"), None],
        "on_constant": [StrOptions({"drop", "error"})],
    }

    def __init__(
        self,
        n_neighbors: int = 5,
        t: float | None = None,
        n_features_to_select: int | float | None = None,
        on_constant: str = "drop",
    ):
        self.n_neighbors = n_neighbors
        self.t = t
        self.n_features_to_select = n_features_to_select
        self.on_constant = on_constant

    def _check_shape(self, n: int, p: int) -> None:
        """Refuse more samples than the memory budget (dask config ``fsdask.memory-budget``)
        holds the dense n × n graph for: the squared distances are tree-summed (about
        ``TREE_SUM_COPIES`` copies), then D², the heat kernel, the kNN order, the mask and
        the Laplacian L are n × n arrays on the client."""
        self._check_sample_matrices(n, TREE_SUM_COPIES, "squared distances and kNN graph")

    def _fit(self, X, y, ctx: FitContext) -> FitOutput:
        n = X.shape[0]
        if self.n_neighbors >= n:
            raise ParameterError(
                f"n_neighbors={self.n_neighbors} must be < the number of samples ({n})"
            )
        (D2,) = ctx.execution.compute(sample_pairwise(X, "sqeuclidean"))
        D2 = np.clip(D2, 0, None)
        t = self.t or float(D2[np.triu_indices(n, 1)].mean())
        S = np.exp(-D2 / t)
        nn = np.argsort(D2, axis=1)[:, 1 : self.n_neighbors + 1]
        mask = np.zeros((n, n), bool)
        mask[np.repeat(np.arange(n), self.n_neighbors), nn.ravel()] = True
        mask |= mask.T
        S = np.where(mask, S, 0.0)
        d = S.sum(1)
        L = np.diag(d) - S

        def lap_block(xb):
            f = xb.astype(np.float64)
            f = f - (d @ f) / d.sum()
            num = np.einsum("ij,ij->j", f, L @ f)
            den = np.einsum("i,ij,ij->j", d, f, f)
            return num / np.where(den > 0, den, np.inf)

        (Lr,) = ctx.execution.compute(map_features(lap_block, X, dtype=np.float64))
        return FitOutput(scores=-Lr, extras={"laplacian_score": Lr}, attrs={"t": t})

    def _default_support(self, scores: np.ndarray) -> np.ndarray:
        return top_k_mask(scores, max(1, scores.size // 2))
