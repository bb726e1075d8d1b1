"""FDR-controlled selection (issue 41 item 2): Benjamini–Hochberg equals scikit-learn's
SelectFdr, Benjamini–Yekutieli, permutation p-values (a filter's in one pass), the
empirical FDR on planted-signal generators, and refused combinations."""

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.feature_selection import SelectFdr, f_classif
from sklearn.utils.estimator_checks import check_estimator

import fsdask
from fsdask.datasets import fermat_spiral, weston_linear, zarkoob_regression
from fsdask.errors import ParameterError
from fsdask.stability import FDR, adjust, permutation_pvalues
from fsdask.stability.fdr import fewest_selectable
from fsdask.testing import expected_failed_checks


def _fdp(support, relevant):
    sel = np.flatnonzero(support)
    return 0.0 if sel.size == 0 else float(np.mean(~np.isin(sel, relevant)))


def _classes(seed=0, n=60, p=80):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.normal(size=(n, p))
    X[:, :6] += 1.2 * y[:, None]
    return X, y


@pytest.mark.parametrize("q", [0.01, 0.05, 0.2])
def test_bh_equals_sklearn_select_fdr_on_the_same_pvalues(q):
    X, y = _classes()
    fdr = FDR(fsdask.Filter("f"), q=q).fit(X, y)
    ref = SelectFdr(lambda X, y: (fdr.scores_, fdr.pvalues_), alpha=q).fit(X, y)
    np.testing.assert_array_equal(fdr.support_, ref.get_support())
    # and the p-values are scikit-learn's ANOVA F p-values
    np.testing.assert_allclose(fdr.pvalues_, f_classif(X, y)[1], rtol=1e-8)
    np.testing.assert_array_equal(
        fdr.support_, SelectFdr(f_classif, alpha=q).fit(X, y).get_support()
    )


def test_by_is_bh_times_the_harmonic_sum():
    p = np.array([0.001, 0.02, 0.03, 0.5, np.nan, 0.004])
    m = 5
    np.testing.assert_allclose(
        adjust(p, "by"), np.minimum(adjust(p, "bh") * np.sum(1 / np.arange(1, m + 1)), 1)
    )
    assert np.isnan(adjust(p, "by")[4])
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    ok = np.isfinite(p)
    for ours, theirs in (("bh", "fdr_bh"), ("by", "fdr_by")):
        ref = multitest.multipletests(p[ok], method=theirs)[1]
        np.testing.assert_allclose(adjust(p, ours)[ok], ref, rtol=1e-12)
    X, y = _classes(1)
    bh, by = (FDR(fsdask.Filter("f"), q=0.05, method=m).fit(X, y) for m in ("bh", "by"))
    assert by.support_.sum() <= bh.support_.sum()
    assert by.result_.attrs["fdr_method"] == "by"


@pytest.mark.parametrize(
    "statistic, shift, chunks",
    [
        ("snr", 0.0, (60, 10)),  # feature blocks
        ("snr", 0.0, (15, 40)),  # sample blocks: the membership sums merged over them
        ("ks", 0.0, (60, 10)),  # no sums: each permutation's kernel on the feature block
        ("fold_change", 0.0, (15, 40)),  # data ≤ 0: the log scale, decided after the pass
        ("fold_change", 10.0, (15, 40)),  # positive data: the linear scale
    ],
)
def test_permutation_pvalues_of_a_filter_come_from_one_pass(statistic, shift, chunks):
    X, y = _classes(2, p=40)
    X = X + shift
    y = (y > 0).astype(int)
    Xd = da.from_array(X, chunks=chunks)
    with dask.config.set(scheduler="threads"):
        fdr = FDR(fsdask.Filter(statistic), q=0.1, n_permutations=30, random_state=4).fit(Xd, y)
    assert fdr.n_passes_ == 1
    rng = np.random.default_rng(4)
    null = np.array(
        [fsdask.Filter(statistic).fit(X, y[rng.permutation(60)]).scores_ for _ in range(30)]
    )
    observed = fsdask.Filter(statistic).fit(X, y).scores_
    np.testing.assert_allclose(fdr.scores_, observed, rtol=1e-12)
    np.testing.assert_allclose(fdr.pvalues_, permutation_pvalues(observed, null), rtol=0, atol=0)
    assert fdr.result_.attrs["n_permutations"] == 30
    assert "permuted" in fdr.result_.attrs["null"]


@pytest.mark.parametrize("chunks", [(40, 500), (10, 2000)])
@pytest.mark.parametrize("statistic", ["f", "fold_change"])
def test_the_client_gets_counts_not_every_permutation_scores(statistic, chunks):
    """A filter's permutations are counted against the observed scores where they are made:
    the client receives 2·r + 3 rows of p (r = 1, or 2 for fold_change on an undecided
    scale), whatever the number of permutations, with the counts of all V × p scores."""
    from fsdask.linalg.execution import Execution
    from fsdask.stability import onepass

    X, y = _classes(5, n=40, p=2000)
    est = fsdask.Filter(statistic)
    rng = np.random.default_rng(1)
    variants, C = onepass.filter_variants(est, y, [None], [rng.permutation(40) for _ in range(200)])
    with dask.config.set(scheduler="threads"):
        Xd = da.from_array(X, chunks=chunks)
        rows, screen = onepass.variant_exceedances(Execution(), Xd, est, variants, C)
        every, screen_all = onepass.variant_scores(Execution(), Xd, est, variants, C)
    r = onepass.variant_rows(est)
    assert rows.shape == (2 * r, 2000) and screen.shape == (3, 2000)
    np.testing.assert_array_equal(screen, screen_all)
    for data_min in (-1.0, 1.0):  # both scales of an undecided fold change
        full = onepass.finish_scores(every, est, len(variants), data_min)
        scores, exceeded = onepass.finish_exceedances(rows, est, data_min)
        np.testing.assert_array_equal(scores, full[0])
        np.testing.assert_array_equal(exceeded, (full[1:] >= full[0]).sum(0))


def test_permutation_null_of_an_iterative_method():
    X, y = _classes(3, n=30, p=12)
    y = (y > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fdr = FDR(fsdask.Logo(max_iter=3), q=0.2, n_permutations=9).fit(X, y)
    p = fdr.pvalues_
    assert np.all((p >= 0.1) & (p <= 1)) and np.allclose(p * 10, np.round(p * 10))
    assert fdr.support_.sum() == 0  # with 9 permutations no p-value is below 0.2 / 12
    # the p-values are those of the refits on the permuted labels, by hand
    rng = np.random.default_rng(0)
    perms = [rng.permutation(30) for _ in range(9)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        observed = fsdask.Logo(max_iter=3).fit(X, y).scores_
        null = np.array([fsdask.Logo(max_iter=3).fit(X, y[q]).scores_ for q in perms])
    np.testing.assert_array_equal(p, permutation_pvalues(observed, null))


@pytest.mark.parametrize("method", ["bh", "by"])
@pytest.mark.parametrize("m, B, q", [(200, 99, 0.1), (1000, 999, 0.05), (50, 19, 0.2)])
def test_fewest_selectable_is_where_bh_starts_selecting(m, B, q, method):
    """k features at the smallest permutation p-value 1/(B + 1), the rest at 1: BH (BY)
    selects them exactly when k reaches fewest_selectable."""
    fewest = fewest_selectable(m, B, q, method)
    for k in sorted({1, max(1, fewest - 1), fewest, fewest + 1}):
        if k > m:
            continue
        p = np.ones(m)
        p[:k] = 1.0 / (B + 1)
        assert ((adjust(p, method) <= q).sum() == k) == (k >= fewest), k


def test_an_empty_selection_the_permutations_imposed_is_said():
    """With too few permutations for the number of features, BH cannot select a handful of
    strong features: the empty result says why, and the number of permutations drawn is
    recorded; enough permutations (or a selection) say nothing."""
    X, y = _classes(6, n=60, p=400)
    y = (y > 0).astype(int)
    with pytest.warns(UserWarning, match=r"nothing selected, and nothing could be: with 99 "):
        few = FDR(fsdask.Filter("snr"), n_permutations=99).fit(X, y)
    assert few.support_.sum() == 0 and few.result_.attrs["n_permutations"] == 99
    assert fewest_selectable(400, 99, 0.05) == 80  # the message's "at least 80"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        many = FDR(fsdask.Filter("snr"), n_permutations=7999).fit(X, y)
        FDR(fsdask.Filter("ttest")).fit(X, y)
    assert many.support_[:6].all()
    with pytest.warns(UserWarning, match=r"at least 8 or none; use .* n_permutations=7999 \(CLI: "):
        default = FDR(fsdask.Filter("snr")).fit(X, y)  # 1000: not enough for 400 features
    assert default.result_.attrs["n_permutations"] == 1000


def test_refused_combinations():
    X, y = _classes()
    with pytest.raises(ParameterError, match="unsupervised selector has no labels"):
        FDR(fsdask.Filter("variance")).fit(X, y)
    with pytest.raises(ParameterError, match="unsupervised"):
        FDR(fsdask.CPFS()).fit(X, y)
    with pytest.raises(ParameterError, match="needs n_permutations"):
        FDR(fsdask.Logo()).fit(X, y)


def test_check_estimator():
    est = FDR(fsdask.Filter("f"), q=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(est, expected_failed_checks=expected_failed_checks(est))


# ---- empirical FDR on planted-signal generators --------------------------------------------


def _correlated(seed, n=60, p=120, rho=0.6, block=10):
    """Equicorrelated blocks of features (ρ within a block); the first 6 features carry y."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    shared = rng.normal(size=(n, p // block)).repeat(block, axis=1)
    X = np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.normal(size=(n, p))
    X[y == 1, :6] += 1.5
    return X, y, np.arange(6)


def _weston(seed):
    syn = weston_linear(n_samples=60, n_features=150, random_state=seed)
    return syn.X.values, syn.y, syn.relevant


def _zarkoob(seed):
    syn = zarkoob_regression(n_samples=50, n_features=150, random_state=seed)
    return syn.X.values, syn.y, syn.relevant


def _spiral(seed):
    syn = fermat_spiral(n_irrelevant=100, n_per_class=30, random_state=seed)
    return syn.X.values, syn.y, syn.relevant


CASES = {
    "weston-ttest": (_weston, lambda s: FDR(fsdask.Filter("ttest"), q=0.1)),
    "zarkoob-pearson": (_zarkoob, lambda s: FDR(fsdask.Filter("pearson"), q=0.1)),
    "spiral-f": (_spiral, lambda s: FDR(fsdask.Filter("f"), q=0.1)),
    "correlated-ttest-by": (_correlated, lambda s: FDR(fsdask.Filter("ttest"), q=0.1, method="by")),
    "weston-snr-permutation": (
        _weston,
        lambda s: FDR(fsdask.Filter("snr"), q=0.1, n_permutations=999, random_state=s),
    ),
}


def _empirical_fdr(case, seeds):
    data, make = CASES[case]
    fdps = []
    for s in seeds:
        X, y, relevant = data(s)
        fdps.append(_fdp(make(s).fit(X, y).support_, relevant))
    fdps = np.asarray(fdps)
    return fdps.mean(), fdps.std(ddof=1) / np.sqrt(fdps.size)


@pytest.mark.parametrize("case", ["weston-ttest", "zarkoob-pearson", "correlated-ttest-by"])
def test_empirical_fdr_few_seeds(case):
    fdr, se = _empirical_fdr(case, range(12))
    assert fdr <= 0.1 + 2 * se


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_empirical_fdr_over_50_seeds(case):
    fdr, se = _empirical_fdr(case, range(50))
    assert fdr <= 0.1 + 2 * se, f"{case}: empirical FDR {fdr:.3f} ± {se:.3f}"


def test_the_filter_test_route_is_the_filter_own_pass_on_sample_blocks():
    X, y = _classes(4)
    y = (y > 0).astype(int)
    Xs = da.from_array(X, chunks=(15, 80))  # sample blocks: the filter streams them
    with dask.config.set(scheduler="threads"):
        fdr = FDR(fsdask.Filter("ttest"), q=0.05).fit(Xs, y)
        ref = fsdask.Filter("ttest").fit(Xs, y)
    assert fdr.n_passes_ == ref.n_passes_ == 1
    np.testing.assert_array_equal(fdr.pvalues_, ref.pvalues_)
    np.testing.assert_array_equal(fdr.pvalues_adjusted_, ref.result_["pvalue_adj"].values)
    with pytest.raises(ParameterError, match="group_pvalue_adj"):
        FDR(fsdask.Filter("ttest", groups="all")).fit(X, y)
