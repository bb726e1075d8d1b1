"""Stability selection of any fsdask selector (Meinshausen & Bühlmann 2010; complementary
pairs, Shah & Samworth 2013).

The selector is refitted on subsamples of the samples; a feature's *selection frequency* is
the fraction of subsamples whose fit selects it, and the *stable set* holds the features
whose frequency reaches the threshold τ.  For a univariate filter every subsample comes
from the same pass over X (:mod:`fsdask.stability.onepass`), for SparseHSIC every
subsample's A (:mod:`fsdask.stability.hsicpass`); any other selector is refitted
once per subsample as a parallel task (:mod:`fsdask.stability.refit`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fsdask._validation import HasMethods, Int, Real, class_codes
from fsdask.base import FitOutput, Selector
from fsdask.fitting import FitContext, progress_line
from fsdask.linalg.colstats import column_screen
from fsdask.methods.filters import Filter
from fsdask.stability import hsicpass, hsictop, onepass
from fsdask.stability.refit import refit_tally
from fsdask.stability.resample import (
    draw_subsamples,
    error_bound,
    frequency_interval,
    stability_path,
    top_k_rows,
)

#: thresholds τ of the stability path stored in the result (``tau`` coordinate)
PATH_THRESHOLDS = np.round(np.linspace(0.05, 1.0, 20), 2)


def selection_size(k: Any, p: int, p_active: int) -> int:
    """How many features a filter's top-k keeps: ``n_features_to_select`` resolved as
    :class:`~fsdask.base.Selector` does (None: half the non-constant features)."""
    if k is None:
        return max(1, int(math.ceil(p_active / 2)))
    if isinstance(k, float) and 0 < k < 1:
        return max(1, int(round(k * p)))
    return min(int(k), p_active)


def known_size(k: Any, p: int) -> int | None:
    """A filter's top-k size known before its pass over X, from ``n_features_to_select``
    and the p features (None: half the non-constant features, known after it)."""
    if k is None:
        return None
    return selection_size(k, p, p)


def candidates_of(est: Filter, p: int, blocks: tuple[int, ...] | None = None) -> int | None:
    """How many candidates per feature block the subsamples of a streamed filter send to
    the client (:func:`~fsdask.stability.onepass.variant_candidates`) instead of every
    score: its k, when known before the pass and the candidates of the ``blocks`` (feature
    widths, if known) stay below a quarter of the scores; else None."""
    k = known_size(est.n_features_to_select, p)
    if k is None or onepass.variant_rows(est) != 1:
        return None
    sent = sum(min(k, b) for b in blocks) if blocks is not None else k
    return k if 4 * sent <= p else None


def base_estimator(estimator: Any) -> Any:
    """The selector a meta-estimator wraps (default: the ANOVA F filter)."""
    return Filter("f") if estimator is None else estimator


def strata_of(estimator: Any, y: np.ndarray | None) -> np.ndarray | None:
    """Class codes when the selector classifies (subsamples then keep every class)."""
    if y is None or getattr(estimator, "y_task", "any") != "classification":
        return None
    return class_codes(np.asarray(y))[1]


def one_pass_filter(estimator: Any) -> bool:
    """Whether a selector's resamples come from one pass over X: a univariate filter (not
    its one-vs-rest ``groups``, which are refitted)."""
    return isinstance(estimator, Filter) and getattr(estimator, "groups", None) is None


def streams_variants(estimator: Any) -> bool:
    """Whether those resamples are sums over samples (membership products over any
    blocks of X): every filter statistic but ``ks``, which sorts feature blocks."""
    return one_pass_filter(estimator) and bool(estimator.streams_samples)


def min_per_class(estimator: Any) -> int:
    """Samples of each class a subsample needs: 2 for the statistics with a variance in
    each class (as :class:`~fsdask.methods.filters.Filter` requires), else 1."""
    return 2 if getattr(estimator, "statistic", None) in ("ttest", "snr") else 1


class Stability(Selector):
    """Stability selection: which features survive other samples of the data.

    Parameters
    ----------
    estimator : Selector, default ``Filter("f")``
        The selector refitted on each subsample; its own selection rule
        (``n_features_to_select`` or the method's) decides what a subsample selects.
    n_resamples : int, default 100
        Subsamples in all (with complementary pairs: 2B, B = n_resamples / 2 pairs).
    sample_fraction : float, default 0.5
        Fraction of the samples in a subsample (0.5 with complementary pairs).  For a
        classifying selector the fraction is taken within each class.
    complementary_pairs : bool, default True
        Shah & Samworth's pairs of disjoint halves.
    threshold : float, default 0.6
        τ: a feature is stable when selected in at least this fraction of the subsamples.
        The error bound needs τ > 0.5.
    random_state : int or None, default 0
        Seed of the subsamples (and of the refits of a selector with a ``random_state``);
        the same seed gives the same result on threads, on a cluster and after a lost
        worker.  None draws a fresh seed.

    Attributes
    ----------
    frequency_ : ndarray (p,)
        Selection frequency of each feature; also ``result_["stability"]``, with its 95 %
        Wilson interval ``result_["stability_low"]`` / ``["stability_high"]``.
    support_ : ndarray (p,)
        The stable set (``frequency_ >= threshold``); ``result_["plain_selected"]`` is the
        estimator's selection on all samples, ``result_["plain_weight"]`` its scores.
    error_bound_ : float
        Bound on the expected number of falsely selected features, q² / ((2τ − 1) p) with
        q the mean number selected per subsample (:func:`~fsdask.stability.error_bound`;
        ``result_.attrs["error_bound"]`` with its assumptions in ``["bound"]``).
    mean_selected_ : float
        q.
    scores_, ranking_, result_
        Scores are the frequencies; ties rank by the estimator's score on all samples.
        ``result_["stability_path"]`` (over ``tau``) counts the features reaching each
        threshold.

    Notes
    -----
    Cost: for :class:`~fsdask.methods.filters.Filter` one pass over X, in any layout
    (sample blocks stream, as in the filter's own fit), for every subsample together: each
    block's class sums and sums of squares of all subsamples are two matrix products with
    the 0/1 membership matrix (:func:`fsdask.linalg.colstats.membership_sums`), the second
    half of each complementary pair is the full data minus the first, and the statistics
    of all subsamples come from one call
    (:func:`fsdask.methods.filters.stats_from_moments`; ``ttest`` and ``snr`` from one
    compiled sweep, :func:`fsdask.linalg.moments.two_class_scores`).  With k known before
    the pass (``n_features_to_select`` an int or a fraction) each block keeps every
    subsample's top k as its scores are made, and only those candidates and the plain
    fit's scores reach the client (:func:`~fsdask.stability.onepass.variant_candidates`).
    Memory: per block about n_resamples × C × p_b partial sums (C classes) and the
    membership matrix; the client holds 2 × n_resamples × k per block and 4 × p float64
    — or, with k unknown, (n_resamples + 1) × p scores, and above the memory budget the
    subsamples are refitted instead (said in a log line).  ``ks`` sorts each feature: its
    subsamples are computed on feature blocks.  For
    :class:`~fsdask.methods.hsic.SparseHSIC` too one pass over X, in any layout: each
    subsample's A = X H Δᵀ/(n − 1) is a weighted sum over its samples, so one product per
    block gives them all (:mod:`fsdask.stability.hsicpass`), then each subsample's
    SparsePM runs on its A in memory, in the client's threads.  With k given
    (:func:`~fsdask.stability.hsictop.candidate_k`) each block keeps only every
    subsample's rows of A that its bisection of ρ can reach
    (:mod:`fsdask.stability.hsictop`: the same selections, bit for bit); else the client
    holds about n_resamples × C × p float64 for C classes (n_resamples × (c + 2) × p for
    a response factor Δ of c columns), and above the memory budget the subsamples are
    refitted instead (said in a log line).  For other selectors, one refit per
    subsample as a task holding the subsample's rows of X (n/2 × p); when that exceeds the
    memory budget the refits run one after another, each over X's feature blocks.  The
    refits are counted where they run (:func:`fsdask.stability.refit.refit_tally`): the
    client holds O(p), not n_resamples × p.

    Examples
    --------
    >>> import numpy as np, fsdask
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(40, 30)), np.repeat([0, 1], 20)
    >>> X[y == 1, :3] += 2.0
    >>> st = fsdask.Stability(fsdask.Filter("ttest", n_features_to_select=3), n_resamples=20)
    >>> sorted(np.flatnonzero(st.fit(X, y).support_).tolist())
    [0, 1, 2]
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "get_support"]), None],
        "n_resamples": [Int(2)],
        "sample_fraction": [Real(0, 1, closed="neither")],
        "complementary_pairs": ["boolean"],
        "threshold": [Real(0, 1, closed="right")],
        "random_state": [Int(0), None],
    }

    def __init__(
        self,
        estimator: Any = None,
        n_resamples: int = 100,
        sample_fraction: float = 0.5,
        complementary_pairs: bool = True,
        threshold: float = 0.6,
        random_state: int | None = 0,
    ):
        self.estimator = estimator
        self.n_resamples = n_resamples
        self.sample_fraction = sample_fraction
        self.complementary_pairs = complementary_pairs
        self.threshold = threshold
        self.random_state = random_state

    @property
    def method_name(self) -> str:  # type: ignore[override]
        return f"stability({base_estimator(self.estimator).method_name})"

    @property
    def requires_y(self) -> bool:  # type: ignore[override]
        return bool(base_estimator(self.estimator).requires_y)

    @property
    def y_task(self) -> str:  # type: ignore[override]
        return base_estimator(self.estimator).y_task

    @property
    def min_samples(self) -> int:  # type: ignore[override]
        return 2 * int(base_estimator(self.estimator).min_samples)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = base_estimator(self.estimator).__sklearn_tags__()
        tags.classifier_tags = inner.classifier_tags
        tags.target_tags.required = inner.target_tags.required
        return tags

    @property
    def streams_samples(self) -> bool:  # type: ignore[override]
        est = base_estimator(self.estimator)
        return streams_variants(est) or hsicpass.one_pass_hsic(est)

    @property
    def screen_in_fit(self) -> bool:  # type: ignore[override]
        return self.streams_samples  # the membership sums carry the screen

    def _scores_fit(self, n_scores: int) -> bool:
        """Whether every resample's scores (``n_scores`` float64, twice: the blocks and
        their join) fit the client's memory budget; if not, says so in a log line: the
        resamples are then refitted one pass each."""
        from fsdask._config import memory_budget

        budget = memory_budget(None)
        if not budget or 16.0 * n_scores <= budget:
            return True
        remedy = "n_features_to_select=K with K at most a quarter of the features keeps one "
        self._say_refits("scores", 16 * n_scores, budget, remedy + "pass, or raise the budget")
        return False

    def _say_refits(self, what: str, nbytes: float, budget: int, remedy: str) -> None:
        """The log line of a one-pass route whose resamples' ``what`` the client cannot
        hold: the resamples are refitted instead, and how to keep one pass (``remedy``)."""
        from dask.utils import format_bytes

        progress_line(
            f"{self.method_name}: every resample's {what} from one pass need "
            f"{format_bytes(nbytes)} on the client, above the memory budget of "
            f"{format_bytes(budget)}; refitting each of the {self.n_resamples + 1} resamples "
            f"instead (one pass over X each; {remedy}: DASK_FSDASK__MEMORY_BUDGET=SIZE)"
        )

    def _subsamples(self, n: int, y: np.ndarray | None) -> list[np.ndarray]:
        return draw_subsamples(
            n,
            self.n_resamples,
            sample_fraction=self.sample_fraction,
            complementary_pairs=self.complementary_pairs,
            strata=strata_of(base_estimator(self.estimator), y),
            min_per_stratum=min_per_class(base_estimator(self.estimator)),
            random_state=self._seed(),
        )

    def _seed(self) -> int:
        if self.random_state is None:
            return int(np.random.SeedSequence().entropy % 2**32)
        return int(self.random_state)

    # ---- one pass for a filter: membership products (ks: feature blocks)
    def _one_pass(self, X, y, ctx: FitContext) -> FitOutput:
        """Every subsample's selection from the membership sums of one pass, screen
        included: from each block's candidates when k is small, else from every score."""
        est = base_estimator(self.estimator)
        variants, n_classes = onepass.filter_variants(
            est, y, [None, *self._subsamples(X.shape[0], y)], []
        )
        keep = candidates_of(est, X.shape[1], X.chunks[1])
        if keep:
            head, values, index = onepass.variant_candidates(
                ctx.execution, X, est, variants, n_classes, keep
            )
            active = self._apply_screen(*head[1:])
            out = self._from_candidates(est, head[0], values, index, active)
        elif self._scores_fit(len(variants) * X.shape[1]):
            computed, (bad, lo, hi) = onepass.variant_scores(
                ctx.execution, X, est, variants, n_classes
            )
            active = self._apply_screen(bad, lo, hi)
            out = self._from_scores(est, computed, len(variants), active, lo)
        else:
            return self._screened_refits(X, y, ctx, est)
        out.active = active
        return out

    def _from_scores(
        self, est: Filter, computed: np.ndarray, V: int, active: np.ndarray, lo: np.ndarray
    ) -> FitOutput:
        """The result from the variants' computed rows (plain fit first)."""
        data_min = float(lo[active].min()) if active.any() else 0.0
        scores = onepass.finish_scores(computed, est, V, data_min)
        scores = scores if active.all() else scores[:, active]  # (V, p): no copy if we can
        k = selection_size(est.n_features_to_select, active.size, int(active.sum()))
        chosen = top_k_rows(scores, k)
        return self._output_of(chosen[1:], scores[0], chosen[0])

    def _from_candidates(
        self,
        est: Filter,
        plain: np.ndarray,
        values: np.ndarray,
        index: np.ndarray,
        active: np.ndarray,
    ) -> FitOutput:
        """The result from the plain fit's scores and the subsamples' candidates
        (:func:`~fsdask.stability.onepass.variant_candidates`)."""
        p, R = int(active.sum()), values.shape[0]
        k = selection_size(est.n_features_to_select, active.size, p)
        plain = plain[active]
        if k >= p:  # every subsample selects every active feature
            counts, q = np.full(p, R), float(p)
        else:
            chosen = top_k_rows(values, k) & (index >= 0)
            position = np.cumsum(active) - 1  # a feature's place among the active ones
            counts = np.bincount(position[index[chosen]], minlength=p)
            q = float(chosen.sum()) / R
        return self._output(counts, R, q, plain, top_k_rows(plain[None], k)[0])

    def _fit_lazy(self, X, y):
        est = base_estimator(self.estimator)
        if not one_pass_filter(est) or streams_variants(est):
            return None  # refits, or the membership products of _fit
        if not self._scores_fit((self.n_resamples + 1) * X.shape[1]):
            return None  # refits (the screen, then _fit)
        rows = [None, *self._subsamples(X.shape[0], y)]
        variants, n_classes = onepass.filter_variants(est, y, rows, [])
        lazy = onepass.lazy_variant_scores(X, est, variants, n_classes)

        def finish(computed, active, lo, hi):
            return self._from_scores(est, computed, len(variants), active, lo)

        return lazy, finish, True

    # ---- SparseHSIC: every resample's A from one pass, step 3 per resample in memory
    def _hsic_one_pass(self, X, y, ctx: FitContext) -> FitOutput | None:
        """Every subsample's SparseHSIC selection from one pass (:mod:`.hsicpass`), or None
        (and a log line) when the client cannot hold every resample's A."""
        est = base_estimator(self.estimator)
        rows = [None, *self._subsamples(X.shape[0], y)]
        factors = hsicpass.resample_factors(est, y, rows)  # refuses a bad resample first
        layout = hsicpass.layout_of(factors, y, rows, X.shape[0])
        out = hsictop.one_pass_selections(ctx, est, X, y, rows, factors, layout, self._apply_screen)
        if out is None:
            nbytes = 16 * layout.rows * X.shape[1]
            self._say_refits("A", nbytes, ctx.budget, "raise the budget to keep one pass")
            return None
        support, plain, active = out
        fit = self._output_of(support[1:], plain, support[0])
        fit.active = active
        return fit

    # ---- any selector: refits as tasks
    def _fit(self, X, y, ctx: FitContext) -> FitOutput:
        est = base_estimator(self.estimator)
        if streams_variants(est):
            return self._one_pass(X, y, ctx)
        if hsicpass.one_pass_hsic(est):
            out = self._hsic_one_pass(X, y, ctx)
            return out if out is not None else self._screened_refits(X, y, ctx, est)
        return self._refits(X, y, ctx, est)

    def _screened_refits(self, X, y, ctx: FitContext, est: Any) -> FitOutput:
        """The refits on X's active features, after the screen ``fit`` runs for a selector
        whose resamples are not sums (here run by ``_fit`` itself): the route of a one-pass
        selector whose resamples' results the client cannot hold."""
        bad, lo, hi = column_screen(X)
        active = self._apply_screen(bad, lo, hi)
        out = self._refits(X if active.all() else X[:, active], y, ctx, est)
        out.active = active
        return out

    def _refits(self, X, y, ctx: FitContext, est: Any) -> FitOutput:
        """One refit per subsample (and one on all samples), as parallel tasks."""
        subs = self._subsamples(X.shape[0], y)
        resamples = [(None, y)] + [(r, None if y is None else y[r]) for r in subs]
        seeds = np.random.SeedSequence(self._seed()).generate_state(len(resamples))
        t = refit_tally(ctx, est, X, y, resamples, seeds)
        return self._output(t.selected, t.n_refits, t.n_selected / t.n_refits, t.scores, t.support)

    def _output_of(self, chosen: np.ndarray, plain: np.ndarray, plain_sel: np.ndarray) -> FitOutput:
        """The result from each subsample's selection (R × p_active) and the plain fit."""
        R = chosen.shape[0]
        return self._output(chosen.sum(0), R, float(chosen.sum(1).mean()), plain, plain_sel)

    def _output(
        self, counts: np.ndarray, R: int, q: float, plain: np.ndarray, plain_sel: np.ndarray
    ) -> FitOutput:
        """The result from the subsamples selecting each feature (``counts`` of R), q the
        mean number a subsample selects, and the plain fit."""
        p = counts.size
        freq = counts / R
        low, high = frequency_interval(counts, R)
        bound = error_bound(q, p, self.threshold)
        self.error_bound_, self.mean_selected_ = bound, q
        return FitOutput(
            scores=freq,
            rank_key=(freq, np.asarray(plain, np.float64)),
            support=freq >= self.threshold,
            support_is_final=True,
            extras={
                "stability": freq,
                "stability_low": low,
                "stability_high": high,
                "plain_weight": np.asarray(plain, np.float64),
                "plain_selected": np.asarray(plain_sel, bool),
                "stability_path": stability_path(freq, PATH_THRESHOLDS),
            },
            extra_dims={"stability_path": ("tau",)},
            coords={"tau": PATH_THRESHOLDS},
            attrs=self._attrs(q, bound, R),
        )

    def _attrs(self, q: float, bound: float, R: int) -> dict[str, Any]:
        pairs = self.complementary_pairs
        return {
            "stability_threshold": float(self.threshold),
            "n_resamples": int(R),
            "sample_fraction": float(self.sample_fraction),
            "complementary_pairs": bool(pairs),
            "random_state": -1 if self.random_state is None else int(self.random_state),
            "mean_selected": q,
            "error_bound": bound if math.isfinite(bound) else -1.0,
            "bound": (
                "E[false selections] <= q^2/((2*tau-1)*p): Shah & Samworth 2013 Thm 1 for "
                "complementary pairs (features selected on half the data with probability "
                "<= q/p)"
                if pairs
                else "E[false selections] <= q^2/((2*tau-1)*p): Meinshausen & Buhlmann 2010 "
                "Thm 1 (exchangeable noise features, selector better than random guessing)"
            ),
        }

    @property
    def frequency_(self) -> np.ndarray:
        """Selection frequency of each feature (``result_["stability"]``)."""
        return np.asarray(self.result_["stability"].values)
