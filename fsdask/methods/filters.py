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

from typing import Any, Literal

import numpy as np
import scipy.stats

from fsdask.base import FitOutput, SelectorMixin, _top_k_mask
from fsdask.errors import InputError, ParameterError
from fsdask.linalg import map_features, sample_pairwise
from fsdask.methods import FILTER_SCORES

BINARY_ONLY = {"ttest", "snr", "fold_change", "ks"}
CLASS_SCORES = {"fisher", "f"} | BINARY_ONLY


def _class_moments(xb: np.ndarray, codes: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class counts (C,), means (C, p_b) and unbiased variances (C, p_b)."""
    x = xb.astype(np.float64)
    counts = np.bincount(codes, minlength=n_classes).astype(np.float64)
    onehot = np.eye(n_classes)[codes]  # n × C
    mean = (onehot.T @ x) / counts[:, None]
    sq = (onehot.T @ (x * x)) / counts[:, None]
    var = np.clip(sq - mean**2, 0, None) * (counts / np.maximum(counts - 1, 1))[:, None]
    return counts, mean, var


def _ks_stat(xb: np.ndarray, is_first: np.ndarray) -> np.ndarray:
    """Two-sample KS D for each column, vectorised; ties handled at group ends."""
    order = np.argsort(xb, axis=0, kind="stable")
    xs = np.take_along_axis(xb, order, axis=0)
    lab = is_first[order]
    n1, n2 = is_first.sum(), (~is_first).sum()
    diff = np.cumsum(lab, axis=0) / n1 - np.cumsum(~lab, axis=0) / n2
    end_of_tie = np.ones_like(xs, dtype=bool)
    end_of_tie[:-1] = xs[1:] != xs[:-1]
    return np.max(np.abs(np.where(end_of_tie, diff, 0.0)), axis=0)


def score_block(xb: np.ndarray, score: str, codes: np.ndarray | None, n_classes: int,
                yc: np.ndarray | None, equal_var: bool, log_scale: bool) -> np.ndarray:
    """Scores of one feature block (pure numpy; used by the streaming map)."""
    x = xb.astype(np.float64)
    n = x.shape[0]
    if score == "variance":
        return x.var(axis=0, ddof=1)
    if score == "pearson":
        xc = x - x.mean(0)
        denom = np.sqrt((xc * xc).sum(0)) * np.sqrt((yc * yc).sum())
        return np.abs(yc @ xc) / np.where(denom > 0, denom, np.inf)
    counts, mean, var = _class_moments(x, codes, n_classes)
    if score in ("fisher", "f"):
        mu = x.mean(0)
        between = (counts[:, None] * (mean - mu) ** 2).sum(0)
        within_pop = (counts[:, None] * var * ((counts - 1) / counts)[:, None]).sum(0)
        if score == "fisher":
            return between / np.where(within_pop > 0, within_pop, np.inf)
        dfb, dfw = n_classes - 1, n - n_classes
        return (between / dfb) / np.where(within_pop > 0, within_pop / dfw, np.inf)
    (n1, n2), (m1, m2), (v1, v2) = counts, mean, var
    if score == "ttest":
        if equal_var:
            sp = ((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2)
            se = np.sqrt(sp * (1 / n1 + 1 / n2))
        else:
            se = np.sqrt(v1 / n1 + v2 / n2)
        return np.abs(m1 - m2) / np.where(se > 0, se, np.inf)
    if score == "snr":
        s = np.sqrt(v1) + np.sqrt(v2)
        return np.abs(m1 - m2) / np.where(s > 0, s, np.inf)
    if score == "fold_change":
        if log_scale:
            return np.abs(m1 - m2)
        return np.abs(np.log2(m1 / m2))
    if score == "ks":
        return _ks_stat(x, codes == 0)
    raise ParameterError(f"unknown score {score!r}")


class Filter(SelectorMixin):
    """Univariate filter: score each feature alone in one streaming pass.

    Parameters
    ----------
    score : {"variance", "pearson", "fisher", "f", "ttest", "snr", "fold_change", "ks"}
        The statistic (see the module docstring).  Higher scores rank first.
    n_features_to_select : int, float in (0, 1) or None
        How many to select; None keeps the top half.
    equal_var : bool, default False
        t-test only: Student's pooled-variance t instead of Welch's.
    log_scale : {"auto", True, False}
        fold_change only: data already on a log scale (then the fold change is |μ₁ − μ₂|).
        ``auto`` says yes when X has any value ≤ 0 (raw intensities are positive).
    on_constant : {"drop", "error"}
        Constant features get weight 0 and are never selected (``drop``), or raise.

    Attributes
    ----------
    scores_, ranking_, support_, pvalues_ (ttest, f, pearson), result_
    """

    def __init__(self, score: str = "ttest", n_features_to_select: int | float | None = None,
                 equal_var: bool = False, log_scale: bool | Literal["auto"] = "auto",
                 on_constant: Literal["drop", "error"] = "drop"):
        self.score = score
        self.n_features_to_select = n_features_to_select
        self.equal_var = equal_var
        self.log_scale = log_scale
        self.on_constant = on_constant

    @property
    def method_name(self) -> str:  # type: ignore[override]
        return str(self.score)

    @property
    def requires_y(self) -> bool:  # type: ignore[override]
        return self.score != "variance"

    @property
    def y_task(self) -> str:  # type: ignore[override]
        return "classification" if self.score in CLASS_SCORES else ("regression" if self.score == "pearson" else "any")

    def _validate_params(self) -> None:
        if self.score not in FILTER_SCORES:
            raise ParameterError(f"score={self.score!r}; choose one of {', '.join(FILTER_SCORES)}")
        if self.on_constant not in ("drop", "error"):
            raise ParameterError(f"on_constant={self.on_constant!r}; use 'drop' or 'error'")
        if self.log_scale not in ("auto", True, False):
            raise ParameterError(f"log_scale={self.log_scale!r}; use 'auto', True or False")

    def _fit(self, X, y) -> FitOutput:
        n = X.shape[0]
        codes, n_classes, yc = None, 0, None
        if self.score in CLASS_SCORES:
            classes, codes = np.unique(y, return_inverse=True)
            n_classes = classes.size
            counts = np.bincount(codes)
            if self.score in BINARY_ONLY and n_classes != 2:
                raise InputError(f"score={self.score!r} compares two classes but y has {n_classes} "
                                 f"({list(classes[:6])}); use score='f' or 'fisher' for several classes")
            if counts.min() < 2 and self.score in ("ttest", "snr"):
                raise InputError(f"class {classes[counts.argmin()]!r} has a single sample; the {self.score} "
                                 "needs a variance in each class (at least 2 samples)")
            if self.score == "f" and n - n_classes < 1:
                raise InputError("the F statistic needs more samples than classes")
        elif self.score == "pearson":
            yv = np.asarray(y, dtype=np.float64)
            if yv.ndim != 1:
                raise InputError("pearson needs a single response vector y")
            yc = yv - yv.mean()
        log_scale = self.log_scale
        if self.score == "fold_change" and log_scale == "auto":
            log_scale = bool(X.min().compute() <= 0)
        scores = map_features(score_block, X, dtype=np.float64, score=self.score, codes=codes,
                              n_classes=n_classes, yc=yc, equal_var=self.equal_var,
                              log_scale=log_scale).compute()
        extras: dict[str, Any] = {}
        if self.score == "ttest":
            counts = np.bincount(codes)
            df = n - 2 if self.equal_var else None
            if df is None:  # Welch–Satterthwaite df needs the variances: second cheap map
                dfs = map_features(_welch_df_block, X, dtype=np.float64, codes=codes).compute()
                extras["pvalue"] = 2 * scipy.stats.t.sf(scores, dfs)
            else:
                extras["pvalue"] = 2 * scipy.stats.t.sf(scores, df)
        elif self.score == "f":
            extras["pvalue"] = scipy.stats.f.sf(scores, n_classes - 1, n - n_classes)
        elif self.score == "pearson":
            r = np.clip(scores, 0, 1 - 1e-15)
            t = r * np.sqrt((n - 2) / (1 - r**2))
            extras["pvalue"] = 2 * scipy.stats.t.sf(t, n - 2)
        if "pvalue" in extras:
            self.pvalues_ = None  # set in fit() below via result
        return FitOutput(scores=scores, extras=extras, attrs={"score": self.score, "log_scale": str(log_scale)})

    def fit(self, X: Any, y: Any = None) -> "Filter":
        super().fit(X, y)
        self.pvalues_ = self.result_["pvalue"].values if "pvalue" in self.result_ else None
        return self


def _welch_df_block(xb: np.ndarray, codes: np.ndarray) -> np.ndarray:
    counts, _, var = _class_moments(xb, codes, 2)
    a, b = var[0] / counts[0], var[1] / counts[1]
    num = (a + b) ** 2
    den = a**2 / (counts[0] - 1) + b**2 / (counts[1] - 1)
    return np.where(den > 0, num / np.where(den > 0, den, 1), counts.sum() - 2)


class LaplacianScore(SelectorMixin):
    """Laplacian score (He, Cai & Niyogi 2005), unsupervised: a baseline of the Q-α and CPFS papers.

    Builds the kNN heat-kernel graph S between samples from the N × N squared distances
    (one pass over the feature blocks), then scores each feature in a second pass:
    ``L_r = f̃ᵀ L f̃ / f̃ᵀ D f̃`` with ``f̃ = f − (fᵀD1 / 1ᵀD1) 1``.  Smaller L_r is better, so
    ``scores_ = −L_r`` (higher = more relevant).

    Parameters
    ----------
    n_neighbors : int, default 5
    t : float or None
        Heat-kernel width; None uses the mean squared distance.
    n_features_to_select : int, float or None
    """

    method_name = "laplacian_score"

    def __init__(self, n_neighbors: int = 5, t: float | None = None,
                 n_features_to_select: int | float | None = None, on_constant: str = "drop"):
        self.n_neighbors = n_neighbors
        self.t = t
        self.n_features_to_select = n_features_to_select
        self.on_constant = on_constant

    def _validate_params(self) -> None:
        if not isinstance(self.n_neighbors, (int, np.integer)) or self.n_neighbors < 1:
            raise ParameterError(f"n_neighbors={self.n_neighbors!r}; must be an integer ≥ 1")
        if self.t is not None and not self.t > 0:
            raise ParameterError(f"t={self.t!r}; the heat-kernel width must be > 0")

    def _fit(self, X, y) -> FitOutput:
        n = X.shape[0]
        if self.n_neighbors >= n:
            raise ParameterError(f"n_neighbors={self.n_neighbors} must be < the number of samples ({n})")
        D2 = np.clip(sample_pairwise(X, "sqeuclidean").compute(), 0, None)
        t = self.t or float(D2[np.triu_indices(n, 1)].mean())
        S = np.exp(-D2 / t)
        nn = np.argsort(D2, axis=1)[:, 1:self.n_neighbors + 1]
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

        Lr = map_features(lap_block, X, dtype=np.float64).compute()
        return FitOutput(scores=-Lr, extras={"laplacian_score": Lr}, attrs={"t": t})

    def _default_support(self, scores: np.ndarray) -> np.ndarray:
        return _top_k_mask(scores, max(1, scores.size // 2))
