"""Selection at a stated false discovery rate: Benjamini–Hochberg and Benjamini–Yekutieli.

The filters with a test (t, F, Pearson) give p-values from their own pass; any other
supervised selector gets empirical p-values from a permutation null: the labels are
permuted B times, the selector is refitted (a filter: every permutation in the same pass
over X, counted against the observed scores where each block's scores are made,
:func:`fsdask.stability.onepass.variant_exceedances`; others: one task per permutation,
:mod:`fsdask.stability.refit`), and a feature's p-value is
(1 + #{b : w_j^(b) ≥ w_j}) / (B + 1).  The client holds O(p) either way.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from sklearn.base import clone

from fsdask._validation import HasMethods, Int, Real, StrOptions
from fsdask.base import FitOutput, Selector
from fsdask.errors import ParameterError
from fsdask.fitting import FitContext
from fsdask.methods.filters import PVALUE_SCORES, Filter, bh_adjust
from fsdask.stability import onepass
from fsdask.stability.estimator import base_estimator, streams_variants
from fsdask.stability.refit import refit_tally

#: permutations of a filter without a test when ``n_permutations`` is None (one pass)
FILTER_PERMUTATIONS = 1000


def adjust(pvalues: np.ndarray, method: str = "bh") -> np.ndarray:
    """Adjusted p-values: a feature is selected at FDR q when its adjusted p-value ≤ q.

    Parameters
    ----------
    pvalues : ndarray (p,); NaN (constant features) stays NaN and is not counted
    method : {"bh", "by"}
        Benjamini–Hochberg (independent or positively dependent tests) or
        Benjamini–Yekutieli (any dependence: BH times Σ_{i ≤ m} 1/i).

    Returns
    -------
    ndarray (p,).  Memory: a few arrays of p.
    """
    adj = bh_adjust(pvalues)
    if method == "by":
        m = int(np.isfinite(np.asarray(pvalues, dtype=np.float64)).sum())
        adj = np.minimum(adj * _dependence_factor(m, method), 1.0)
    return adj


def _dependence_factor(n_tests: int, method: str) -> float:
    """What BY multiplies BH's adjusted p-values by, Σ_{i ≤ m} 1/i (BH: 1)."""
    return float(np.sum(1.0 / np.arange(1, n_tests + 1))) if method == "by" else 1.0


def permutation_pvalues(observed: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Empirical p-values (1 + #{b : null_b ≥ observed}) / (B + 1), per feature.

    Parameters
    ----------
    observed : ndarray (p,)
    null : ndarray (B, p), the scores under B permutations of the labels

    Returns
    -------
    ndarray (p,)
    """
    return empirical_pvalues((null >= observed[None, :]).sum(0), null.shape[0])


def empirical_pvalues(exceeded: np.ndarray, B: int) -> np.ndarray:
    """(1 + exceeded) / (B + 1): the p-values of features whose score ``exceeded`` of B
    null scores reach (counts, e.g. :func:`fsdask.stability.onepass.exceeded`)."""
    return (1.0 + exceeded) / (B + 1.0)


def fewest_selectable(n_tests: int, n_permutations: int, q: float, method: str = "bh") -> int:
    """The fewest features BH (or BY) can select at FDR ``q`` from permutation p-values.

    No permutation p-value is below 1/(B + 1), so the k-th smallest reaches BH's threshold
    q·k/m only when k ≥ m / (q·(B + 1)) (BY: times Σ_{i ≤ m} 1/i).  Above 1, a selection
    of fewer features than this is impossible however strong their signal: with m = 10⁶
    features and B = 1000 at q = 0.05, BH selects 20 000 features or none.

    Parameters
    ----------
    n_tests : int, m (features with a p-value)
    n_permutations : int, B
    q : float
    method : {"bh", "by"}

    Returns
    -------
    int, at least 1
    """
    c = _dependence_factor(n_tests, method)
    return max(1, int(np.ceil(c * n_tests / (q * (n_permutations + 1)) - 1e-9)))


def _at_least_one(n_tests: int, q: float, method: str) -> int:
    """The fewest permutations with which :func:`fewest_selectable` is 1."""
    return int(np.ceil(_dependence_factor(n_tests, method) * n_tests / q)) - 1


def _as_is(values: np.ndarray) -> np.ndarray:
    return values


class FDR(Selector):
    """Select the features whose adjusted p-value is at most q (false discovery rate q).

    Parameters
    ----------
    estimator : Selector, default ``Filter("f")``
        A supervised selector.  Filters with a test (``ttest``, ``f``, ``pearson``) use
        their p-values; any other gives permutation p-values.
    q : float in (0, 1), default 0.05
        The false discovery rate.
    method : {"bh", "by"}, default "bh"
        Benjamini–Hochberg (the p-values independent or positively dependent) or
        Benjamini–Yekutieli (any dependence between features; fewer selections).
    n_permutations : int or None
        B, permutations of the labels for the permutation null.  None: the filter's own
        test when it has one, else 1000 for a filter (one pass); other selectors need it
        (each permutation is a refit).  The smallest possible p-value is 1/(B + 1): BH
        can select only when B is large against the number of features / q.
    random_state : int or None, default 0
        Seed of the permutations (and of refits with a ``random_state``).

    Attributes
    ----------
    pvalues_, pvalues_adjusted_ : ndarray (p,)
        Also ``result_["pvalue"]``, ``result_["pvalue_adj"]`` (NaN for constant features).
    support_ : the features with adjusted p-value ≤ q (all of them; ``n_features_to_select``
        does not apply).

    Notes
    -----
    Assumptions, also in ``result_.attrs["null"]``: a filter's test assumes its own model
    (normal classes for t and F, bivariate normal for Pearson); the permutation null
    assumes the samples are exchangeable under the null (no batches, pairs or time order).
    For a multivariate weight (Q-α, Logo, SparseHSIC, CPFS) it is the null of no relation
    between X and y at all: a feature's p-value is exact for "y independent of X" and only
    approximate for "this feature is irrelevant while others are relevant".  Unsupervised
    selectors have no labels to permute and are refused.

    Examples
    --------
    >>> import numpy as np, fsdask
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(60, 200)), np.repeat([0, 1], 30)
    >>> X[y == 1, :5] += 2.0
    >>> fdr = fsdask.FDR(fsdask.Filter("ttest"), q=0.05).fit(X, y)
    >>> bool(fdr.support_[:5].all()), int(fdr.support_.sum())  # the 5 planted and 2 others
    (True, 7)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "get_support"]), None],
        "q": [Real(0, 1, closed="neither")],
        "method": [StrOptions({"bh", "by"})],
        "n_permutations": [Int(1), None],
        "random_state": [Int(0), None],
    }

    def __init__(
        self,
        estimator: Any = None,
        q: float = 0.05,
        method: str = "bh",
        n_permutations: int | None = None,
        random_state: int | None = 0,
    ):
        self.estimator = estimator
        self.q = q
        self.method = method
        self.n_permutations = n_permutations
        self.random_state = random_state

    @property
    def method_name(self) -> str:  # type: ignore[override]
        return f"fdr({base_estimator(self.estimator).method_name})"

    @property
    def requires_y(self) -> bool:  # type: ignore[override]
        return True

    @property
    def y_task(self) -> str:  # type: ignore[override]
        return base_estimator(self.estimator).y_task

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags = base_estimator(self.estimator).__sklearn_tags__().classifier_tags
        return tags

    def _parametric(self) -> bool:
        est = base_estimator(self.estimator)
        return (
            isinstance(est, Filter)
            and est.statistic in PVALUE_SCORES
            and self.n_permutations is None
        )

    def _permuted_sums(self) -> bool:
        """A filter's permutations as membership products of one pass (not ``ks``)."""
        return not self._parametric() and streams_variants(base_estimator(self.estimator))

    @property
    def streams_samples(self) -> bool:  # type: ignore[override]
        # a filter's own test or its permutations' sums: sample blocks stream
        est = base_estimator(self.estimator)
        return (self._parametric() and bool(est.streams_samples)) or self._permuted_sums()

    @property
    def screen_in_fit(self) -> bool:  # type: ignore[override]
        # the filter's fit, or the membership sums, screen X in their own pass
        return self._parametric() or self._permuted_sums()

    def _validate_params(self) -> None:
        super()._validate_params()
        est = base_estimator(self.estimator)
        if not getattr(est, "requires_y", False):
            raise ParameterError(
                f"FDR({type(est).__name__}): an unsupervised selector has no labels to "
                "permute, so there is no null distribution for its weights; use a "
                "supervised method, or Stability for a stated error bound"
            )
        if getattr(est, "groups", None) is not None:
            raise ParameterError(
                "FDR(Filter(groups=...)): the one-vs-rest fit already gives each group's "
                "BH-adjusted p-values (result_['group_pvalue_adj']); use those"
            )
        if not isinstance(est, Filter) and self.n_permutations is None:
            raise ParameterError(
                f"FDR({type(est).__name__}) needs n_permutations (each is a refit on "
                "permuted labels; e.g. n_permutations=200)"
            )

    def _n_drawn(self) -> int:
        """B, the permutations drawn (a filter's default when ``n_permutations`` is None)."""
        return self.n_permutations or FILTER_PERMUTATIONS

    def _permutations(self, n: int) -> list[np.ndarray]:
        rng = np.random.default_rng(self.random_state)
        return [rng.permutation(n) for _ in range(self._n_drawn())]

    def _fit_lazy(self, X, y):
        est = base_estimator(self.estimator)
        if not isinstance(est, Filter) or self._parametric() or self._permuted_sums():
            return None  # refits, the filter's test, or the membership sums of _fit
        perms = self._permutations(X.shape[0])
        variants, n_classes = onepass.filter_variants(est, y, [None], perms)
        lazy = onepass.lazy_variant_scores(X, est, variants, n_classes, exceedances=True)

        def finish(computed, active, lo, hi):
            return self._from_exceedances(computed, active, lo)

        return lazy, finish, True

    def _from_test(self, X, y, ctx: FitContext) -> FitOutput:
        """The filter's own fit (its one pass, screen included) and its p-values."""
        inner = clone(base_estimator(self.estimator)).fit(X, y)
        ctx.execution.passes += inner.n_passes_
        active = inner.active_features_
        out = self._output(inner.scores_[active], inner.pvalues_[active], "test")
        out.active = active
        return out

    def _from_permuted_sums(self, X, y, ctx: FitContext) -> FitOutput:
        """Every permutation's scores from the membership sums of one pass, screen included,
        counted against the observed scores where they are made."""
        est = base_estimator(self.estimator)
        perms = self._permutations(X.shape[0])
        variants, n_classes = onepass.filter_variants(est, y, [None], perms)
        computed, (bad, lo, hi) = onepass.variant_exceedances(
            ctx.execution, X, est, variants, n_classes
        )
        active = self._apply_screen(bad, lo, hi)
        out = self._from_exceedances(computed, active, lo)
        out.active = active
        return out

    def _from_exceedances(self, rows: np.ndarray, active: np.ndarray, lo: np.ndarray):
        """The output from a filter's observed scores and exceedance counts
        (:func:`~fsdask.stability.onepass.exceedance_rows`): p = (1 + count) / (B + 1), the
        p-values of :func:`permutation_pvalues`."""
        data_min = float(lo[active].min()) if active.any() else 0.0
        scores, exceeded = onepass.finish_exceedances(
            rows, base_estimator(self.estimator), data_min
        )
        pvalues = empirical_pvalues(exceeded[active], self._n_drawn())
        return self._output(scores[active], pvalues, "perm")

    def _fit(self, X, y, ctx: FitContext) -> FitOutput:
        if self._parametric():
            return self._from_test(X, y, ctx)
        if self._permuted_sums():
            return self._from_permuted_sums(X, y, ctx)
        est = base_estimator(self.estimator)
        perms = self._permutations(X.shape[0])
        resamples = [(None, y)] + [(None, y[perm]) for perm in perms]
        seeds = np.full(len(resamples), 0 if self.random_state is None else self.random_state)
        t = refit_tally(ctx, est, X, y, resamples, seeds)
        return self._output(t.scores, empirical_pvalues(t.exceeded, t.n_refits), "perm")

    def _too_few_permutations(self, pvalues: np.ndarray, support: np.ndarray) -> list[str]:
        """The warning of an empty selection that the permutations' resolution imposed."""
        if support.any():
            return []
        m, B = int(np.isfinite(pvalues).sum()), self._n_drawn()
        fewest = fewest_selectable(m, B, self.q, self.method)
        if fewest <= 1:
            return []
        B1 = _at_least_one(m, self.q, self.method)
        return [
            f"{self.method_name}: nothing selected, and nothing could be: with {B} "
            f"permutations no p-value is below 1/{B + 1}, so {self.method.upper()} at "
            f"q={self.q} over {m} features "
            + (f"selects at least {fewest} or none; " if fewest <= m else "selects none; ")
            + "use a filter with its own test (ttest, f, pearson), or "
            f"n_permutations={B1} (CLI: --permutations {B1}) to let it select one"
        ]

    def _output(self, scores: np.ndarray, pvalues: np.ndarray, null: str) -> FitOutput:
        adj = adjust(pvalues, self.method)
        support = np.nan_to_num(adj, nan=2.0) <= self.q
        nulls = {
            "test": "the filter's test (its distributional model, features tested one by one)",
            "perm": "labels permuted (samples exchangeable under the null; for multivariate "
            "weights, the null of no relation between X and y)",
        }
        return FitOutput(
            scores=np.asarray(scores, np.float64),
            rank_key=(-np.nan_to_num(pvalues, nan=2.0), np.asarray(scores, np.float64)),
            support=support,
            support_is_final=True,
            deferred={
                "pvalue": functools.partial(_as_is, np.asarray(pvalues, np.float64)),
                "pvalue_adj": functools.partial(_as_is, adj),
            },
            attrs={
                "fdr_q": float(self.q),
                "fdr_method": self.method,
                "null": nulls[null],
                "n_permutations": self._n_drawn() if null == "perm" else 0,
            },
            warnings=self._too_few_permutations(pvalues, support) if null == "perm" else [],
        )

    @property
    def pvalues_(self) -> np.ndarray:
        """The p-values (``result_["pvalue"]``; NaN for constant features)."""
        return np.asarray(self.result_["pvalue"].values)

    @property
    def pvalues_adjusted_(self) -> np.ndarray:
        """The BH or BY adjusted p-values (``result_["pvalue_adj"]``)."""
        return np.asarray(self.result_["pvalue_adj"].values)
