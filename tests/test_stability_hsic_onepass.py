"""SparseHSIC's stability selection in one pass over X (issue 41, Cost): every resample's
A_r = X_{S_r}ᵀ H_r Δ_rᵀ/(|S_r| − 1) is one weighted sum over the samples, so a single
membership product per block gives all of them; each resample then selects as a refit on
its samples does — same subsets, same selections and frequencies — on dense and CSR
sample blocks alike, and the route falls back to the refits when the client cannot hold
every A_r."""

import logging

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

import fsdask
from fsdask.linalg.colstats import membership_rows, membership_sums, moment_sums
from fsdask.stability import Stability, draw_subsamples, hsicpass


def _data(seed=0, n=40, p=24):
    """Sparse counts with three planted features, a feature nonzero in one sample only
    (constant within the half without it), a constant one and a large offset."""
    rng = np.random.default_rng(seed)
    X = (rng.poisson(3.0, size=(n, p)) * (rng.random((n, p)) < 0.5)).astype(np.float64)
    y = np.repeat([0, 1], n // 2)
    X[y == 1, :3] += 3.0
    X[:, 7] = 0.0
    X[0, 7] = 4.0  # X's first row: the shift K of the sums
    X[:, 8] = 2.0  # constant everywhere: screened out before any resample
    X[:, 5] += 1000.0  # the shifted sums must not cancel
    return X, y


def _layout(X, layout):
    if layout == "csr-samples":
        return da.from_array(sp.csr_matrix(X), chunks=(13, -1), asarray=False)
    if layout == "dense-samples":
        return da.from_array(X, chunks=(13, -1))
    return da.from_array(X, chunks=(-1, 7))


def _refit_frequencies(est, X, y, R, seed):
    """The refit route by hand: the screen, then a SparseHSIC fit on every subsample."""
    active = X.min(0) != X.max(0)
    Xa = X[:, active]
    subs = draw_subsamples(X.shape[0], R, random_state=seed)
    chosen = np.array([clone(est).fit(Xa[r], y[r]).support_ for r in subs])
    plain = clone(est).fit(Xa, y).scores_
    freq = np.zeros(X.shape[1])
    freq[active] = chosen.mean(0)
    return freq, plain, active


@pytest.mark.parametrize("layout", ["dense-samples", "csr-samples", "dense-features"])
@pytest.mark.parametrize(
    "params, response",
    [
        ({"n_features_to_select": 4}, "labels"),
        ({"rho": "auto"}, "labels"),
        ({"n_features_to_select": 3, "response": "rbf"}, "continuous"),
    ],
)
def test_each_resample_selects_as_its_refit_in_one_pass(layout, params, response):
    X, y = _data()
    if response == "continuous":
        y = X[:, 0] + X[:, 1] + np.random.default_rng(1).normal(size=X.shape[0])
    est = fsdask.SparseHSIC(**params)
    with dask.config.set(scheduler="threads"):
        st = Stability(est, n_resamples=10, random_state=3).fit(_layout(X, layout), y)
    freq, plain, active = _refit_frequencies(est, X, y, 10, 3)
    assert st.n_passes_ == 1  # 10 resamples and the fit on all samples: one read of X
    np.testing.assert_array_equal(st.frequency_, freq)
    w = st.result_["plain_weight"].values
    np.testing.assert_allclose(w[active], plain, rtol=1e-9, atol=1e-12)
    assert not st.support_[8] and st.frequency_[8] == 0  # constant: never selected


def test_a_feature_constant_within_a_half_is_dropped_there_as_a_refit_drops_it():
    X, _ = _data()
    y = X[:, 0] - X[:, 2] + np.random.default_rng(3).normal(size=X.shape[0])
    # 0.7 in every sample but X's first row (the shift K of the sums): in the halves
    # without sample 0 its sums leave a standard deviation and an A row of rounding, not
    # 0, which standardising turns into a row that ρ = 0 selects — unless it is dropped
    X[:, 7], X[0, 7] = 0.7, 4.1
    est = fsdask.SparseHSIC(rho=0.0)  # continuous y, ρ = 0: every row of A that is not 0
    st = Stability(est, n_resamples=6, random_state=0).fit(X, y)
    subs = draw_subsamples(X.shape[0], 6, random_state=0)
    holds = np.array([0 in r for r in subs])
    assert st.frequency_[7] == holds.mean() == 0.5  # selected only where it varies
    freq, _, _ = _refit_frequencies(est, X, y, 6, 0)
    np.testing.assert_array_equal(st.frequency_, freq)


def test_falls_back_to_refits_above_the_budget_and_says_so(caplog):
    X, y = _data(2)
    est = fsdask.SparseHSIC(n_features_to_select=4)
    one = Stability(est, n_resamples=8, random_state=5).fit(X, y)
    with dask.config.set({"fsdask.memory-budget": 4000}), caplog.at_level(logging.INFO, "fsdask"):
        refit = Stability(est, n_resamples=8, random_state=5).fit(X, y)
    assert any("refitting each of the 9 resamples" in r.getMessage() for r in caplog.records)
    assert refit.n_passes_ > 9 and one.n_passes_ == 1
    np.testing.assert_array_equal(one.frequency_, refit.frequency_)
    np.testing.assert_array_equal(one.support_, refit.support_)


def test_a_resample_with_one_class_is_refused_before_reading_x():
    X, y = _data()
    y = np.zeros(X.shape[0], int)
    y[:2] = 1  # some half holds only class 0
    with pytest.raises(fsdask.errors.InputError, match="single class"):
        Stability(fsdask.SparseHSIC(), n_resamples=20, random_state=0).fit(X, y)


@pytest.mark.parametrize("kind", ["dense", "csr"])
def test_membership_sums_with_several_weight_columns_per_variant(kind):
    X, _ = _data()
    rows = [np.arange(40), np.arange(0, 40, 2), np.array([3, 4, 30, 31, 39])]
    member = np.full((40, 3), -1, np.int8)
    W = np.zeros((40, 5))  # 1 + 2 + 2 weight columns
    rng = np.random.default_rng(0)
    cols = [(0, 1), (1, 3), (3, 5)]
    for v, r in enumerate(rows):
        member[r, v] = 0
        W[r, cols[v][0] : cols[v][1]] = rng.normal(size=(r.size, cols[v][1] - cols[v][0]))
    K = X[7]
    got = membership_sums(X if kind == "dense" else sp.csr_matrix(X), member, W, K)
    assert got.shape == (membership_rows(3, 1, True, 5), X.shape[1]) == (2 * 3 + 5 + 4, 24)
    for v, r in enumerate(rows):
        ref = moment_sums(X[r], np.zeros(r.size, int), None, K)
        np.testing.assert_allclose(got[v], ref[0], rtol=1e-12, atol=1e-8)
        np.testing.assert_allclose(got[3 + v], ref[1], rtol=1e-12, atol=1e-6)
    np.testing.assert_allclose(got[6:11], W.T @ (X - K), rtol=1e-12, atol=1e-8)


def test_one_pass_for_100_resamples():
    X, y = _data(4, n=60, p=50)
    st = Stability(fsdask.SparseHSIC(n_features_to_select=5), n_resamples=100).fit(X, y)
    assert st.n_passes_ == 1 and st.result_.attrs["n_resamples"] == 100
    assert st.support_[:3].all()
    rows = [None, *draw_subsamples(60, 100, random_state=0)]
    factors = hsicpass.resample_factors(fsdask.SparseHSIC(), y, rows)
    layout = hsicpass.layout_of(factors, y, rows, 60)
    # two classes: the class sums and squares of the 51 resamples with products (the second
    # half of each pair is all samples minus the first), and the screen
    assert layout.rows == 2 * 51 * 2 + 4 and layout.weights is None


def test_a_class_missing_from_half_the_resamples():
    X, _ = _data(5)
    y = np.repeat([0, 1, 2], [20, 19, 1])  # the half without sample 39 has two classes
    est = fsdask.SparseHSIC(n_features_to_select=4)
    st = Stability(est, n_resamples=8, random_state=2).fit(_layout(X, "csr-samples"), y)
    freq, _, _ = _refit_frequencies(est, X, y, 8, 2)
    np.testing.assert_array_equal(st.frequency_, freq)
    assert st.n_passes_ == 1
