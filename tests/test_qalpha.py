"""Q-α (Wolf & Shashua 2005): the Dask path against a dense NumPy transcription of the paper."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import qalpha_dense as dense

from fsdask.datasets import qalpha_clusters, weston_linear
from fsdask.errors import ConvergenceWarning, InputError, ParameterError
from fsdask.methods.qalpha import QAlpha, auto_cut, normalize_block
from fsdask.testing import SelectorChecks

pytestmark = pytest.mark.filterwarnings("ignore::fsdask.errors.ConvergenceWarning")


@pytest.fixture(params=["memory", "dask"])
def route(request):
    """Q-α's two routes: a small X read into memory once (the default), or a graph per pass."""
    limit = "32MiB" if request.param == "memory" else 0
    with dask.config.set({"fsdask.hold-x-below": limit}):
        yield request.param


@pytest.fixture(scope="module")
def weston():
    syn = weston_linear(n_samples=50, n_features=202, random_state=1)
    return syn.X.values.astype(np.float64), syn.y


def _phi_sessions(M):
    """§6's explicit feature map φ(m) = [vec(m^s m^sᵀ)]_s over sections of 8 samples: (D × features)."""
    return np.concatenate(
        [
            (M[s : s + 8, None, :] * M[None, s : s + 8, :]).reshape(-1, M.shape[1])
            for s in range(0, M.shape[0], 8)
        ]
    )


def _sessions_kernel(A, B):
    """Σ_s (m_i^sᵀ m_j^s)² of the centred, unit-norm φ, through the explicit map."""
    return normalize_block(_phi_sessions(A)).T @ normalize_block(_phi_sessions(B))


def _rbf(A, B):
    d = (A * A).sum(0)[:, None] + (B * B).sum(0)[None, :] - 2 * A.T @ B
    return np.exp(-np.maximum(d, 0) / 2)


@pytest.mark.parametrize("variant", ["power", "basic", "ritz", "laplacian", "gap"])
def test_unsupervised_variants_match_dense(weston, variant, route):
    X, _ = weston
    if variant == "gap":  # W has qk + q² columns: keep q small
        X = X[:20]
    a, obj, _ = dense.qalpha_dense(X, 2, variant, n_iter=6)
    est = QAlpha(k=2, variant=variant, tol=0, max_iter=6).fit(X)
    np.testing.assert_allclose(est.scores_, a, atol=1e-8)
    np.testing.assert_allclose(est.objective_, obj, rtol=1e-10)
    assert est.n_iter_ == 6 and est.converged_ is False
    assert abs(np.linalg.norm(est.scores_) - 1) < 1e-12 and est.scores_.sum() > 0


def test_power_matches_dense_n3000_chunked():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3000))
    X[:10, :20] += 3.0  # a planted cluster in 20 features
    a, obj, _ = dense.qalpha_dense(X, 3, "power", n_iter=3)
    Xd = da.from_array(X, chunks=(30, 700))
    with dask.config.set({"fsdask.hold-x-below": 0}):  # X is small: keep it on dask
        est = QAlpha(k=3, tol=0, max_iter=3).fit(Xd)
    np.testing.assert_allclose(est.scores_, a, atol=1e-8)
    np.testing.assert_allclose(est.objective_, obj, rtol=1e-10)
    # one pass over X per iteration: A⁽⁰⁾, the first Gram, then α/A_α fused with the next Gram
    assert est.n_passes_ == est.n_iter_ + 2
    assert set(np.argsort(-est.scores_)[:20]) == set(range(20))


@pytest.mark.parametrize("solver", ["gram", "tsqr", "lanczos"])
def test_alpha_solvers_agree(weston, solver, route):
    X, _ = weston
    a, obj, _ = dense.qalpha_dense(X, 3, "power", n_iter=4)
    est = QAlpha(k=3, tol=0, max_iter=4, alpha_solver=solver).fit(da.from_array(X, chunks=(50, 64)))
    np.testing.assert_allclose(est.scores_, a, atol=1e-8)
    np.testing.assert_allclose(est.objective_, obj, rtol=1e-10)


@pytest.mark.parametrize(
    "variant,solver",
    [("power", "auto"), ("basic", "auto"), ("power", "tsqr"), ("power", "lanczos")],
)
def test_supervised_matches_dense(weston, variant, solver, route):
    X, y = weston
    a, obj = dense.supervised_dense(X, y, gamma=0.5, variant=variant, n_iter=5)
    est = QAlpha(variant=variant, tol=0, max_iter=5, alpha_solver=solver).fit(
        X, y
    )  # supervised: auto with y
    assert est.result_.attrs["variant"] == "supervised"
    np.testing.assert_allclose(est.scores_, a, atol=1e-8)
    np.testing.assert_allclose(est.objective_, obj, rtol=1e-10)


@pytest.mark.parametrize("variant", ["power", "basic", "ritz", "laplacian", "supervised"])
def test_float32_data_gram_in_float32_within_its_rounding(weston, variant, route):
    """float32 data: the Gram's products are float32 (fsdask.gram-precision "data"), and α
    stays within float32 rounding of the paper's algorithm on the same values in float64;
    "float64" restores double products and agreement to 1e-12."""
    X, y = weston
    X32 = X.astype(np.float32)
    X = X32.astype(np.float64)  # the same values: only the products' precision differs
    sup = variant == "supervised"
    if sup:
        a, obj = dense.supervised_dense(X, y, gamma=0.5, variant="power", n_iter=5)
    else:
        a, obj, _ = dense.qalpha_dense(X, 2, variant, n_iter=5)

    def fit(Xin):
        est = QAlpha(k=2, variant="power" if sup else variant, tol=0, max_iter=5)
        return est.fit(Xin, y) if sup else est.fit(Xin)

    est = fit(X32)
    assert est.result_.attrs["gram_dtype"] == "float32"
    np.testing.assert_allclose(est.scores_, a, atol=1e-6)
    np.testing.assert_allclose(est.objective_, obj, rtol=1e-6)
    assert np.abs(est.scores_ - a).max() > 1e-12  # the float32 products were really used
    with dask.config.set({"fsdask.gram-precision": "float64"}):
        est = fit(X32)
    assert est.result_.attrs["gram_dtype"] == "float64"
    np.testing.assert_allclose(est.scores_, a, atol=1e-12)
    assert fit(X).result_.attrs["gram_dtype"] == "float64"  # float64 data: double products


@pytest.mark.parametrize("variant", ["power", "laplacian", "basic"])
def test_batch_size_does_not_change_the_fit(variant, monkeypatch):
    """Features are preprocessed in batches of 2048–8192 (as wide as the tall matrix allows):
    20 000 features in one block give the same fit in batches of 8192 and of 2048."""
    import fsdask.methods.qalpha.tall as qa

    rng = np.random.default_rng(3)
    Xd = da.from_array(rng.standard_normal((30, 20_000)), chunks=(30, 20_000))

    def fit():
        with dask.config.set({"fsdask.hold-x-below": 0}):
            return QAlpha(k=3, variant=variant, tol=0, max_iter=3).fit(Xd)

    assert qa.standard_spec(np.eye(30)[:, :3]).batch == 8192
    wide = fit()
    monkeypatch.setattr(qa, "_BATCH_BYTES", 0)
    assert qa.standard_spec(np.eye(30)[:, :3]).batch == 2048
    narrow = fit()
    np.testing.assert_allclose(wide.scores_, narrow.scores_, atol=1e-12)
    np.testing.assert_allclose(wide.objective_, narrow.objective_, rtol=1e-12)


def test_float32_gram_error_does_not_grow_with_features():
    """Each batch's float32 product is summed into float64: at 30 000 features
    α is as close to the float64 fit as at a few hundred."""
    rng = np.random.default_rng(0)
    X32 = rng.standard_normal((30, 30_000)).astype(np.float32)
    X32[:10, :50] += 2.0
    Xd = da.from_array(X32, chunks=(30, 7000))
    with dask.config.set({"fsdask.hold-x-below": 0}):
        est = QAlpha(k=3, tol=0, max_iter=4).fit(Xd)
        with dask.config.set({"fsdask.gram-precision": "float64"}):
            ref = QAlpha(k=3, tol=0, max_iter=4).fit(Xd)
    assert (est.result_.attrs["gram_dtype"], ref.result_.attrs["gram_dtype"]) == (
        "float32",
        "float64",
    )
    np.testing.assert_allclose(est.scores_, ref.scores_, atol=1e-6)  # as at 202 features
    assert np.linalg.norm(est.scores_ - ref.scores_) < 1e-6  # below the default tol
    assert set(np.argsort(-est.scores_)[:50]) == set(np.argsort(-ref.scores_)[:50])


def test_gram_precision_config_is_checked(weston):
    X, _ = weston
    with dask.config.set({"fsdask.gram-precision": "half"}):
        with pytest.raises(ParameterError, match="fsdask.gram-precision"):
            QAlpha(k=2, max_iter=2).fit(X.astype(np.float32))


def test_supervised_three_classes_and_opt_out(route):
    syn = qalpha_clusters(3, n_irrelevant=40, random_state=2)
    X, y = syn.X.values.astype(float), syn.y
    a, obj = dense.supervised_dense(X, y, gamma=0.3, k_within=1, k_between=2, n_iter=4)
    est = QAlpha(gamma=0.3, k_within=1, k_between=2, tol=0, max_iter=4).fit(X, y)
    np.testing.assert_allclose(est.scores_, a, atol=1e-8)
    np.testing.assert_allclose(est.objective_, obj, rtol=1e-10)
    unsup = QAlpha(k=3, supervised=False, tol=0, max_iter=4).fit(X, y)
    a2, _, _ = dense.qalpha_dense(X, 3, "power", n_iter=4)
    np.testing.assert_allclose(unsup.scores_, a2, atol=1e-8)


@pytest.mark.parametrize(
    "kernel,fn", [("linear", lambda A, B: A.T @ B), ("rbf", _rbf), ("sessions", _sessions_kernel)]
)
def test_kernel_matches_dense(weston, kernel, fn, route):
    X, _ = weston
    X = X[:48, :80]
    a, obj = dense.kernel_dense(X, fn, 2, n_iter=4)
    est = QAlpha(k=2, kernel=kernel, tol=0, max_iter=4).fit(X)
    np.testing.assert_allclose(est.scores_, a, atol=1e-8)
    np.testing.assert_allclose(est.objective_, obj, rtol=1e-9)


def test_linear_kernel_reproduces_power_and_callable_kernel(weston):
    X, _ = weston
    X = X[:, :90]
    p = QAlpha(k=2, tol=0, max_iter=4).fit(X)
    kl = QAlpha(k=2, kernel="linear", tol=0, max_iter=4).fit(X)
    kc = QAlpha(
        k=2, kernel=lambda A, B, c=0.0: A.T @ B + c, kernel_params={"c": 0.0}, tol=0, max_iter=4
    ).fit(X)
    np.testing.assert_allclose(kl.scores_, p.scores_, atol=1e-8)
    np.testing.assert_allclose(kl.objective_, p.objective_, rtol=1e-9)
    np.testing.assert_allclose(kc.scores_, p.scores_, atol=1e-8)


def test_kernel_equals_linear_on_explicit_feature_map(weston):
    """Def. 14 with k(m_i, m_j) = φ(m_i)ᵀφ(m_j) is Def. 2 on the rows φ(m_i) (centred, unit norm)."""
    X = weston[0][:48, :40]
    M = normalize_block(X)
    ks = QAlpha(k=2, kernel="sessions", tol=0, max_iter=4).fit(X)  # §6's kernel
    ls = QAlpha(k=2, supervised=False, tol=0, max_iter=4).fit(_phi_sessions(M))
    np.testing.assert_allclose(ks.scores_, ls.scores_, atol=1e-8)
    np.testing.assert_allclose(ks.objective_, ls.objective_, rtol=1e-9)

    def square(A, B):  # φ(m) = m ∘ m
        return normalize_block(A**2).T @ normalize_block(B**2)

    kq = QAlpha(k=2, kernel=square, tol=0, max_iter=4).fit(X)
    lq = QAlpha(k=2, supervised=False, tol=0, max_iter=4).fit(M**2)
    np.testing.assert_allclose(kq.scores_, lq.scores_, atol=1e-8)
    np.testing.assert_allclose(kq.objective_, lq.objective_, rtol=1e-9)


@pytest.mark.parametrize("seed,k", [(0, 1), (1, 2), (2, 4)])
def test_power_objective_never_decreases(seed, k):
    """Prop. 3 holds for exact products; float32 products (the float32 data's default) keep
    it up to their rounding."""
    syn = qalpha_clusters(3, n_irrelevant=60, random_state=seed)
    with dask.config.set({"fsdask.gram-precision": "float64"}):
        est = QAlpha(k=k, tol=0, max_iter=15).fit(syn.X.values)
    assert np.all(np.diff(est.objective_) >= -1e-12 * est.objective_[-1])
    est = QAlpha(k=k, tol=0, max_iter=15).fit(syn.X.values)
    assert est.result_.attrs["gram_dtype"] == "float32"
    assert np.all(np.diff(est.objective_) >= -1e-6 * est.objective_[-1])
    rng = np.random.default_rng(seed)
    est = QAlpha(k=k, tol=0, max_iter=10, init="random", random_state=seed).fit(
        rng.standard_normal((40, 150))
    )
    assert np.all(np.diff(est.objective_) >= -1e-12 * est.objective_[-1])


def test_supervised_same_on_cluster(weston, cluster):
    X, y = weston
    with dask.config.set(scheduler=cluster):
        sup = QAlpha(tol=0, max_iter=3).fit(da.from_array(X, chunks=(50, 64)), y)
    np.testing.assert_allclose(sup.scores_, QAlpha(tol=0, max_iter=3).fit(X, y).scores_, atol=1e-10)


def test_api_support_transform_result_and_constant_features(weston):
    X, y = weston
    Xc = np.c_[X, np.full(X.shape[0], 3.0)]  # a constant feature at the end
    est = QAlpha(n_features_to_select=6, n_init=4, max_iter=20, tol=1e-5).fit(Xc, y)
    assert est.scores_[-1] == 0 and est.ranking_[-1] == Xc.shape[1]
    assert est.get_support().sum() == 6
    assert set(est.get_support(indices=True)) <= set(range(Xc.shape[1] - 1))
    assert est.transform(Xc).shape == (X.shape[0], 6)
    r = est.result_
    assert r.attrs["method"] == "qalpha" and r.attrs["n_constant_features"] == 1
    assert list(r.attrs["objective"]) == list(est.objective_)
    # supervised Q-α finds Weston's relevant features (0–5)
    assert len(set(np.argsort(-est.scores_)[:6]) & set(range(6))) >= 5
    with pytest.raises(InputError, match="constant"):
        QAlpha(on_constant="error").fit(Xc)


def test_converged_honest(weston):
    X, _ = weston
    est = QAlpha(k=2, tol=1e-6, max_iter=200).fit(X)
    assert est.converged_ is True and est.n_iter_ < 200
    with pytest.warns(ConvergenceWarning):
        est = QAlpha(k=2, tol=1e-14, max_iter=2).fit(X)
    assert est.converged_ is False and est.n_iter_ == 2


def test_auto_cut_rule():
    a = np.r_[np.full(6, 0.4), np.full(100, 0.01)]
    assert auto_cut(a) == 6
    assert QAlpha()._default_support(a).sum() == 6
    assert auto_cut(np.array([1.0])) == 1
    assert auto_cut(np.array([-1.0, -2.0])) == 1
    est = QAlpha(n_features_to_select="auto", max_iter=5).fit(*_weston_big())
    assert est.get_support().sum() == auto_cut(est.scores_)


def _weston_big():
    syn = weston_linear(n_samples=80, n_features=202, random_state=5)
    return syn.X.values, syn.y


def test_bad_input(weston):
    X, y = weston
    with pytest.raises(InputError, match="k=50 but X has only 50 samples"):
        QAlpha(k=50, supervised=False).fit(X)
    with pytest.raises(InputError, match="single class"):
        QAlpha(variant="supervised").fit(X, np.zeros(X.shape[0]))
    with pytest.raises(InputError, match="single class"):
        QAlpha().fit(X, np.ones(X.shape[0]))
    with pytest.raises(InputError, match="needs labels|supervised|requires y"):
        QAlpha(variant="supervised").fit(X)
    yy = np.r_[np.zeros(48), [1, 1]]
    with pytest.raises(InputError, match="fewer than 3 samples"):
        QAlpha().fit(X, yy)
    with pytest.raises(ParameterError, match="kernel returned shape"):
        QAlpha(kernel=lambda A, B: A.T @ A).fit(X)
    with pytest.raises(ParameterError, match="'kernel' parameter"):
        QAlpha(kernel="nope").fit(X)
    with pytest.raises(ParameterError, match="init has shape"):
        QAlpha(init=np.eye(3)).fit(X)
    with pytest.raises(ParameterError, match="supervised=True works"):
        QAlpha(variant="ritz", supervised=True).fit(X, y)


def test_cli_select(tmp_path):
    from fsdask.cli import main
    from fsdask.datasets import write_synthetic
    from fsdask.results import open_result

    syn = weston_linear(n_samples=60, n_features=300, random_state=0)
    write_synthetic(syn, tmp_path / "w.zarr")
    rc = main(
        [
            "select",
            str(tmp_path / "w.zarr"),
            "--method",
            "qalpha",
            "--param",
            "variant=supervised",
            "--param",
            "n_features_to_select=6",
            "--param",
            "max_iter=5",
            "-o",
            str(tmp_path / "r.zarr"),
        ]
    )
    assert rc in (0, None)
    res = open_result(tmp_path / "r.zarr")
    assert int(res["selected"].sum()) == 6 and res.attrs["variant"] == "supervised"


class TestQAlpha(SelectorChecks):
    def make_estimator(self, **params):
        return QAlpha(
            **{"k": 2, "tol": 0, "max_iter": 5, "init": "random", "random_state": 3, **params}
        )
