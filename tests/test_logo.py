"""fsdask.Logo against the dense Algorithm 1 of the paper, and its guarantees."""

import subprocess
import sys
import warnings

import dask.array as da
import numpy as np
import pytest
from logo_dense import logo_dense, probabilities, zbar

import fsdask.methods.logo as logo_mod
import fsdask.methods.logo.algorithm as logo_algorithm
from fsdask import Logo
from fsdask.datasets import fermat_spiral, write_synthetic
from fsdask.errors import ConvergenceWarning, InputError
from fsdask.linalg.execution import InMemoryOperator
from fsdask.methods.logo import miss_hit_probabilities, solve_lbfgs, solve_v2_gradient
from fsdask.testing import SelectorChecks


@pytest.fixture(scope="module")
def spiral():
    syn = fermat_spiral(28, n_per_class=40, random_state=0)
    return syn.X.values.astype(np.float64), syn.y


@pytest.fixture(scope="module")
def three_class():
    rng = np.random.default_rng(5)
    y = np.repeat([0, 1, 2], 14)
    X = rng.normal(size=(42, 25))
    X[:, 0] += 2.0 * (y == 1)
    X[:, 1] += 2.0 * (y == 2)
    X[:, 2] += 2.0 * (y == 0)
    return X, y


def _fit(X, y, chunks=10, **kw):
    kw.setdefault("sigma", 3.0)
    kw.setdefault("standardize", False)  # the paper's Algorithm 1, as the dense reference
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return Logo(**kw).fit(da.from_array(X, chunks=(-1, chunks)), y)


@pytest.mark.parametrize("budget", [256 * 2**20, 0], ids=["in-memory", "chunked"])
def test_matches_dense_algorithm_1(spiral, budget):
    X, y = spiral
    w_ref, trace = logo_dense(
        X, y, sigma=3.0, lam=1.0, theta=0.01, max_iter=6 if budget == 0 else 30
    )
    est = _fit(
        X,
        y,
        sigma=3.0,
        lam=1.0,
        theta=0.01,
        eliminate=False,
        memory_budget=budget,
        max_iter=6 if budget == 0 else 30,
    )
    np.testing.assert_allclose(est.scores_, w_ref, rtol=1e-6, atol=1e-6 * w_ref.max())
    np.testing.assert_allclose(est.result_.attrs["delta_trace"], trace, rtol=1e-6)
    assert est.n_iter_ == len(trace)
    assert set(np.argsort(-est.scores_)[:2]) == {0, 1}  # the spiral's two features on top


def test_multiclass_eq20_matches_dense(three_class):
    X, y = three_class
    w_ref, trace = logo_dense(X, y, sigma=5.0, lam=1.0, theta=1e-3)
    est = _fit(X, y, sigma=5.0, lam=1.0, theta=1e-3, eliminate=False)
    assert est.converged_
    np.testing.assert_allclose(est.scores_, w_ref, rtol=1e-6, atol=1e-6 * w_ref.max())
    assert set(np.argsort(-est.scores_)[:3]) == {0, 1, 2}


def test_probabilities_are_eqs_4_5():
    rng = np.random.default_rng(1)
    D = rng.random((7, 7)) * 50
    D = D + D.T
    np.fill_diagonal(D, 0)
    y = np.array([0, 0, 1, 1, 1, 2, 2])
    Pi = miss_hit_probabilities(D, y, 3.0)
    np.testing.assert_allclose(Pi, probabilities(D, y, 3.0), rtol=1e-12)
    n = 2  # misses of sample 2 are all samples of classes 0 and 2 (eq. 20)
    miss = [0, 1, 5, 6]
    k = np.exp(-D[n, miss] / 3.0)
    np.testing.assert_allclose(Pi[n, miss], k / k.sum())
    hits = [3, 4]
    k = np.exp(-D[n, hits] / 3.0)
    np.testing.assert_allclose(-Pi[n, hits], k / k.sum())
    assert Pi[n, n] == 0
    np.testing.assert_allclose(Pi.sum(axis=1), 0.0, atol=1e-12)


def test_gd_and_lbfgs_give_the_same_weights(spiral):
    X, y = spiral
    D = np.abs(X[:, None] - X[None]).sum(2)
    Z = zbar(X, probabilities(D, y, 2.0))
    w1, f1, n1 = solve_lbfgs(InMemoryOperator(Z), 1.0, np.ones(Z.shape[1]))
    w2, f2, n2 = solve_v2_gradient(
        InMemoryOperator(Z), 1.0, np.ones(Z.shape[1]), tol=1e-14, max_iter=50000
    )
    np.testing.assert_allclose(w2, w1, atol=1e-4 * w1.max())
    assert abs(f1 - f2) < 1e-8 * abs(f1) and n1 < n2  # same optimum; L-BFGS-B needs fewer passes
    a = _fit(X, y, solver="lbfgs", theta=1e-4)
    b = _fit(X, y, solver="gd", theta=1e-4, inner_tol=1e-13, inner_max_iter=50000)
    np.testing.assert_allclose(b.scores_, a.scores_, atol=1e-3 * a.scores_.max())
    np.testing.assert_array_equal(a.get_support(), b.get_support())


def test_elimination_is_certified_and_a_wrongly_dropped_feature_rejoins(spiral, monkeypatch):
    X, y = spiral
    honest = _fit(X, y, theta=1e-4)
    assert honest.scores_[0] > 0.1 * honest.scores_.max()
    real = logo_mod.solve_lbfgs
    calls = {"n": 0}

    def sabotage(Z, lam, w0, **kw):  # the first inner solve wrongly sends feature 0 to 0
        w, f, n = real(Z, lam, w0, **kw)
        calls["n"] += 1
        if calls["n"] == 1:
            w = w.copy()
            w[0] = 0.0
        return w, f, n

    monkeypatch.setattr(logo_algorithm, "solve_lbfgs", sabotage)
    lost = _fit(X, y, theta=1e-4, certify=False)
    assert (
        lost.scores_[0] == 0 and lost.result_.attrs["n_rejoined"] == 0
    )  # the paper's rule never looks back
    calls["n"] = 0
    back = _fit(X, y, theta=1e-4, certify=True)
    assert back.result_.attrs["n_rejoined"] >= 1 and 0 in back.result_.attrs["rejoined_features"]
    assert back.converged_ and back.result_.attrs["certified"]
    np.testing.assert_allclose(back.scores_, honest.scores_, atol=1e-3 * honest.scores_.max())
    assert back.ranking_[0] <= 2


def test_elimination_shrinks_the_active_set_and_keeps_the_answer(spiral):
    X, y = spiral
    full = _fit(X, y, theta=1e-5, eliminate=False)
    elim = _fit(X, y, theta=1e-5)
    sizes = elim.result_["active_size"].values
    assert sizes[-1] < X.shape[1] and sizes[-1] == int((elim.scores_ > 0).sum())
    np.testing.assert_allclose(elim.scores_, full.scores_, atol=1e-3 * full.scores_.max())


def test_estimator_api(spiral):
    X, y = spiral
    est = _fit(X, y, theta=1e-3)
    w = est.scores_
    assert est.ranking_[np.argmax(w)] == 1 and sorted(est.ranking_) == list(
        range(1, X.shape[1] + 1)
    )
    np.testing.assert_array_equal(est.get_support(), w > 0.01 * w.max())  # the paper's rule
    assert est.transform(X).shape == (X.shape[0], int(est.get_support().sum()))
    assert est.n_iter_ >= 1 and est.converged_
    res = est.result_
    assert res.attrs["method"] == "logo" and res.attrs["converged"]
    assert res["delta"].size == est.n_iter_ and res["delta"].values[-1] < 1e-3
    assert len(res.attrs["objective"]) == est.n_iter_
    top = Logo(sigma=3.0, n_features_to_select=2).fit(X, y)
    assert set(top.get_support(indices=True)) == {0, 1}


def test_cli_select_logo(tmp_path):
    syn = fermat_spiral(40, n_per_class=30, random_state=2)
    store = tmp_path / "s.zarr"
    write_synthetic(syn, store)
    out = tmp_path / "r.zarr"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsdask.cli",
            "select",
            str(store),
            "--method",
            "logo",
            "--param",
            "sigma=2",
            "--param",
            "n_features_to_select=2",
            "-o",
            str(out),
            "--top",
            "2",
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    from fsdask.results import open_result

    res = open_result(out)
    assert set(np.flatnonzero(res["selected"].values)) == {0, 1}


def test_a_class_without_a_hit_is_refused(spiral):
    X, y = spiral
    y1 = y.copy()
    y1[0] = 7  # class 7 has one sample: no hit
    with pytest.raises(InputError, match="single sample.*nearest hit"):
        Logo().fit(X, y1)


def test_working_set_solver_equals_the_full_solve():
    from fsdask.methods.logo import solve_working_set

    syn = fermat_spiral(300, n_per_class=20, random_state=1)
    X, y = syn.X.values.astype(np.float64), syn.y
    D = np.abs(X[:, None] - X[None]).sum(2)
    Z = zbar(X, probabilities(D, y, 2.0))
    full, f_full, _ = solve_lbfgs(InMemoryOperator(Z), 1.0, np.zeros(Z.shape[1]))
    ws, f_ws, _ = solve_working_set(
        InMemoryOperator(Z), 1.0, np.ones(Z.shape[1]), solve_lbfgs, kkt_tol=1e-9, min_add=8
    )
    np.testing.assert_allclose(ws, full, atol=1e-5 * full.max())
    assert abs(f_ws - f_full) <= 1e-8 * abs(f_full)
    assert 0 < np.count_nonzero(ws) < Z.shape[1]


def test_certification_bounds_hold_and_find_the_exact_violators():
    """Each certification's interval [lower, upper] holds the exact gradient of eq. 7 (float64
    sum), its violators are exactly those of the float64 sum, and the lower bound carried
    to the next certification clears features without summing them."""
    from fsdask.linalg.absdiff import weighted_absdiff_sum
    from fsdask.linalg.execution import Execution

    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 300)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    lam, tol = 0.5, 1e-6
    kkt = logo_mod.KKTBounds(X.shape[1])
    cols = np.arange(X.shape[1])
    ex = Execution()
    s = 0.2 * rng.random(40)
    for step, scale in enumerate([1.0, 1.02, 1.05, 3.0]):  # small moves of Π, then a large one
        D = np.abs(X[:, None, :4] - X[None, :, :4]).sum(2) * scale
        Pi = miss_hit_probabilities(D, y, 2.0)
        C = (s * scale)[:, None] * Pi
        fn = logo_mod.kkt_block(lam, C, kkt.drift(C), tol)
        lower, upper, summed = ex.map_columns(fn, X, kkt.lower, out_rows=3)
        exact = lam - weighted_absdiff_sum(X.astype(np.float64), C)
        assert np.all(lower <= exact + 1e-12) and np.all(exact <= upper + 1e-12)
        np.testing.assert_array_equal(upper < -tol, exact < -tol)
        assert (exact < -tol).any()
        assert np.all(np.isinf(upper[summed == 0]))
        if step in (1, 2):
            assert summed.sum() < X.shape[1]  # the carried bound cleared some features
        kkt.update(C, cols, lower)


class TestLogo(SelectorChecks):
    rtol = 1e-6

    def make_estimator(self, **params):
        return Logo(**{"max_iter": 3, **params})


class TestLogoChunkedZ(TestLogo):
    """The route that keeps X's active columns and Z̄ chunked (every product a sweep)."""

    def make_estimator(self, **params):
        return Logo(**{"max_iter": 3, "memory_budget": 0, **params})
