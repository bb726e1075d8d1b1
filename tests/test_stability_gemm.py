"""Every resample of a filter as membership products (issue 41, Cost): the class sums of all
resamples of a block are M (X_b − K) and M (X_b − K)², and the resample scores equal the
refits on each subsample, on dense and CSR sample blocks alike."""

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import fsdask
from fsdask.linalg.colstats import membership_matrix, membership_sums, moment_sums
from fsdask.linalg.execution import Execution
from fsdask.stability import Stability, draw_subsamples, onepass


def _counts(seed=0, n=48, p=23, density=0.3):
    """Sparse non-negative counts with a planted difference in the first 3 features."""
    rng = np.random.default_rng(seed)
    X = rng.poisson(3.0, size=(n, p)) * (rng.random((n, p)) < density)
    y = np.repeat([0, 1], n // 2)
    X[y == 1, :3] += rng.poisson(4.0, size=(n // 2, 3))
    X[:, 5] += 1000  # a large offset: the shifted sums must not cancel
    return X.astype(np.float64), y


@pytest.mark.parametrize("kind", ["dense", "csr"])
def test_membership_sums_are_each_subsets_moment_sums(kind):
    X, y = _counts()
    rows = [np.arange(48), np.arange(0, 48, 2), np.array([3, 4, 30, 31, 40])]
    member = np.full((48, len(rows)), -1, np.int8)
    for v, r in enumerate(rows):
        member[r, v] = y[r]
    w = np.where(member >= 0, np.arange(48)[:, None] - 20.0, 0.0)
    K = X[7]
    xb = X if kind == "dense" else sp.csr_matrix(X)
    got = membership_sums(xb, member, w, K, n_classes=2)
    V, C, p = len(rows), 2, X.shape[1]
    for v, r in enumerate(rows):
        ref = moment_sums(X[r], y[r], w[r, v], K, n_classes=2)
        np.testing.assert_allclose(got[v * C : v * C + C], ref[:C], rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(
            got[V * C + v * C : V * C + v * C + C], ref[C : 2 * C], rtol=1e-12, atol=1e-9
        )
        np.testing.assert_allclose(got[2 * V * C + v], ref[2 * C], rtol=1e-12, atol=1e-9)
    full = moment_sums(X, y, None, K, n_classes=2)
    np.testing.assert_array_equal(got[-4:], full[-4:])  # NaN count, K, −min, max
    assert got.shape == (2 * V * C + V + 4, p)
    X[3, 2], X[5, 4], X[6, 4] = np.nan, np.inf, np.nan  # counted; never an extreme
    xb = X if kind == "dense" else sp.csr_matrix(X)
    got = membership_sums(xb, member, None, K, n_classes=2)
    np.testing.assert_array_equal(got[-4:], moment_sums(X, y, None, K, n_classes=2)[-4:])
    assert got[-4, 2] == 1 and got[-4, 4] == 2 and got.shape == (2 * V * C + 4, p)
    assert membership_matrix(member, 2).sum() == sum(r.size for r in rows)


def _layouts(X):
    return {
        "dense-samples": da.from_array(X, chunks=(13, -1)),
        "csr-samples": da.from_array(sp.csr_matrix(X), chunks=(13, -1), asarray=False),
        "dense-features": da.from_array(X, chunks=(-1, 8)),
    }


@pytest.mark.parametrize("layout", ["dense-samples", "csr-samples", "dense-features"])
@pytest.mark.parametrize("statistic", ["ttest", "f", "fisher", "snr", "fold_change", "pearson"])
def test_every_resample_scores_as_its_refit(layout, statistic):
    X, y = _counts(1)
    if statistic == "pearson":
        y = X[:, 0] + np.random.default_rng(2).normal(size=48)
    if statistic == "fold_change":
        X = X + 1.0  # no class mean of 0 (an infinite fold change)
    est = fsdask.Filter(statistic)
    strata = None if statistic == "pearson" else y
    subs = draw_subsamples(48, 6, strata=strata, min_per_stratum=2, random_state=3)
    perms = [np.random.default_rng(4).permutation(48)]
    variants, n_classes = onepass.filter_variants(est, y, [None, *subs], perms)
    ex = Execution()
    Xd = _layouts(X)[layout]
    with dask.config.set(scheduler="threads"):
        computed, (bad, lo, hi) = onepass.variant_scores(ex, Xd, est, variants, n_classes)
    assert ex.passes == 1
    scores = onepass.finish_scores(computed, est, len(variants), float(lo.min()))
    fits = [(X, y)] + [(X[r], y[r]) for r in subs] + [(X, y[perms[0]])]
    for got, (Xr, yr) in zip(scores, fits):
        np.testing.assert_allclose(got, fsdask.Filter(statistic).fit(Xr, yr).scores_, rtol=1e-9)
    np.testing.assert_array_equal(lo, X.min(0))
    np.testing.assert_array_equal(hi, X.max(0))
    assert not bad.any()


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_stability_on_sample_blocks_is_the_refits_frequency(sparse):
    X, y = _counts(5, p=40)
    src = sp.csr_matrix(X) if sparse else X
    Xd = da.from_array(src, chunks=(12, -1), asarray=not sparse)
    with dask.config.set(scheduler="threads"):
        st = Stability(fsdask.Filter("ttest", n_features_to_select=3), n_resamples=20)
        st.fit(Xd, y)
    assert st.n_passes_ == 1
    subs = draw_subsamples(48, 20, strata=y, min_per_stratum=2, random_state=0)
    refits = [fsdask.Filter("ttest", n_features_to_select=3).fit(X[r], y[r]).support_ for r in subs]
    np.testing.assert_array_equal(st.frequency_, np.mean(refits, 0))
    assert set(np.flatnonzero(st.support_)) == {0, 1, 2}


def test_variance_on_sample_and_feature_blocks_and_slices(monkeypatch):
    X, y = _counts(6, p=30)
    monkeypatch.setattr(onepass, "SLICE_BYTES", 8)  # slices of 256 columns: several per block
    X = np.tile(X, (1, 20))  # 600 features
    est = fsdask.Filter("variance")
    subs = draw_subsamples(48, 4, random_state=1)
    variants, _ = onepass.filter_variants(est, None, [None, *subs], [])
    ex = Execution()
    Xd = da.from_array(X, chunks=(20, 550))  # 3 × 2 blocks, the first 550 wide
    with dask.config.set(scheduler="threads"):
        computed, _ = onepass.variant_scores(ex, Xd, est, variants, 0)
    assert ex.passes == 1
    for got, r in zip(computed, [slice(None), *subs]):
        np.testing.assert_allclose(got, X[r].var(0, ddof=1), rtol=1e-10)


def test_top_k_rows_is_top_k_mask_of_each_row():
    from fsdask.base import top_k_mask
    from fsdask.stability.resample import top_k_rows

    rng = np.random.default_rng(7)
    scores = rng.integers(0, 5, size=(30, 17)).astype(float)  # many ties
    scores[rng.random(scores.shape) < 0.2] = np.nan  # never chosen, even when short of k
    scores[0, :15] = np.nan
    for k in (1, 4, 16, 17, 20):
        ref = np.array([top_k_mask(s, k) for s in scores])
        np.testing.assert_array_equal(top_k_rows(scores, k), ref)


@pytest.mark.parametrize("layout", ["dense-samples", "csr-samples", "dense-features"])
@pytest.mark.parametrize("k", [1, 4, 0.02])
def test_block_candidates_select_as_every_score(monkeypatch, layout, k):
    """A small k: each subsample's top k from its feature blocks' candidates (never every
    score on the client) is the top k of all its scores — ties at the k-th (integer counts),
    NaN t of features constant in a subsample, a constant feature, blocks narrower than k."""
    from fsdask.stability import estimator

    X, y = _counts(8, p=160, density=0.1)
    X[:, 9] = 2.0  # constant: never selected
    X[:, 40:80], X[:, 120:123] = X[:, :40], X[:, :3]  # equal scores across and within blocks
    Xd = {
        "dense-samples": da.from_array(X, chunks=(13, 40)),
        "csr-samples": da.from_array(sp.csr_matrix(X), chunks=(13, -1), asarray=False),
        "dense-features": da.from_array(X, chunks=(-1, (3, 37, 120))),
    }[layout]
    sent = []
    real = onepass.variant_candidates
    monkeypatch.setattr(onepass, "variant_candidates", lambda *a: sent.append(1) or real(*a))

    def fit(route):
        st = Stability(fsdask.Filter("ttest", n_features_to_select=k), n_resamples=30)
        with dask.config.set(scheduler="threads"):
            return st.fit(Xd, y)

    got = fit("candidates")
    assert sent == [1] and got.n_passes_ == 1
    monkeypatch.setattr(estimator, "candidates_of", lambda *a: None)
    ref = fit("scores")
    assert sent == [1]
    np.testing.assert_array_equal(got.frequency_, ref.frequency_)
    np.testing.assert_array_equal(got.result_["plain_selected"], ref.result_["plain_selected"])
    np.testing.assert_array_equal(got.result_["plain_weight"], ref.result_["plain_weight"])
    assert got.mean_selected_ == ref.mean_selected_ and got.frequency_[9] == 0
    assert 0 < got.frequency_.sum()


def test_block_candidates_of_slices_with_nan_and_ties():
    from fsdask.stability.resample import top_k_rows

    V, keep = 4, 3
    scores = np.array(
        [
            [5.0, 1.0, 1.0, 1.0, 1.0, 0.0, 8.0],  # ties at the 3rd: the first two 1.0
            [np.nan, 2.0, np.nan, np.nan, np.nan, 7.0, np.nan],  # two numbers: both
            [3.0, 3.0, 3.0, 3.0, 9.0, 3.0, 3.0],  # a constant feature (column 4) is not one
        ]
    )
    screen = np.array([[0.0] * 7, [0, 0, 0, 0, 1, 0, 0], [1.0] * 7])
    block = np.vstack([np.arange(7.0), scores, screen])
    for step in (1, 2, 7):  # slices of the block, one column or all at a time
        slices = [block[:, a : a + step] for a in range(0, 7, step)]
        head, out = onepass.slice_candidates(iter(slices), V, keep)
        values, index = out[: V - 1], out[V - 1 :]
        np.testing.assert_array_equal(head, block[[0, V, V + 1, V + 2]])
        np.testing.assert_array_equal(index, [[0, 1, 6], [1, 5, -1], [0, 1, 2]])
        np.testing.assert_array_equal(values[1], [2.0, 7.0, np.nan])
        active = np.array([0, 1, 2, 3, 5, 6])
        ref = top_k_rows(scores[:, active], keep)
        ref[1] = ~np.isnan(scores[1, active])  # fewer numbers than keep: all of them
        for v in range(V - 1):
            np.testing.assert_array_equal(active[ref[v]], index[v][index[v] >= 0])


def test_running_top_k_is_top_k_rows_of_all_columns():
    from fsdask.stability.resample import RunningTopK, top_k_rows

    rng = np.random.default_rng(3)
    scores = rng.integers(0, 6, size=(20, 300)).astype(float)  # many ties
    scores[rng.random(scores.shape) < 0.3] = np.nan
    scores[0, 5:] = np.nan  # fewer numbers than k
    for k, step in [(1, 7), (5, 1), (5, 64), (40, 33)]:
        top = RunningTopK(20, k)
        for a in range(0, 300, step):
            top.add(scores[:, a : a + step], a)
        ref = top_k_rows(scores, k)
        short = (~np.isnan(scores)).sum(axis=1) <= k  # rows of fewer numbers keep them all
        ref[short] = ~np.isnan(scores[short])
        assert short[0] or k == 1
        for r in range(20):
            got = top.index[r][top.index[r] >= 0]
            np.testing.assert_array_equal(got, np.flatnonzero(ref[r]))
            np.testing.assert_array_equal(top.values[r][: got.size], scores[r, got])


def test_fdr_permutations_on_csr_sample_blocks_split_for_the_sums(monkeypatch):
    from fsdask.stability import FDR, permutation_pvalues

    X, y = _counts(8, p=40)
    # room for the partial sums of 3 columns: each 40-wide feature block splits in 14
    rows = 2 * 31 * 2 + 4
    monkeypatch.setattr(onepass, "SUMS_BYTES", 8 * rows * (onepass.TREE_SPLIT + 1) * 3)
    assert onepass.split_blocks((40,), 3) == (3,) * 13 + (1,)
    Xd = da.from_array(sp.csr_matrix(X), chunks=(10, -1), asarray=False)
    with dask.config.set(scheduler="threads"):
        fdr = FDR(fsdask.Filter("snr"), q=0.1, n_permutations=30, random_state=4).fit(Xd, y)
    assert fdr.n_passes_ == 1
    rng = np.random.default_rng(4)
    null = np.array(
        [fsdask.Filter("snr").fit(X, y[rng.permutation(48)]).scores_ for _ in range(30)]
    )
    observed = fsdask.Filter("snr").fit(X, y).scores_
    np.testing.assert_array_equal(fdr.pvalues_, permutation_pvalues(observed, null))


@pytest.mark.parametrize("statistic,equal_var", [("ttest", False), ("ttest", True), ("snr", False)])
def test_fused_two_class_scores_are_the_moments_path_to_the_bit(monkeypatch, statistic, equal_var):
    X, y = _counts(9, p=300)
    X[:, 7] = 0.0
    X[:24, 8], X[24:, 8] = 1.0, 3.0  # each class one value: no standard error, a score of 0
    est = fsdask.Filter(statistic, **({"equal_var": equal_var} if statistic == "ttest" else {}))
    subs = draw_subsamples(48, 10, strata=y, min_per_stratum=2, random_state=2)
    perms = [np.random.default_rng(1).permutation(48)]
    variants, n_classes = onepass.filter_variants(est, y, [None, *subs], perms)
    Xd = da.from_array(X, chunks=(20, 128))
    with dask.config.set(scheduler="threads"):
        fused, screen = onepass.variant_scores(Execution(), Xd, est, variants, n_classes)
        monkeypatch.setattr(onepass, "TWO_CLASS_FUSED", ())
        ref, ref_screen = onepass.variant_scores(Execution(), Xd, est, variants, n_classes)
    np.testing.assert_array_equal(fused, ref)
    np.testing.assert_array_equal(screen, ref_screen)
    assert fused[0, 8] == 0 and len(onepass.complements(variants, 48)) == 5
