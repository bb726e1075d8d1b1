"""SparseHSIC (Zarkoob 2010, ch. 3) against a literal dense NumPy SparsePM (tests/hsic_dense.py)."""

import os
import sys

import dask
import dask.array as da
import numpy as np
import pytest

import fsdask
from fsdask.errors import InputError, ParameterError
from fsdask.methods import hsic
from fsdask.testing import SelectorChecks

sys.path.insert(0, os.path.dirname(__file__))
import hsic_dense as ref  # noqa: E402


def _same(res, dense, tol=1e-10):
    M, N, u, sigma, v, trace = dense
    np.testing.assert_array_equal(np.flatnonzero(res.M), M)
    np.testing.assert_array_equal(np.flatnonzero(res.N), N)
    np.testing.assert_allclose(res.u, u, atol=tol, rtol=0)
    np.testing.assert_allclose(res.v, v, atol=tol, rtol=0)
    assert abs(res.sigma - sigma) <= tol
    np.testing.assert_allclose(res.objective, trace, atol=tol, rtol=0)


def _planted_A(rng, m=300, c=4):
    """A with a planted block plus noise: rows 0–19 × columns 0–1 strong."""
    A = 0.05 * rng.standard_normal((m, c))
    A[:20, :2] += rng.uniform(0.5, 1.0, (20, 1)) * np.array([1.0, 0.8])
    return A


@pytest.mark.parametrize("rho,gamma", [(0.0, 1.1), (1e-3, 1.05), (0.02, 1.1), (0.2, 2.0)])
def test_sparse_pm_matches_dense_reference(rng, rho, gamma):
    A = _planted_A(rng, m=120)
    dense = ref.sparse_pm(A, gamma, rho)
    _same(hsic.sparse_pm(A, gamma, rho), dense)
    for chunks in (120, 17):  # streaming row-wise steps over a dask A
        _same(
            hsic.sparse_pm(da.from_array(A, chunks=(chunks, -1)), gamma, rho, memory_budget=0),
            dense,
        )


def test_objective_trace_never_decreases(rng):
    for _ in range(30):
        m, c = rng.integers(5, 80), rng.integers(1, 9)
        A = rng.standard_normal((m, c)) * rng.uniform(0.1, 3, size=(m, 1))
        for rho in (0.0, 0.01, 0.3):
            gamma = 1.0 + rng.uniform(0.01, 1.5)
            res = hsic.sparse_pm(A, gamma, rho)
            t = np.asarray(res.objective)
            assert np.all(np.diff(t) >= -1e-12 * max(1.0, abs(t).max())), t
            # the separable trace equals (3.4) evaluated from its definition at the end
            if res.M.any():
                f = ref.objective(
                    A,
                    np.flatnonzero(res.M),
                    np.flatnonzero(res.N),
                    res.u,
                    res.sigma,
                    res.v,
                    gamma,
                    rho,
                )
                assert abs(f - t[-1]) <= 1e-10 * max(1.0, abs(f))
    # and a case where the trace really moves more than once
    A = _planted_A(rng, 200, 6)
    t = hsic.sparse_pm(A, 1.1, 0.005).objective
    assert t[-1] > t[0]


def test_section_331_example_power_method_mixes_sparsepm_separates():
    """§3.3.1: F has two nearly equal singular values (blocks 1 and 0.99) and E = 0.1·11ᵀ.
    The thesis' own matrix did not survive in the text; this one has the property it describes."""
    F = np.zeros((4, 4))
    F[:2, :2] = 1.0
    F[2:, 2:] = 0.99
    A = F + 0.1
    _, _, v = hsic.power_method(A)
    v = np.abs(v)
    assert v.min() > 0.45 and v.max() < 0.55  # ≈ [1 1 1 1]/2: the blocks are mixed
    res = hsic.sparse_pm(A, 1.1, 0.05)
    np.testing.assert_array_equal(res.N, [True, True, False, False])  # ≈ [1 1 0 0]
    np.testing.assert_array_equal(res.M, [True, True, False, False])
    np.testing.assert_allclose(np.abs(res.v), [2**-0.5, 2**-0.5, 0, 0], atol=1e-12)
    # R1D: after the downdate the second block is found
    comps = hsic.r1d(A, 2, 1.1, 0.05)
    np.testing.assert_array_equal(comps[1].M, [False, False, True, True])
    np.testing.assert_array_equal(comps[1].N, [False, False, True, True])


def _problem(rng, n=30, p=97, classes=3):
    X = rng.standard_normal((n, p))
    y = np.arange(n) % classes
    X[:, :5] += 1.5 * (y[:, None] == 1)
    X[:, 5:8] -= 1.5 * (y[:, None] == 2)
    return X, y


@pytest.mark.parametrize("chunk", [97, 10, 33])
@pytest.mark.parametrize("dense_A", [True, False])
def test_estimator_matches_dense_on_any_chunking(rng, chunk, dense_A):
    X, y = _problem(rng)
    A = ref.hsic_A(X, ref.class_delta(y))
    rho = 2e-5
    M, N, u, sigma, v, trace = ref.sparse_pm(A, 1.1, rho)
    est = fsdask.SparseHSIC(
        rho=rho, standardize=False, memory_budget=2**30 if dense_A else 600, rho_grid=None
    )
    est.fit(da.from_array(X, chunks=(30, chunk)), y)
    np.testing.assert_array_equal(est.get_support(indices=True), M)
    np.testing.assert_allclose(est.components_[0], u, atol=1e-10, rtol=0)
    np.testing.assert_allclose(est.scores_, np.abs(u), atol=1e-10, rtol=0)
    np.testing.assert_allclose(est.v_[0], v, atol=1e-10, rtol=0)
    assert abs(est.sigma_[0] - sigma) < 1e-10
    np.testing.assert_allclose(est.objective_, trace, atol=1e-10, rtol=0)
    assert set(M) >= set(range(5))


def test_estimator_on_cluster_and_threads(rng, cluster):
    X, y = _problem(rng)
    A = ref.hsic_A(X, ref.class_delta(y))
    M, N, u, sigma, v, _ = ref.sparse_pm(A, 1.1, 2e-5)
    Xd = da.from_array(X, chunks=(30, 20))
    for sched, dense_A in (("threads", False), (cluster, True), (cluster, False)):
        if True:
            with dask.config.set(scheduler=sched):
                est = fsdask.SparseHSIC(
                    rho=2e-5,
                    standardize=False,
                    memory_budget=2**30 if dense_A else 600,
                    rho_grid=None,
                ).fit(Xd, y)
            np.testing.assert_array_equal(est.get_support(indices=True), M)
            np.testing.assert_allclose(est.components_[0], u, atol=1e-10, rtol=0)
            assert abs(est.sigma_[0] - sigma) < 1e-10


def test_responses_continuous_multivariate_rbf_standardize(rng):
    n, p = 40, 25
    X = rng.standard_normal((n, p))
    y = X[:, 3] + 0.5 * X[:, 7] + 0.1 * rng.standard_normal(n)
    ys = (y - y.mean()) / y.std(ddof=1)
    A = ref.hsic_A(X, ys[None, :])
    M = ref.sparse_pm(A, 1.1, 0.05)[0]
    est = fsdask.SparseHSIC(rho=0.05, standardize=False).fit(X, y)
    assert est.response_ == "continuous"
    np.testing.assert_array_equal(est.get_support(indices=True), M)
    np.testing.assert_allclose(est.hsic_A_, A, atol=1e-12)
    assert {3, 7} <= set(M)
    # multivariate: standardised columns of Y
    Y = np.c_[y, X[:, 11] + 0.1 * rng.standard_normal(n)]
    Ys = (Y - Y.mean(0)) / Y.std(0, ddof=1)
    est = fsdask.SparseHSIC(rho=0.01, standardize=False).fit(X, Y)
    assert est.response_ == "multivariate"
    np.testing.assert_allclose(est.hsic_A_, ref.hsic_A(X, Ys.T), atol=1e-12)
    # standardize=True: A of the standardised features
    Xs = X * rng.uniform(0.1, 10, p)
    est = fsdask.SparseHSIC(rho=0.05, standardize=True).fit(Xs, y)
    np.testing.assert_allclose(
        est.hsic_A_, ref.hsic_A(Xs / Xs.std(0, ddof=1), ys[None, :]), atol=1e-12
    )
    # RBF: a factor of HBH of the documented rank, picking up a non-monotone dependence
    z = rng.uniform(-2, 2, 200)
    delta, kind, info = hsic.response_factor(z, "rbf")
    H = np.eye(200) - 1 / 200
    d = z[:, None] - z[None, :]
    zs = (z - z.mean()) / z.std(ddof=1)
    B = np.exp(-((zs[:, None] - zs[None, :]) ** 2) / (2 * info["kernel_width"] ** 2))
    assert (
        info["kernel_trace_kept"] >= hsic.RBF_TRACE_SHARE
        or info["kernel_rank"] == hsic.RBF_MAX_RANK
    )
    assert np.linalg.norm(H @ B @ H - delta.T @ delta) <= 0.05 * np.linalg.norm(H @ B @ H)
    Xz = rng.standard_normal((200, 10))
    Xz[:, 6] = z**2 + 0.1 * rng.standard_normal(200)  # invisible to a linear kernel on z
    est = fsdask.SparseHSIC(response="rbf", n_features_to_select=1).fit(Xz, z)
    assert est.get_support(indices=True).tolist() == [6]
    assert d.shape == (200, 200)


def test_n_features_to_select_rho_path_and_result(rng):
    X, y = _problem(rng, n=40, p=120, classes=2)
    for k in (1, 3, 8, 20):
        est = fsdask.SparseHSIC(n_features_to_select=k).fit(X, y)
        assert est.get_support().sum() == k
        assert est.result_["selected"].values.sum() == k
    r = est.result_
    assert "rho" not in r.coords  # rho_grid="auto": the path is not computed by fit
    est = fsdask.SparseHSIC(n_features_to_select=20, rho_grid="default").fit(X, y)
    r = est.result_
    assert "rho" in r.coords and r["rho_path_n_selected"].dims == ("rho",)
    counts = r["rho_path_n_selected"].values
    assert counts[0] > counts[-1] and counts[-1] == 0
    # the bracketed bisection on a dask (streamed) A finds the same selection as in memory
    A = est.hsic_A_
    rho_np, res_np, c_np = hsic.rho_for_k(A, 8)
    rho_da, res_da, c_da = hsic.rho_for_k(da.from_array(A, chunks=(25, -1)), 8, memory_budget=0)
    assert c_np == c_da == 8 and rho_np == rho_da
    np.testing.assert_array_equal(res_np[0].M, res_da[0].M)
    path = hsic.rho_path(est.hsic_A_, [1e-6, 1e-4, 1.0])
    assert path["n_selected"][0] >= path["n_selected"][1] >= path["n_selected"][2] == 0
    # ranking: the selected first, by |u|
    top = np.argsort(est.ranking_)[:20]
    assert set(top) == set(est.get_support(indices=True))
    assert np.all(np.diff(est.scores_[top]) <= 0)


def test_r1d_union_and_components(rng):
    X, y = _problem(rng, n=45, p=60, classes=3)
    est = fsdask.SparseHSIC(rho=4e-5, n_components=3, standardize=False).fit(X, y)
    comp = est.result_["selected_by_component"].values
    assert est.components_.shape == (est.n_components_, 60)
    sup = est.get_support()
    np.testing.assert_array_equal(sup, comp >= 0)
    for k in range(est.n_components_):
        assert np.all(comp[np.abs(est.components_[k]) > 0] <= k)
    # against the dense reference with explicit downdates
    A = ref.hsic_A(X, ref.class_delta(y))
    union = set()
    for k in range(est.n_components_):
        M, N, u, sigma, v, _ = ref.sparse_pm(A, 1.1, 4e-5)
        np.testing.assert_allclose(est.components_[k], u, atol=1e-10)
        union |= set(M)
        A = A.copy()
        A[np.ix_(M, N)] -= sigma * np.outer(u[M], v[N])
    assert union == set(np.flatnonzero(sup))


def test_constant_features_never_selected_and_single_pass(rng):
    X, y = _problem(rng, n=30, p=40)
    X[:, 2] = 3.0
    est = fsdask.SparseHSIC(n_features_to_select=10).fit(X, y)
    assert not est.get_support()[2] and est.ranking_[2] == 40
    with pytest.raises(InputError, match="constant"):
        fsdask.SparseHSIC(on_constant="error").fit(X, y)
    # the fit reads X once: count block reads
    reads = []

    def load(block):
        if block.shape[0] == 30:  # (dask also calls it on tiny arrays to infer the dtype)
            reads.append(1)
        return block

    Xd = da.from_array(X, chunks=(30, 10)).map_blocks(load)
    fsdask.SparseHSIC(n_features_to_select=5, rho_grid=None).fit(Xd, y)
    assert len(reads) == 4


def test_bad_input_specific_to_hsic(rng):
    X, y = _problem(rng, n=30, p=20)
    cont = rng.standard_normal(3000)
    with pytest.raises(InputError, match="looks like a continuous response"):
        fsdask.SparseHSIC(response="categorical").fit(rng.standard_normal((3000, 5)), cont)
    with pytest.raises(InputError, match="single class"):
        fsdask.SparseHSIC().fit(X, np.zeros(30, int))
    with pytest.raises(ParameterError, match="'rho' parameter"):
        fsdask.SparseHSIC(rho=-0.1).fit(X, y)
    for g in (1.0, 0.9):
        with pytest.raises(ParameterError, match="gamma"):
            fsdask.SparseHSIC(gamma=g).fit(X, y)
    yc = rng.standard_normal(30)
    yc[3] = np.nan
    with pytest.raises(InputError, match="NaN/Inf"):
        fsdask.SparseHSIC().fit(X, yc)
    with pytest.raises(InputError, match="constant"):
        fsdask.SparseHSIC().fit(X, np.ones(30))
    with pytest.raises(ParameterError, match="selects no feature"):
        fsdask.SparseHSIC(rho=10.0).fit(X, y)


def test_cli_select(tmp_path, rng):
    from fsdask.cli import main
    from fsdask.datasets import write_synthetic, zarkoob_regression

    store = str(tmp_path / "z.zarr")
    write_synthetic(zarkoob_regression(n_samples=60, n_features=300, random_state=3), store)
    out = str(tmp_path / "r.zarr")
    assert (
        main(["select", store, "--method", "hsic", "--param", "n_features_to_select=3", "-o", out])
        == 0
    )
    import xarray as xr

    r = xr.open_zarr(out, consolidated=False)
    assert set(np.flatnonzero(r["selected"].values)) == {4, 9, 14}


def test_fraction_transform_and_xarray(rng):
    import xarray as xr

    X, y = _problem(rng, n=30, p=50, classes=2)
    Xa = xr.DataArray(
        X, dims=("sample", "feature"), coords={"feature": [f"g{i}" for i in range(50)]}
    )
    est = fsdask.SparseHSIC(n_features_to_select=0.1, rho_grid=None).fit(Xa, y)
    assert est.get_support().sum() == 5
    out = est.transform(Xa)
    assert isinstance(out, xr.DataArray) and out.shape == (30, 5)
    assert list(out["feature"].values) == [f"g{i}" for i in est.get_support(indices=True)]
    lazy = est.transform(da.from_array(X, chunks=(30, 10)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), X[:, est.get_support()])


def test_fixed_rho_fit_does_not_run_the_path_and_lazy_path_matches(rng, monkeypatch):
    X, y = _problem(rng, n=40, p=300, classes=3)
    calls = []
    real = hsic.rho_path
    monkeypatch.setattr(
        hsic.estimator, "rho_path", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    for kw in ({"rho": 1e-4}, {"n_features_to_select": 5}):
        est = fsdask.SparseHSIC(**kw).fit(X, y)
        assert calls == [], kw
    lazy = est.rho_path_  # computed on first access, once
    assert calls == [1] and est.rho_path_ is lazy
    eager = fsdask.SparseHSIC(n_features_to_select=5, rho_grid="default").fit(X, y).rho_path_
    for key in ("rho", "n_selected", "objective"):
        np.testing.assert_array_equal(lazy[key], eager[key])
    est.fit(X, y[::-1].copy())  # a refit forgets the old path
    assert "rho_path_" not in est.__dict__


def test_rho_path_screened_rows_match_every_row(rng):
    """The path on the rows above min ρ equals R1D on all of A, ρ by ρ; the default grid's
    lower end keeps at most max_rows candidate rows."""
    X, y = _problem(rng, n=40, p=400, classes=3)
    A = fsdask.SparseHSIC(n_features_to_select=5).fit(X, y).hsic_A_
    norm2 = (A * A).sum(axis=1)
    grid = np.geomspace(np.sort(norm2)[-60], hsic.rho_max(A), 7)
    path = hsic.rho_path(A, grid, n_components=2)
    for rho, count, obj in zip(grid, path["n_selected"], path["objective"]):
        res, B = [], A.copy()
        for _ in range(2):  # R1D on all rows, no screening
            r = hsic.sparse_pm_rows(B, (B * B).sum(axis=1), 1.1, rho, 1e-12, 200)
            if not r.M.any():
                break
            res.append(r)
            B = hsic.downdate(B, r)
        assert count == hsic.selection(res, A.shape[0])[0].sum()
        np.testing.assert_allclose(obj, sum(r.objective[-1] for r in res), rtol=1e-9)
    assert path["n_selected"][0] > 0
    capped = hsic.rho_path(A, max_rows=30)
    assert (norm2 > capped["rho"][0]).sum() <= 30 and capped["n_selected"].max() <= 30
    assert hsic.rho_path(A, max_rows=None)["rho"][0] == pytest.approx(hsic.rho_max(A) * 1e-4)


def _planted(rng, n=80, p=3000, relevant=(5, 900, 2100)):
    y = rng.integers(0, 2, n)
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 50, p)  # features on any scale
    for j in relevant:
        X[:, j] += 1.2 * X[:, j].std() * (2 * y - 1)
    return X, y, np.array(relevant)


def test_default_rho_is_the_noise_level_and_scale_free(rng):
    """rho="auto" finds planted features on raw data whatever the units, and its value is the
    Bonferroni level of p independent features (not the thesis' hand-picked 0.015)."""
    X, y, rel = _planted(rng)
    est = fsdask.SparseHSIC().fit(X, y)
    assert set(rel) <= set(np.flatnonzero(est.get_support())), est.get_support().sum()
    assert est.get_support().sum() <= 10
    again = fsdask.SparseHSIC().fit(X * 1e4, y)
    np.testing.assert_array_equal(again.get_support(), est.get_support())
    assert np.isclose(again.rho_, est.rho_, rtol=1e-6)  # standardised: ρ is unit-free
    raw = fsdask.SparseHSIC(standardize=False)
    a, b = raw.fit(X, y).rho_, fsdask.SparseHSIC(standardize=False).fit(X * 1e4, y).rho_
    assert np.isclose(b, a * 1e8, rtol=1e-6)  # unstandardised: ρ follows the scale of A²


def test_default_rho_on_pure_noise_warns_and_still_selects(rng):
    X, y = rng.standard_normal((50, 2000)), rng.integers(0, 2, 50)
    with pytest.warns(UserWarning, match="n_features_to_select=K"):
        est = fsdask.SparseHSIC().fit(X, y)
    assert 1 <= est.get_support().sum() <= 20


def test_rho_noise_matches_the_null_tail(rng):
    """Under independence the largest of p rows exceeds ρ·c in at most about α of the draws (the
    χ² tail overstates that of standardised features at small n: ~1 % at n = 40), never 0."""
    n, p, trials = 40, 500, 400
    y = rng.integers(0, 3, n)
    delta, _, _ = hsic.response_factor(y, "categorical")
    exceed = 0
    for _ in range(trials):
        X = rng.standard_normal((n, p))
        X = (X - X.mean(0)) / X.std(0, ddof=1)
        Dc = delta - delta.mean(axis=1, keepdims=True)
        A = X.T @ Dc.T / (n - 1)
        norm2 = (A * A).sum(axis=1)
        exceed += norm2.max() > hsic.rho_noise(norm2, delta) * delta.shape[0]
    assert 0 < exceed / trials < 0.1, (
        exceed
    )  # α = 0.05, with the Satterthwaite/median approximations


class TestSparseHSIC(SelectorChecks):
    def make_estimator(self, **params):
        return fsdask.SparseHSIC(**{"n_features_to_select": 3, **params})


class TestSparseHSICChunkedA(TestSparseHSIC):
    """A kept as a persisted, row-chunked dask array (each SparsePM step a pass over it)."""

    def make_estimator(self, **params):
        return fsdask.SparseHSIC(**{"n_features_to_select": 3, "memory_budget": 64, **params})
