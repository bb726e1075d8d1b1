"""Univariate baseline filters, each a single streaming pass over X.

Every statistic but ``ks`` needs only class-wise counts, sums and sums of squares (and, for
``pearson``, the product with the response): mergeable sums over samples.  X is read in the
blocks it is stored in — sample blocks (an AnnData CSR matrix, a store chunked by cells,
never densified) or feature blocks — and the partial sums of every block are merged
(:func:`fsdask.linalg.moments.streamed_moments` over
:meth:`~fsdask.linalg.execution.Execution.sum_blocks`); the screen (NaN/Inf, constant
features) comes from the same pass.  ``ks`` sorts each feature's values: it reads feature
blocks (a blockwise map ``X_b -> D_b``, :func:`fsdask.linalg.map_features`).

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
from dask.utils import format_bytes
from sklearn.utils import ClassifierTags

from fsdask._validation import Int, Real, StrOptions, class_counts
from fsdask.base import FitOutput, Selector, top_k_mask
from fsdask.errors import InputError, ParameterError
from fsdask.fitting import FitContext
from fsdask.linalg import map_features, sample_pairwise
from fsdask.linalg.execution import TREE_SUM_COPIES, memory_budget
from fsdask.linalg.moments import Moments, class_moments, streamed_moments
from fsdask.linalg.threads import cores, parallel_map
from fsdask.linalg.twosample import ks_columns
from fsdask.methods import FILTER_SCORES
from fsdask.methods.quadratic import SampleCost, SampleLimit, laplacian_cost

BINARY_ONLY = {"ttest", "snr", "fold_change", "ks"}
CLASS_SCORES = {"fisher", "f"} | BINARY_ONLY


#: rows of per-feature statistics each score's block function returns: the score, then (ttest)
#: its degrees of freedom or (fold_change) the second class mean
STAT_ROWS = {"ttest": 2, "fold_change": 2}

#: scores with a p-value (computed from the statistics only when asked: see ``Filter``)
PVALUE_SCORES = ("ttest", "f", "pearson")

#: scores with a direction of the effect (``result_["direction"]``)
DIRECTED_SCORES = ("ttest", "snr", "fold_change", "pearson")


def stats_from_moments(
    m: Moments,
    score: str,
    n_classes: int,
    equal_var: bool,
    yy: Any = None,
    score_only: bool = False,
) -> np.ndarray:
    """Per-feature statistics from class moments, for one data set or a batch of them.

    Every filter statistic but ``ks`` is a function of the class-wise counts, means and
    variances (and, for ``pearson``, the product with the centred response): this is that
    function, shared by :class:`Filter` (one set of moments) and the resampling of
    :mod:`fsdask.stability` (a leading batch axis: one set per resample or permutation).

    Parameters
    ----------
    m : Moments
        counts (…, C), mean and var (…, C, w), dot (…, w) = Σ yc·x (pearson); the leading
        axes (none, or one per resample) broadcast through every formula.
    score : str, one of :data:`fsdask.methods.FILTER_SCORES` but ``ks``
    n_classes : int, C
    equal_var : bool, Student's pooled t instead of Welch's (ttest)
    yy : float, ndarray (…,) or None
        Σ yc², the centred response's sum of squares (pearson).
    score_only : bool
        Only the rows the score needs: ttest's t without its degrees of freedom (which
        only the p-value needs).

    Returns
    -------
    ndarray (…, rows, w), float64, as :func:`stats_block`: the signed score, or t and its
    degrees of freedom (ttest), or the two class means (fold_change).  The number of
    samples is ``counts.sum(-1)``.  Memory: a few (…, C, w) float64 arrays.
    """
    counts, mean, var = np.asarray(m.counts, np.float64), m.mean, m.var
    n = counts.sum(axis=-1)[..., None]  # (…, 1): broadcasts against (…, w)
    if score == "variance":
        return var[..., :1, :]
    if score == "pearson":  # yc is centred, so yc·x = yc·(x − x̄)
        ss = np.asarray(yy, np.float64)[..., None]
        denom = np.sqrt(var[..., 0, :] * (n - 1)) * np.sqrt(ss)
        return (m.dot / np.where(denom > 0, denom, np.inf))[..., None, :]
    if score in ("fisher", "f"):
        mu = np.einsum("...c,...cw->...w", counts, mean) / n
        between = (counts[..., None] * (mean - mu[..., None, :]) ** 2).sum(-2)
        within_pop = ((counts - 1)[..., None] * var).sum(-2)
        if score == "fisher":
            return (between / np.where(within_pop > 0, within_pop, np.inf))[..., None, :]
        dfb, dfw = n_classes - 1, n - n_classes
        f = (between / dfb) / np.where(within_pop > 0, within_pop / dfw, np.inf)
        return f[..., None, :]
    n1, n2 = counts[..., 0, None], counts[..., 1, None]
    m1, m2, v1, v2 = mean[..., 0, :], mean[..., 1, :], var[..., 0, :], var[..., 1, :]
    if score == "ttest":
        if equal_var:
            sp = ((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2)
            se2 = sp * (1 / n1 + 1 / n2)
        else:
            a, b = v1 / n1, v2 / n2
            se2 = a + b
        se = np.sqrt(se2)
        t = (m2 - m1) / np.where(se > 0, se, np.inf)
        if score_only:
            return t[..., None, :]
        if equal_var:
            df = np.broadcast_to(n1 + n2 - 2, m1.shape)
        else:
            den = a**2 / (n1 - 1) + b**2 / (n2 - 1)
            df = np.where(
                den > 0, se2**2 / np.where(den > 0, den, 1), n1 + n2 - 2
            )  # Welch–Satterthwaite
        return np.stack([t, df], axis=-2)
    if score == "snr":
        sd = np.sqrt(v1) + np.sqrt(v2)
        return ((m2 - m1) / np.where(sd > 0, sd, np.inf))[..., None, :]
    if score == "fold_change":
        return np.stack([m1, m2], axis=-2)
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
        yy = None if yc is None else (yc * yc).sum()
        st = stats_from_moments(m, score, n_classes, equal_var, yy)
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


#: statistics with a one-vs-rest form for every group of a multi-class label (``groups=``)
GROUP_SCORES = ("ttest", "f", "fold_change")
#: scanpy's pseudo-count of the means in a fold change (``rank_genes_groups``)
FOLD_EPS = 1e-9
#: features per group selected with ``groups=`` when ``n_features_to_select`` is None
#: (scanpy's ``n_genes`` default)
GROUP_TOP = 100


def rest_moments(m: Moments, g: int) -> Moments:
    """Two-class moments (rest, group g) from the class-wise moments: one against the rest.

    The rest's mean and sum of squares merge the other classes exactly (Chan, Golub &
    LeVeque's pairwise update), so no second pass over X is needed.

    Parameters
    ----------
    m : Moments of every class (counts (C,), mean and var (C, p))
    g : int, the group's class code

    Returns
    -------
    Moments with counts (n_rest, n_g), mean and var (2, p): row 0 the rest, row 1 the group.
    """
    others = np.arange(m.counts.size) != g
    w = m.counts[others][:, None]
    n_rest = float(w.sum())
    mean_r = (w * m.mean[others]).sum(0) / n_rest
    m2 = ((w - 1) * m.var[others]).sum(0) + (w * (m.mean[others] - mean_r) ** 2).sum(0)
    var_r = m2 / max(n_rest - 1, 1)
    counts = np.array([n_rest, m.counts[g]])
    return Moments(counts, np.stack([mean_r, m.mean[g]]), np.stack([var_r, m.var[g]]), m.dot, None)


def one_vs_rest(
    m: Moments,
    tested: np.ndarray,
    score: str,
    equal_var: bool,
    log_scale: bool,
    active: np.ndarray,
) -> dict[str, np.ndarray]:
    """Scores and p-values of every tested group against the rest, from one pass's moments.

    Parameters
    ----------
    m : Moments of every class (see :func:`fsdask.linalg.moments.streamed_moments`)
    tested : int ndarray (G,), the class codes of the groups tested
    score : {"ttest", "f", "fold_change"}
    equal_var : bool, Student's pooled t instead of Welch's (ttest)
    log_scale : bool, fold_change: the data are on a log scale
    active : bool ndarray (p,), the non-constant features (the others: score 0, p-value NaN)

    Returns
    -------
    dict of (G, p) float64 arrays: ``score`` — ttest: the signed t of group minus rest
    (Welch's t as scanpy's ``rank_genes_groups(method="t-test")``: positive where the feature
    is higher in the group); f: the one-vs-rest F (= t² of Student's t); fold_change:
    log₂((μ_g + 10⁻⁹)/(μ_rest + 10⁻⁹)), or μ_g − μ_rest on a log scale —, ``pvalue`` and
    ``pvalue_adj`` (ttest, f; Benjamini–Hochberg within each group, over the non-constant
    features), ``group_mean`` and
    ``rest_mean``.  A t or F whose standard error is 0 is 0 (scanpy: NaN scores become 0).
    Memory: a few (G, p) arrays.
    """
    n = int(m.counts.sum())
    out: dict[str, list] = {"score": [], "group_mean": [], "rest_mean": []}
    if score != "fold_change":
        out.update(pvalue=[], pvalue_adj=[])
    for g in tested:
        mg = rest_moments(m, int(g))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            st = stats_from_moments(mg, score, 2, equal_var)
            if score == "fold_change":
                mr, mu = mg.mean
                sc = mu - mr if log_scale else np.log2((mu + FOLD_EPS) / (mr + FOLD_EPS))
            else:
                sc = st[0]
        out["score"].append(np.where(active, sc, 0.0))
        out["group_mean"].append(mg.mean[1])
        out["rest_mean"].append(mg.mean[0])
        if score != "fold_change":
            pv = np.where(active, pvalues_from_stats(score, st, n, 2), np.nan)
            out["pvalue"].append(pv)
            out["pvalue_adj"].append(bh_adjust(pv))
    return {k: np.asarray(v, dtype=np.float64).reshape(len(tested), -1) for k, v in out.items()}


def group_ranks(scores: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Per group, the rank of every feature by its score, 1 = highest; ties in feature order,
    constant features last.

    Parameters
    ----------
    scores : ndarray (G, p)
    active : bool ndarray (p,)

    Returns
    -------
    int64 ndarray (G, p)
    """
    ranks = np.empty(scores.shape, np.int64)
    for g, row in enumerate(scores):
        order = np.argsort(np.where(active, -row, np.inf), kind="stable")
        ranks[g, order] = np.arange(1, row.size + 1)
    return ranks


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
    groups : None, "all" or a list of labels
        ttest, f and fold_change only: test every group of a multi-class y (``"all"``) or the
        listed ones, each against all the other samples (one-vs-rest), in the same pass.
        The selection is then the union of each group's top ``n_features_to_select``
        (per group; None: 100, scanpy's ``n_genes``), ranked by the signed group score
        (markers higher in the group first, as scanpy ranks them); ``scores_`` is each
        feature's best group score.  See :meth:`group_table` and the user guide's
        "Several groups" page.

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        The statistic of each feature (higher = more relevant; 0 for constant features).
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank``, ``selected`` over ``feature`` (and ``pvalue``, ``pvalue_adj``,
        ``direction`` where the statistic has them), the fit's provenance in its attributes.
    groups_ : ndarray or None
        The groups tested (``groups=``), in the order of ``result_``'s ``group`` dimension,
        whose variables ``group_score``, ``group_pvalue``, ``group_pvalue_adj``,
        ``group_rank``, ``group_selected``, ``group_mean`` and ``rest_mean`` are
        (group, feature).
    pvalues_ : (p,) array or None
        None with ``groups=`` (the p-values are per group: :meth:`group_table`).
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
        "groups": [None, StrOptions({"all"}), "array-like"],
    }

    def __init__(
        self,
        statistic: str = "ttest",
        n_features_to_select: int | float | None = None,
        equal_var: bool = False,
        log_scale: bool | Literal["auto"] = "auto",
        on_constant: Literal["drop", "error"] = "drop",
        groups: Any = None,
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
        self.groups = groups

    @property
    def method_name(self) -> str:  # type: ignore[override]
        return str(self.statistic)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if (
            self.statistic in BINARY_ONLY and self.groups is None
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
            classes, codes, counts = class_counts(y)
            n_classes = classes.size
            if stat in BINARY_ONLY and n_classes != 2 and self.groups is None:
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

    def _validate_params(self) -> None:
        super()._validate_params()
        if self.groups is not None and self.statistic not in GROUP_SCORES:
            raise ParameterError(
                f"groups= tests each group against the rest with statistic ttest, f or "
                f"fold_change, not {self.statistic!r}"
            )

    @property
    def streams_samples(self) -> bool:  # type: ignore[override]
        # every statistic but ks merges sums over sample blocks; ks sorts each feature
        return self.statistic != "ks"

    @property
    def screen_in_fit(self) -> bool:  # type: ignore[override]
        return self.streams_samples

    def _check_shape(self, n: int, p: int) -> None:
        """ks sorts each feature's n values (the values, their keys, the sorted keys and the
        merge: about 32 bytes a sample); refuse when one feature cannot be sorted in memory."""
        need, budget = 32.0 * n, memory_budget(getattr(self, "memory_budget", None))
        if self.statistic == "ks" and budget and need > budget:
            raise InputError(
                f"statistic='ks' sorts each feature's {n} values, about {format_bytes(need)} "
                f"a feature, above the memory budget of {format_bytes(budget)}; raise it "
                "(DASK_FSDASK__MEMORY_BUDGET=SIZE) or use statistic='ttest' (it streams samples)"
            )

    def _fit(self, X, y, ctx: FitContext) -> FitOutput:
        """One pass over X in its own blocks: the class-wise sums and the screen together."""
        self.groups_ = None
        if self.groups is not None:
            return self._fit_groups(X, y, ctx)
        n = X.shape[0]
        codes, n_classes, yc = self._prepare(n, y)
        m = streamed_moments(ctx.execution, X, codes, max(n_classes, 1), yc)
        bad, lo, hi = m.screen
        active = self._apply_screen(bad, lo, hi)
        if not active.all():
            m = Moments(m.counts, m.mean[:, active], m.var[:, active], m.dot[active], None)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            yy = None if yc is None else (yc * yc).sum()
            stats = stats_from_moments(m, self.statistic, n_classes, self.equal_var, yy)
        data_min = float(lo[active].min()) if self.statistic == "fold_change" else 0.0
        out = self._finish(stats, n, n_classes, data_min)
        out.active = active
        return out

    def _tested_groups(
        self, classes: np.ndarray, counts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The label of each class of y (its name when y comes coded from a dataset) and the
        codes of the groups to test (``groups=``); ``counts``: the samples in each class."""
        names = self.__dict__.get("_class_names")
        labels = np.asarray([str(names[int(c)]) if names is not None else str(c) for c in classes])
        n = int(counts.sum())
        if isinstance(self.groups, str):
            tested = np.arange(classes.size)
        else:
            # matched as text (a label given on the command line is a string), by name or code
            index = {
                **{str(c): i for i, c in enumerate(classes)},
                **{v: i for i, v in enumerate(labels)},
            }
            wanted = [str(v) for v in np.asarray(self.groups, dtype=object).ravel()]
            missing = [v for v in wanted if v not in index]
            if missing or not wanted:
                raise InputError(
                    f"groups={wanted!r}: {', '.join(map(repr, missing)) or 'none given'} "
                    f"not among the labels of y ({', '.join(repr(str(v)) for v in labels[:6])}"
                    f"{', …' if labels.size > 6 else ''})"
                )
            tested = np.array([index[v] for v in dict.fromkeys(wanted)], dtype=np.int64)
        small = [g for g in tested if min(counts[g], n - counts[g]) < 2]
        if small and self.statistic == "ttest":
            raise InputError(
                f"group {str(labels[small[0]])!r} has {counts[small[0]]} of {n} "
                "samples; a t-test needs at least 2 in the group and 2 in the rest"
            )
        return labels, tested

    def _fit_groups(self, X, y, ctx: FitContext) -> FitOutput:
        """One pass for the moments of every class, then each tested group against the rest."""
        classes, codes, counts = class_counts(y)
        classes, tested = self._tested_groups(classes, counts)
        m = streamed_moments(ctx.execution, X, codes, classes.size, None)
        bad, lo, hi = m.screen
        active = self._apply_screen(bad, lo, hi)
        log_scale = self.log_scale
        if log_scale == "auto":
            log_scale = bool(lo[active].min() <= 0)
        res = one_vs_rest(m, tested, self.statistic, self.equal_var, log_scale, active)
        ranks = group_ranks(res["score"], active)
        k = self._per_group_k(int(active.sum()))
        picked = (ranks <= k) & active
        extras = {
            ("group_" + name if name in ("score", "pvalue", "pvalue_adj") else name): v
            for name, v in res.items()
        }
        extras.update(group_rank=ranks, group_selected=picked)
        labels = classes[tested]
        self.groups_ = labels
        return FitOutput(
            scores=res["score"].max(axis=0)[active],
            support=picked.any(axis=0)[active],
            support_is_final=True,
            active=active,
            extras=extras,
            extra_dims={name: ("group", "feature") for name in extras},
            coords={"group": labels},
            attrs={"score": self.statistic, "log_scale": str(log_scale), "groups": "one-vs-rest"},
        )

    def _per_group_k(self, p_active: int) -> int:
        """Features selected per group: ``n_features_to_select`` (a count, or a fraction of
        the features), else :data:`GROUP_TOP`; at most the non-constant features."""
        k = self.n_features_to_select
        if k is None:
            k = GROUP_TOP
        elif isinstance(k, float):
            k = max(1, int(round(k * self.n_features_in_)))
        return min(int(k), p_active)

    def group_table(self, group: Any = None, n: int | None = None) -> Any:
        """The one-vs-rest results as a table, like scanpy's ``sc.get.rank_genes_groups_df``.

        Parameters
        ----------
        group : label or None, one tested group (None: all)
        n : int or None, the top ``n`` features of each group (None: all)

        Returns
        -------
        pandas.DataFrame with columns ``group``, ``feature``, ``score``, ``pvalue``,
        ``pvalue_adj`` (ttest, f), ``rank``, ``selected``, ``group_mean``, ``rest_mean``;
        rows by group, then rank (1 = highest score).

        Examples
        --------
        >>> f = Filter("ttest", groups="all").fit(X, y)  # doctest: +SKIP
        >>> f.group_table("B cells", n=10)  # doctest: +SKIP
        """
        import pandas as pd

        if getattr(self, "groups_", None) is None:
            raise ParameterError("group_table() needs a Filter fitted with groups=")
        res = self.result_
        cols = {"score": "group_score", "pvalue": "group_pvalue", "pvalue_adj": "group_pvalue_adj"}
        cols.update(rank="group_rank", selected="group_selected", group_mean="group_mean")
        cols["rest_mean"] = "rest_mean"
        frames = []
        for label in self.groups_ if group is None else [str(group)]:
            if label not in self.groups_:
                raise ParameterError(
                    f"group {group!r} was not tested; tested: {list(self.groups_)}"
                )
            one = res.sel(group=label)
            df = pd.DataFrame({c: one[v].values for c, v in cols.items() if v in res})
            df.insert(0, "feature", res["feature"].values)
            df.insert(0, "group", label)
            df = df.sort_values("rank", kind="stable")
            frames.append(df if n is None else df.head(n))
        return pd.concat(frames, ignore_index=True)

    def _fit_lazy(self, X, y):
        """ks: one pass over the feature blocks, the screen from the same sort."""
        if self.streams_samples:
            return None
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


class LaplacianScore(SampleLimit, Selector):
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
    max_samples : int or None, default None
        Fit on at most this many samples, drawn uniformly (the score uses no labels) with
        ``random_state``; recorded in ``result_.attrs`` (``max_samples``,
        ``n_samples_used``, ``subsample_seed``, ``subsample_rows_sha256``).  None uses
        every sample.
    random_state : int or None, default 0
        Seed of the ``max_samples`` subsample (None: one is drawn and recorded).

    Attributes
    ----------
    scores_ : ndarray of shape (n_features,)
        −L_r (higher = more relevant).
    ranking_ : ndarray of shape (n_features,)
        1 = best.
    result_ : xarray.Dataset
        ``weight``, ``rank`` and ``selected`` over ``feature``, the fit's provenance in its
        attributes.

    Notes
    -----
    Memory: the squared distances are tree-summed (about ``TREE_SUM_COPIES`` = 8 n × n
    float64 copies), then D², the heat kernel, the kNN order, the mask and the Laplacian L
    are n × n arrays on the client: 8·8·n² bytes, 2.5 GiB at n = 6 000, checked against
    the dask config key ``fsdask.memory-budget`` (0 leaves the check off).  Work: the Gram of
    the samples and ``L f`` for every feature, ``4·n²·p`` flop (see
    :func:`fsdask.methods.quadratic.laplacian_cost`).  Both are estimated from X's shape
    before X is read: the fit starts with a line stating them, and above the memory budget
    it is refused, naming ``max_samples`` and the budget as remedies.

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
        "max_samples": [Int(2), None],
        "random_state": [Int(0), None],
    }

    def __init__(
        self,
        n_neighbors: int = 5,
        t: float | None = None,
        n_features_to_select: int | float | None = None,
        on_constant: str = "drop",
        max_samples: int | None = None,
        random_state: int | None = 0,
    ):
        self.n_neighbors = n_neighbors
        self.t = t
        self.n_features_to_select = n_features_to_select
        self.on_constant = on_constant
        self.max_samples = max_samples
        self.random_state = random_state

    def _sample_cost(self, n: int, p: int) -> SampleCost:
        """The n × n graph on its tree-sum and its work (class Notes)."""
        return laplacian_cost(n, p, copies=TREE_SUM_COPIES)

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
