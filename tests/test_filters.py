"""Baseline filters against scipy / scikit-learn, single-pass and chunking-independent."""

import dask.array as da
import numpy as np
import pytest
import scipy.stats as ss
import xarray as xr

import fsdask
from fsdask.errors import InputError, ParameterError
from fsdask.methods import FILTER_SCORES
from fsdask.testing import SelectorChecks


@pytest.fixture
def binary(rng):
    X = rng.normal(size=(40, 37))
    y = np.repeat([0, 1], 20)
    X[y == 1, :4] += 1.5
    return X, y


@pytest.fixture
def multiclass(rng):
    X = rng.normal(size=(45, 23))
    y = np.repeat([0, 1, 2], 15)
    X[:, 0] += y
    return X, y


@pytest.mark.parametrize("chunk", [37, 5, 11])
def test_welch_and_student_t(binary, chunk):
    X, y = binary
    Xd = da.from_array(X, chunks=(40, chunk))
    for equal_var in (False, True):
        f = fsdask.Filter("ttest", equal_var=equal_var).fit(Xd, y)
        ref = ss.ttest_ind(X[y == 0], X[y == 1], equal_var=equal_var)
        np.testing.assert_allclose(f.scores_, np.abs(ref.statistic), rtol=1e-10)
        np.testing.assert_allclose(f.pvalues_, ref.pvalue, rtol=1e-8)


def test_f_and_fisher_multiclass(multiclass):
    from sklearn.feature_selection import f_classif

    X, y = multiclass
    f = fsdask.Filter("f").fit(X, y)
    F, p = f_classif(X, y)
    np.testing.assert_allclose(f.scores_, F, rtol=1e-10)
    np.testing.assert_allclose(f.pvalues_, p, rtol=1e-8)
    fisher = fsdask.Filter("fisher").fit(X, y)
    # Fisher score = BSS / WSS with population variances = F · (C−1)/(n−C)
    np.testing.assert_allclose(fisher.scores_, F * 2 / 42, rtol=1e-10)


def test_pearson_continuous(rng):
    X = rng.normal(size=(30, 12))
    yc = X[:, 3] * 2 + rng.normal(size=30) * 0.5
    f = fsdask.Filter("pearson").fit(X, yc)
    ref = [ss.pearsonr(X[:, j], yc) for j in range(12)]
    np.testing.assert_allclose(f.scores_, [abs(r.statistic) for r in ref], rtol=1e-10)
    np.testing.assert_allclose(f.pvalues_, [r.pvalue for r in ref], rtol=1e-6)
    assert f.ranking_[3] == 1


def test_ks_snr_fold_change_variance(binary):
    X, y = binary
    ks = fsdask.Filter("ks").fit(X, y)
    np.testing.assert_allclose(
        ks.scores_, [ss.ks_2samp(X[y == 0, j], X[y == 1, j]).statistic for j in range(37)]
    )
    snr = fsdask.Filter("snr").fit(X, y)
    m0, m1 = X[y == 0].mean(0), X[y == 1].mean(0)
    s0, s1 = X[y == 0].std(0, ddof=1), X[y == 1].std(0, ddof=1)
    np.testing.assert_allclose(snr.scores_, np.abs(m0 - m1) / (s0 + s1))
    fc = fsdask.Filter("fold_change").fit(X, y)  # X has negatives → log-scale data → |Δμ|
    np.testing.assert_allclose(fc.scores_, np.abs(m0 - m1))
    Xp = np.exp(X)
    fc = fsdask.Filter("fold_change").fit(Xp, y)
    np.testing.assert_allclose(fc.scores_, np.abs(np.log2(Xp[y == 0].mean(0) / Xp[y == 1].mean(0))))
    var = fsdask.Filter("variance").fit(X)
    np.testing.assert_allclose(var.scores_, X.var(0, ddof=1))


def test_api_support_transform_and_result(binary):
    X, y = binary
    f = fsdask.Filter("ttest", n_features_to_select=4).fit(X, y)
    assert sorted(f.get_support(indices=True)) == [0, 1, 2, 3]
    assert f.transform(X).shape == (40, 4)
    Xd = da.from_array(X, chunks=(40, 10))
    out = f.transform(Xd)
    assert isinstance(out, da.Array) and out.shape == (40, 4)
    da_x = xr.DataArray(
        X, dims=("sample", "feature"), coords={"feature": [f"g{i}" for i in range(37)]}
    )
    f2 = fsdask.Filter("ttest", n_features_to_select=4).fit(da_x, y)
    assert list(f2.transform(da_x)["feature"].values) == list(
        f2.result_["feature"].values[f2.support_]
    )
    r = f.result_
    assert set(r.data_vars) >= {"weight", "rank", "selected", "pvalue"}
    assert r.attrs["method"] == "ttest" and r.attrs["n_selected"] == 4
    assert sorted(f.ranking_) == list(range(1, 38))


def test_bad_inputs_specific_to_filters(binary, multiclass):
    X, y = binary
    with pytest.raises(InputError, match="use statistic='f'"):
        fsdask.Filter("ttest").fit(*multiclass)
    with pytest.raises(ParameterError, match="'statistic' parameter of Filter"):
        fsdask.Filter("nope").fit(X, y)
    with pytest.raises(InputError, match="non-numeric"):
        fsdask.Filter("ttest").fit(np.array([["a", "b"], ["c", "d"]]), [0, 1])
    ys = np.ones(40, int)
    ys[0] = 0  # class 0 is a singleton
    with pytest.raises(InputError, match="single sample"):
        fsdask.Filter("ttest").fit(X, ys)


def test_laplacian_score_prefers_cluster_structure(rng):
    X = rng.normal(size=(60, 10))
    X[:30, 2] += 6  # feature 2 splits the samples into two tight groups
    ls = fsdask.LaplacianScore(n_neighbors=5).fit(X)
    assert ls.ranking_[2] == 1


def test_top_k_mask_matches_a_stable_sort(rng):
    from fsdask.base import top_k_mask

    for _ in range(500):
        n = int(rng.integers(1, 40))
        s = rng.integers(0, 5, n).astype(float)  # many ties
        k = int(rng.integers(1, n + 1))
        ref = np.zeros(n, bool)
        ref[np.argsort(-s, kind="stable")[:k]] = True
        np.testing.assert_array_equal(top_k_mask(s, k), ref)


@pytest.mark.parametrize("dense_max, radix_min", [(1 << 16, 1 << 30), (3, 1 << 30), (3, 1)])
def test_ranking_equals_stable_sort_with_ties(rng, monkeypatch, dense_max, radix_min):
    """ranking_ (introsort + tie repair, or a radix sort of dense ranks, or the stable sort
    when there are too many distinct keys for it, or the radix sort of the keys' bits) is
    exactly the stable order."""
    import fsdask.base
    from fsdask.base import _ranking

    monkeypatch.setattr(fsdask.base, "_DENSE_MAX", dense_max)
    monkeypatch.setattr(fsdask.base, "_RADIX_MIN", radix_min)
    for trial in range(60):
        p = int(rng.integers(1, 200)) if trial % 3 else int(rng.integers(2000, 3000))
        s = rng.integers(0, 4, p).astype(float) if trial % 2 else rng.normal(size=p)
        s[rng.random(p) < (0.2 if trial % 4 == 0 else 0.03)] = -0.0  # both tie paths
        if trial % 5 == 0:  # mostly zero: the sparse path
            s[rng.random(p) < 0.8] = 0.0
        active = rng.random(p) < 0.8
        order = np.argsort(np.where(active, -s, np.inf), kind="stable")
        ref = np.empty(p, np.int64)
        ref[order] = np.arange(1, p + 1)
        np.testing.assert_array_equal(_ranking(s, active), ref)


@pytest.mark.parametrize("score", ["ttest", "f", "pearson"])
def test_pvalues_computed_when_first_read(binary, monkeypatch, score):
    """p-values are evaluated from the fitted statistics on the first read of pvalues_ or
    result_ (not in fit), once, with scipy's values; constant features get NaN; a refit and
    the scores without p-values carry no stale ones."""
    import fsdask.methods.filters as filters

    X, y = binary
    X = X.copy()
    X[:, 5] = 3.0  # constant feature
    calls = []
    real = filters.pvalues_from_stats
    monkeypatch.setattr(filters, "pvalues_from_stats", lambda *a: calls.append(a[0]) or real(*a))
    f = fsdask.Filter(score).fit(X, y)
    assert calls == []
    pv = f.pvalues_
    assert (
        calls == [score]
        and pv.shape == (37,)
        and np.isnan(pv[5])
        and not np.isnan(np.delete(pv, 5)).any()
    )
    np.testing.assert_array_equal(f.result_["pvalue"].values, pv)
    assert calls == [score]  # computed once
    Xa = np.delete(X, 5, axis=1)
    if score == "ttest":
        ref = ss.ttest_ind(Xa[y == 0], Xa[y == 1], equal_var=False).pvalue
    elif score == "f":
        ref = ss.f_oneway(Xa[y == 0], Xa[y == 1]).pvalue
    else:
        ref = [ss.pearsonr(Xa[:, j], y).pvalue for j in range(36)]
    np.testing.assert_allclose(np.delete(pv, 5), ref, rtol=1e-8)
    f.fit(X[:, :10], y)  # refit: new p-values, of the new shape
    assert f.pvalues_.shape == (10,) and len(calls) == 2
    g = fsdask.Filter("snr").fit(X, y)
    assert g.pvalues_ is None and "pvalue" not in g.result_
    with pytest.raises(AttributeError):
        _ = fsdask.Filter(score).pvalues_


def test_threaded_pvalues_equal_serial(rng):
    from fsdask.methods.filters import _threaded_pvalues, pvalues_from_stats

    stats = np.abs(rng.normal(size=(2, 140_000))) * [[2.0], [40.0]] + [[0.0], [2.0]]
    for score in ("ttest", "f", "pearson"):
        st = stats if score == "ttest" else np.clip(stats[:1] / 8, 0, 1)
        np.testing.assert_array_equal(
            _threaded_pvalues(score, st, 50, 3), pvalues_from_stats(score, st, 50, 3)
        )
    with pytest.raises(fsdask.errors.ParameterError, match="no p-value"):
        pvalues_from_stats("snr", stats, 50, 2)


class _FilterChecks(SelectorChecks):
    statistic = "ttest"

    def make_estimator(self, **params):
        return fsdask.Filter(self.statistic, **params)


# one SelectorChecks class per statistic: TestFilter_ttest, TestFilter_variance, ...
for _s in FILTER_SCORES:
    globals()[f"TestFilter_{_s}"] = type(f"TestFilter_{_s}", (_FilterChecks,), {"statistic": _s})


class TestLaplacianScore(SelectorChecks):
    def make_estimator(self, **params):
        return fsdask.LaplacianScore(**params)
