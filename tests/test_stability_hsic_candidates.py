"""SparseHSIC's stability selection of k features from each block's candidates (issue 41,
Cost): each feature block keeps, per resample, only the rows of A_r above its own start of
the ρ bisection / STEP_DOWN, and every resample then selects exactly what the full route
(every A_r on the client, itself checked against refits in test_stability_hsic_onepass)
selects — in one pass, on feature blocks, sample blocks, CSR and in memory; a resample
whose bisection goes below its candidates is recomputed by the full route."""

import logging

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import fsdask
from fsdask.linalg.colstats import merged_screen
from fsdask.linalg.execution import Execution
from fsdask.linalg.tall import row_norm2
from fsdask.methods.hsic.matrix import scaled_A
from fsdask.stability import Stability, draw_subsamples, hsicpass, hsictop

P = hsictop.MIN_FEATURES + 3000


def _data(seed=0, n=40, p=P, classes=2):
    """Counts, half of them zero, with five planted features, features constant in a half
    or everywhere, and a large offset."""
    rng = np.random.default_rng(seed)
    X = (rng.poisson(3.0, size=(n, p)) * (rng.random((n, p)) < 0.5)).astype(np.float64)
    y = np.arange(n) % classes
    X[:, :5] += 8.0 * (y[:, None] == 1)
    X[:, 7] = 0.0
    X[0, 7] = 4.0  # nonzero in one sample: constant within every half without it
    X[:, 8] = 2.0  # constant everywhere: screened out
    X[:, 9] += 1000.0
    return X, y


def _layout(X, layout):
    if layout == "memory":
        return X
    if layout == "csr-samples":
        return da.from_array(sp.csr_matrix(X), chunks=(13, -1), asarray=False)
    if layout == "dense-samples":
        return da.from_array(X, chunks=(13, 6000))
    return da.from_array(X, chunks=(-1, 5000))


def _full_route(monkeypatch, est, X, y, R, seed):
    with monkeypatch.context() as m:
        m.setattr(hsictop, "candidate_k", lambda est, p: None)
        return Stability(est, n_resamples=R, random_state=seed).fit(X, y)


@pytest.mark.parametrize("layout", ["dense-features", "dense-samples", "csr-samples", "memory"])
def test_candidates_select_as_the_full_route_in_one_pass(monkeypatch, layout):
    X, y = _data()
    est = fsdask.SparseHSIC(n_features_to_select=6)
    calls = []
    real = hsictop.candidate_selections
    monkeypatch.setattr(hsictop, "candidate_selections", lambda *a: calls.append(1) or real(*a))
    with dask.config.set(scheduler="threads"):
        st = Stability(est, n_resamples=12, random_state=4).fit(_layout(X, layout), y)
    full = _full_route(monkeypatch, est, X, y, 12, 4)
    assert calls and st.n_passes_ == 1
    np.testing.assert_array_equal(st.frequency_, full.frequency_)
    np.testing.assert_array_equal(
        st.result_["plain_weight"].values, full.result_["plain_weight"].values
    )
    assert st.frequency_[:5].mean() > 0.8 and st.frequency_[8] == 0


@pytest.mark.parametrize(
    "params, response",
    [
        ({"n_features_to_select": 5, "standardize": False}, "labels"),
        ({"n_features_to_select": 4, "n_components": 2}, "three classes"),
        ({"n_features_to_select": 3, "response": "rbf"}, "continuous"),
        ({"n_features_to_select": 2e-4}, "labels"),
    ],
)
def test_candidates_with_other_responses_and_parameters(monkeypatch, params, response):
    X, y = _data(1, classes=3 if response == "three classes" else 2)
    if response == "continuous":
        y = X[:, 0] + X[:, 1] + np.random.default_rng(1).normal(size=X.shape[0])
    est = fsdask.SparseHSIC(**params)
    Xd = _layout(X, "dense-features")
    st = Stability(est, n_resamples=8, random_state=2).fit(Xd, y)
    full = _full_route(monkeypatch, est, Xd, y, 8, 2)
    assert st.n_passes_ == 1
    np.testing.assert_array_equal(st.frequency_, full.frequency_)
    np.testing.assert_array_equal(
        st.result_["plain_weight"].values, full.result_["plain_weight"].values
    )


def test_a_resample_below_its_candidates_is_recomputed_by_the_full_route(monkeypatch, caplog):
    X, y = _data(2)
    est = fsdask.SparseHSIC(n_features_to_select=6)
    Xd = _layout(X, "dense-features")
    full = _full_route(monkeypatch, est, Xd, y, 6, 1)
    # blocks that keep only the rows above the bisection's start: its first step below it
    # needs rows they left out, for every resample
    monkeypatch.setattr(hsictop, "STEP_DOWN", 1.0)
    with caplog.at_level(logging.INFO, "fsdask"):
        st = Stability(est, n_resamples=6, random_state=1).fit(Xd, y)
    assert any("7 of 7 resamples needed rows" in r.getMessage() for r in caplog.records)
    assert st.n_passes_ == 2
    np.testing.assert_array_equal(st.frequency_, full.frequency_)
    np.testing.assert_array_equal(
        st.result_["plain_weight"].values, full.result_["plain_weight"].values
    )


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("standardize", [True, False])
def test_compiled_rows_have_the_full_routes_roundings(classes, standardize):
    """The exact kernel's rows and ‖A_i‖² equal, bit for bit, those of resample_stats,
    scaled_A and row_norm2 — with a class missing from some resamples and features
    constant in some —, and the approximation is within 10⁻⁹ of them or says it is
    unsure."""
    rng = np.random.default_rng(classes)
    n, p = 60, 3000
    X = rng.normal(size=(n, p)) * rng.exponential(size=p) + 100.0
    X[rng.permutation(n)[: n // 2], 9] = 0.0
    X[:, 11] = np.round(X[:, 11])
    X[:, 12] = 0.0
    X[0, 12] = 1.0  # constant in every half without sample 0
    X[:, 13] = 5.0  # constant everywhere: dropped by the screen
    y = rng.integers(0, classes, n)
    y[:2] = classes  # a rare class: absent from some halves
    rows = [None, *draw_subsamples(n, 20, random_state=1)]
    factors = hsicpass.resample_factors(fsdask.SparseHSIC(), y, rows)
    layout = hsicpass.layout_of(factors, y, rows, n)
    assert len(set(layout.widths)) == 2  # some resample lacks the rare class
    sums = hsicpass.resample_sums(Execution(), X, layout)
    screen = merged_screen(sums)
    valid = (screen[0] == 0) & (screen[1] != screen[2])
    idx = np.flatnonzero(valid)
    V = len(rows)
    offsets = np.arange(V + 1) * idx.size
    got, norms = hsictop.resample_rows(sums, layout, np.tile(idx, V), offsets, standardize)
    approx, unsure, varies = hsictop.approx_norm2(sums, layout, valid, standardize)
    assert varies.all() and np.isnan(approx[:, ~valid]).all() and not unsure[:, ~valid].any()
    for v in range(V):
        stats = hsicpass.resample_stats(sums, v, layout, idx)
        moves = stats[-2] != 0
        A = scaled_A(stats, moves, stats[-1] if standardize else None, None)
        part = slice(offsets[v], offsets[v + 1])
        np.testing.assert_array_equal(np.abs(got[part, : layout.widths[v]]), np.abs(A))
        np.testing.assert_array_equal(norms[part], row_norm2(A))  # a constant row: ±0
        sure = ~unsure[v, idx]
        np.testing.assert_allclose(approx[v, idx][sure], norms[part][sure], rtol=1e-9, atol=0)
        assert np.isnan(approx[v, idx][~sure]).all()
    assert unsure.sum() < 0.01 * unsure.size  # few: most columns need no exact value


def test_the_route_is_taken_only_where_it_pays():
    est = fsdask.SparseHSIC
    assert hsictop.candidate_k(est(n_features_to_select=10), P) == 10
    assert hsictop.candidate_k(est(n_features_to_select=0.5), P) is None  # most of A
    assert hsictop.candidate_k(est(), P) is None  # ρ = "auto": its level needs every row
    assert hsictop.candidate_k(est(n_features_to_select=10), 1000) is None  # small p
    assert hsictop.candidate_k(est(n_features_to_select=10, on_constant="error"), P) is None


def test_a_small_budget_caps_the_candidates_and_the_result_stands(monkeypatch, caplog):
    """At the least budget the route takes (16 k candidate rows per resample), blocks
    keep their largest rows only; resamples that then need more are recomputed — here
    by refits, as every A_r of theirs does not fit either."""
    X, y = _data(3)
    est = fsdask.SparseHSIC(n_features_to_select=6)
    Xd = _layout(X, "dense-features")
    full = _full_route(monkeypatch, est, Xd, y, 8, 5)
    budget = int(2 * 9 * 8 * (2 + 2) * 16 * 6 * 1.05)  # V = 9 resamples, c = 2
    with dask.config.set({"fsdask.memory-budget": budget}), caplog.at_level(logging.INFO, "fsdask"):
        st = Stability(est, n_resamples=8, random_state=5).fit(Xd, y)
    said = [r.getMessage() for r in caplog.records]
    assert not any("refitting each of the 9" in m for m in said)
    assert any("resamples needed rows of A below" in m for m in said)
    np.testing.assert_array_equal(st.frequency_, full.frequency_)
    # the plain fit refitted: its weights to rounding
    np.testing.assert_allclose(
        st.result_["plain_weight"].values, full.result_["plain_weight"].values, rtol=1e-9
    )


@pytest.fixture(scope="module")
def wide_store(tmp_path_factory):
    X, y = _data(4, n=30)
    path = tmp_path_factory.mktemp("cand") / "x.zarr"
    fsdask.ingest(X.astype(np.float32), path, y=y, chunk_bytes=30 * 4 * 6000)
    return fsdask.open_dataset(path)


@pytest.mark.cluster
def test_candidates_on_a_2_process_cluster_as_on_threads(monkeypatch, cluster, wide_store):
    """The blocks' candidates are made on the workers and fetched as they finish: the same
    selections as on threads."""
    from fsdask.cluster import scheduler

    calls = []
    real = hsictop.candidate_selections
    monkeypatch.setattr(hsictop, "candidate_selections", lambda *a: calls.append(1) or real(*a))

    def fit():
        est = fsdask.SparseHSIC(n_features_to_select=5)
        return Stability(est, n_resamples=10, random_state=8).fit(wide_store)

    ref = fit()
    with scheduler(cluster.scheduler.address):
        got = fit()
    assert len(calls) == 2 and got.n_passes_ == ref.n_passes_ == 1
    np.testing.assert_array_equal(got.frequency_, ref.frequency_)
    np.testing.assert_array_equal(
        got.result_["plain_weight"].values, ref.result_["plain_weight"].values
    )
    assert ref.frequency_[:5].mean() > 0.6 > ref.frequency_[5:].mean()


@pytest.mark.parametrize("share", [1.0, 0.004])
def test_a_block_keeps_exactly_the_rows_above_its_floor(share):
    """Streamed a slice at a time, a block's candidates are exactly its rows whose exact
    ‖A_i‖² exceeds its floor; uncapped, the floor is the block's start of the bisection /
    STEP_DOWN (less the slack); capped by a small budget share, at most the cap are kept."""
    rng = np.random.default_rng(7)
    n, p, k = 40, 3000, 5
    X = rng.normal(size=(n, p))
    y = np.arange(n) % 2
    X[y == 1, :4] += 1.5
    rows = [None, *draw_subsamples(n, 10, random_state=2)]
    factors = hsicpass.resample_factors(fsdask.SparseHSIC(), y, rows)
    layout = hsicpass.layout_of(factors, y, rows, n)
    sums = hsicpass.resample_sums(Execution(), X, layout)
    slices = (sums[:, a : a + 256] for a in range(0, p, 256))
    got = hsictop.block_candidates(slices, 0, p, layout=layout, k=k, standardize=True, share=share)
    V, idx = len(rows), np.arange(p)
    _, exact = hsictop.resample_rows(sums, layout, np.tile(idx, V), np.arange(V + 1) * p, True)
    exact = exact.reshape(V, p)
    for v in range(V):
        kept = got.cols[got.offsets[v] : got.offsets[v + 1]]
        np.testing.assert_array_equal(kept, np.flatnonzero(exact[v] > got.floor[v]))
        np.testing.assert_array_equal(
            got.norm2[got.offsets[v] : got.offsets[v + 1]], exact[v, kept]
        )
        top = np.sort(exact[v])[::-1]
        start = min(top[k - 1], top[0] / layout.widths[v]) / hsictop.STEP_DOWN
        if share == 1.0:
            assert start * (1 - hsictop.SLACK) <= got.floor[v] <= start
        else:
            assert kept.size <= max(2 * k, int(share * p)) and got.floor[v] >= start * 0.999
