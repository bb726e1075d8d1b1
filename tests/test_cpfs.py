"""CPFS (Masaeli et al. 2010): prox operators, two independent solvers, the duality-gap
certificate recomputed densely in numpy, the λ path and bad input."""

import dask
import dask.array as da
import numpy as np
import pytest

import fsdask
from fsdask.errors import InputError, ParameterError
from fsdask.linalg import gram_factor, row_l1_norms
from fsdask.methods import cpfs as cpfs_module
from fsdask.methods.cpfs import (
    CPFS,
    Problem,
    Rows,
    cpfs_path,
    project_l1_ball_rows,
    project_linf_epigraph_rows,
    prox_linf_rows,
    row_abs_max,
    solve_lambda,
)
from fsdask.testing import SelectorChecks


def _proj_l1_ref(v, r):
    if np.abs(v).sum() <= r:
        return v.copy()
    u = np.sort(np.abs(v))[::-1]
    cs = np.cumsum(u)
    rho = max(j for j in range(1, v.size + 1) if u[j - 1] > (cs[j - 1] - r) / j)
    th = (cs[rho - 1] - r) / rho
    return np.sign(v) * np.maximum(np.abs(v) - th, 0)


def test_row_abs_max(rng):
    A = rng.normal(size=(6, 50))
    A[1] = -np.abs(A[1])  # the largest magnitude negative
    A[2] = 0.0
    np.testing.assert_array_equal(row_abs_max(A), np.abs(A).max(axis=1))
    assert row_abs_max(np.zeros((0, 50))).shape == (0,)
    np.testing.assert_array_equal(row_abs_max(np.zeros((3, 0))), np.zeros(3))


def test_l1_projection_and_linf_prox(rng):
    # includes rows that need more than the `top` largest entries (fallback path)
    V = rng.normal(size=(30, 200))
    V[:5] = 1.0 + 1e-3 * rng.normal(size=(5, 200))
    radii = rng.uniform(0.1, 100, size=30)
    P = project_l1_ball_rows(V, radii)
    for i in range(30):
        np.testing.assert_allclose(P[i], _proj_l1_ref(V[i], radii[i]), atol=1e-12)
    # Moreau: prox_{τ‖·‖∞}(v) = v − Π(v); rows with ‖v‖₁ ≤ τ vanish exactly
    Q = prox_linf_rows(V, radii)
    np.testing.assert_allclose(Q, V - P, atol=1e-12)
    small = np.abs(V).sum(1) <= radii
    assert np.all(Q[small] == 0)
    # prox optimality: for τ ≥ 0, x = prox(v) minimises ½‖x − v‖² + τ‖x‖∞ (check random perturbations)
    v, tau = V[7], 3.0
    x = prox_linf_rows(v[None], tau)[0]

    def obj(z):
        return 0.5 * np.sum((z - v) ** 2) + tau * np.abs(z).max()

    assert all(obj(x) <= obj(x + 1e-3 * rng.normal(size=v.size)) + 1e-12 for _ in range(50))


def test_linf_epigraph_projection(rng):
    from scipy.optimize import minimize_scalar

    V = rng.normal(size=(12, 90)) * 2
    s = rng.normal(size=12) * 3
    Pa, Pt = project_linf_epigraph_rows(V, s, top=4)
    for i in range(12):

        def g(t, i=i):
            return np.sum(np.maximum(np.abs(V[i]) - t, 0) ** 2) + (t - s[i]) ** 2

        t_ref = minimize_scalar(
            g,
            bounds=(0, np.abs(V[i]).max() + abs(s[i]) + 1),
            method="bounded",
            options={"xatol": 1e-12},
        ).x
        if np.abs(V[i]).max() <= s[i]:
            t_ref = s[i]
        assert Pt[i] == pytest.approx(t_ref, abs=1e-6)
        np.testing.assert_allclose(Pa[i], np.clip(V[i], -Pt[i], Pt[i]))


def test_gram_factor_and_row_l1(rng):
    X = rng.normal(size=(20, 300))
    X -= X.mean(0)
    Xd = da.from_array(X, chunks=(20, 70))
    for kw in ({}, {"memory_budget": 0}, {"method": "tsqr"}):
        B, s = gram_factor(Xd, **kw)  # n × n Gram + pass, TSQR of Xᵀ (no room for the Gram), TSQR
        np.testing.assert_allclose(B.T @ B, X.T @ X, atol=1e-9)
        np.testing.assert_allclose(
            s[: B.shape[0]], np.linalg.svd(X, compute_uv=False)[: B.shape[0]], rtol=1e-8
        )
    X = X[:, :15]  # p ≤ n: the p × p Gram, whatever the budget
    for kw in ({}, {"memory_budget": 0}):
        B, s = gram_factor(da.from_array(X, chunks=(20, 7)), **kw)
        np.testing.assert_allclose(B.T @ B, X.T @ X, atol=1e-9)
        np.testing.assert_allclose(
            s[: B.shape[0]], np.linalg.svd(X, compute_uv=False)[: B.shape[0]], rtol=1e-8
        )
    M, E, C = rng.normal(size=(50, 7)), rng.normal(size=(7, 40)), rng.normal(size=(50, 40))
    np.testing.assert_allclose(
        row_l1_norms(M, E, C, block_bytes=8 * 40 * 3), np.abs(M @ E - C).sum(1)
    )


def _data(rng, n=60, p=14):
    X = rng.normal(size=(n, p)) @ rng.normal(size=(p, p)) * 0.5 + rng.normal(size=(n, p))
    return X


def _certificate(X, A, lam):
    """Primal and dual value of (4.2) computed densely from X (independent of the solver code)."""
    Xc = X - X.mean(0)
    R = Xc - Xc @ A
    P = np.sum(R * R) + lam * np.abs(A).max(axis=1).sum()
    grad = -2 * Xc.T @ R
    c = min(np.sum(R * Xc) / np.sum(R * R), lam / np.abs(grad).sum(axis=1).max())
    D = 2 * c * np.sum(R * Xc) - c * c * np.sum(R * R)
    return P, D


@pytest.mark.parametrize("lam_frac", [0.3, 0.05])
def test_two_solvers_agree_with_certificate(rng, lam_frac):
    X = _data(rng)
    lam_max = 2 * np.abs((X - X.mean(0)).T @ (X - X.mean(0))).sum(1).max()
    lam = lam_frac * lam_max
    fits = {
        s: CPFS(lam=lam, solver=s, tol=1e-10, max_iter=100000, n_lambdas=4).fit(X)
        for s in ("fista", "qp", "bcd")
    }
    P = {}
    for s, e in fits.items():
        assert e.lambda_max_ == pytest.approx(lam_max, rel=1e-10)
        Pd, Dd = _certificate(X, e.coef_, lam)
        assert Pd >= Dd - 1e-9 * Pd  # weak duality
        assert (Pd - Dd) / Pd <= 2e-10  # the certificate, recomputed densely
        assert e.result_.attrs["duality_gap"] == pytest.approx((Pd - Dd) / Pd, abs=1e-11)
        assert e.result_.attrs["primal"] == pytest.approx(Pd, rel=1e-10)
        P[s] = Pd
    assert P["qp"] == pytest.approx(P["fista"], rel=1e-6)
    assert P["bcd"] == pytest.approx(P["fista"], rel=1e-6)
    sup = {s: tuple(e.get_support(indices=True)) for s, e in fits.items()}
    assert sup["fista"] == sup["qp"] == sup["bcd"]
    # local optimality of the returned A
    A = fits["fista"].coef_

    def obj(A):
        return _certificate(X, A, lam)[0]

    assert all(obj(A) <= obj(A + 1e-4 * rng.normal(size=A.shape)) for _ in range(20))


def test_extremes_and_path(rng):
    X = _data(rng, p=8)
    e0 = CPFS(lam=0.0, tol=1e-10, n_lambdas=6, max_iter=50000).fit(X)
    np.testing.assert_allclose(e0.coef_, np.eye(8), atol=1e-4)  # λ = 0: A = I
    assert e0.support_.all()
    big = CPFS(lam=1e9).fit(X)
    assert not big.support_.any() and np.all(big.coef_ == 0)
    path = cpfs_path(X, n_lambdas=12, lambda_min_ratio=1e-3, tol=1e-8)
    lam = path["lambda"].values
    assert np.all(np.diff(lam) < 0) and path["path_n_active"].values[0] == 0
    assert path["path_n_active"].values[-1] == 8
    assert np.all(path["path_gap"].values <= 1e-8 * 1.0001)
    # entry λ = largest λ with a nonzero row; rank 1 enters first
    entry = path["entry_lambda"].values
    r = path["rank"].values
    assert entry[r == 1][0] == entry.max()
    assert np.all(np.diff(entry[np.argsort(r)]) <= 0)  # ranking follows entry λ
    rn = path["path_row_norm"].values
    for j in range(8):
        assert rn[lam > entry[j], j].max(initial=0) == 0


def test_n_features_to_select_finds_lambda(rng):
    X = _data(rng, p=12)
    e = CPFS(n_features_to_select=5, tol=1e-8).fit(X)
    assert e.support_.sum() == 5
    assert e.result_.attrs["n_selected"] == 5
    assert np.count_nonzero(np.abs(e.coef_).max(1)) in (5, e.result_["path_n_active"].values.max())
    assert e.transform(X).shape == (60, 5)
    assert (
        set(np.flatnonzero(e.support_)) == set(np.argsort(e.ranking_)[:5])
        or np.count_nonzero(np.abs(e.coef_).max(1)) == 5
    )
    assert e.result_["path_row_norm"].dims == ("lambda", "feature")
    # sorted support by ranking_ is consistent with scores_ at λ_q
    assert np.all(e.scores_[e.support_] > 0)


def test_active_set_factor_route_matches_gram_route(rng):
    # p > n: the factor B comes from the TSQR of Xᵀ; Gram kept (default) vs not kept (scan on B)
    X = rng.normal(size=(25, 15)) @ rng.normal(size=(15, 160))
    X += 0.05 * rng.normal(size=X.shape)
    Xd = da.from_array(X, chunks=(25, 40))
    kw = dict(lam=None, n_features_to_select=10, tol=1e-8, max_iter=50000)
    a = CPFS(**kw).fit(Xd)
    b = CPFS(memory_budget=0, **kw).fit(Xd)
    assert a.result_.attrs["gram_in_memory"] and not b.result_.attrs["gram_in_memory"]
    assert a.lambda_ == pytest.approx(b.lambda_, rel=1e-9)
    assert a.result_.attrs["primal"] == pytest.approx(b.result_.attrs["primal"], rel=1e-6)
    np.testing.assert_array_equal(a.support_, b.support_)
    Pd, Dd = _certificate(X, a.coef_, a.lambda_)
    assert (Pd - Dd) / Pd <= 1e-7


def test_exactly_low_rank_uses_factor_products(rng):
    # rank 4, ~30 active rows: G_SS M goes through B_S (r < |S|/2) and the KKT scans chain
    # their bounds from scan to scan; the result is still certified from X itself
    X = rng.normal(size=(40, 4)) @ rng.normal(size=(4, 120))
    B, _ = gram_factor(X - X.mean(0))
    prob = Problem(B, np.ones(120, bool), memory_budget=0)
    S = np.arange(0, 120, 4)
    M = rng.normal(size=(S.size, 120))
    rows = Rows(prob, S)
    assert rows.factored
    np.testing.assert_allclose(
        rows.half_grad(rows.state(M)), B[:, S].T @ (B[:, S] @ M - B), rtol=1e-10, atol=1e-8
    )
    e = CPFS(n_features_to_select=30, memory_budget=0, tol=1e-8, max_iter=50000).fit(
        da.from_array(X, chunks=(40, 50))
    )
    assert e.result_.attrs["rank"] == 4 and e.result_["path_n_active"].values.max() > 8
    assert e.support_.sum() == 30
    P, D = _certificate(X, e.coef_, e.lambda_)
    assert (P - D) / P <= 1e-7
    ref = CPFS(lam=e.lambda_, solver="qp", tol=1e-9, max_iter=200000).fit(X)
    assert ref.result_.attrs["primal"] == pytest.approx(e.result_.attrs["primal"], rel=1e-6)


def test_kkt_rounds_drop_zero_rows_that_pass_their_test(rng, monkeypatch):
    # A working set of weak rows plus a few strong ones: the first solve leaves most of it
    # zero and the scan finds violators outside.  The next round keeps none of the zero rows
    # that passed their KKT test (each would cost a p-long row per FISTA step), and the
    # solution is still the one solved on every row at once.
    X = rng.normal(size=(30, 8)) @ rng.normal(size=(8, 80)) + 0.1 * rng.normal(size=(30, 80))
    B, _ = gram_factor(da.from_array(X - X.mean(0), chunks=(30, 40)))
    prob = Problem(B, np.ones(80, bool))
    gl0 = prob.grad_l1(np.zeros(0, np.int64), np.zeros((0, 80)))
    lam = 0.4 * gl0.max()
    order = np.argsort(gl0)
    S0 = np.sort(np.r_[order[:30], order[-3:]])  # the 30 weakest rows and the 3 strongest
    rounds, scans = [], []
    inner, scan = cpfs_module.SOLVERS["fista"], prob.grad_l1

    def spy_inner(rows, *a, **k):
        out = inner(rows, *a, **k)
        rounds.append((rows.S.copy(), row_abs_max(out[0]) > 0))
        return out

    def spy_scan(*a, **k):
        scans.append(scan(*a, **k))
        return scans[-1]

    monkeypatch.setitem(cpfs_module.SOLVERS, "fista", spy_inner)
    monkeypatch.setattr(prob, "grad_l1", spy_scan)
    res = solve_lambda(prob, lam, S0, np.zeros((S0.size, 80)), tol=1e-10, max_iter=100000)
    assert res["kkt_rounds"] >= 2
    dropped = 0
    for (S, nz), (S_next, _), gl1 in zip(rounds, rounds[1:], scans):
        passed = S[~nz & (gl1[S] <= lam)]
        dropped += passed.size
        assert not np.isin(passed, S_next).any()
    assert dropped > 0
    monkeypatch.undo()
    ref = solve_lambda(prob, lam, np.arange(80), np.zeros((80, 80)), tol=1e-10, max_iter=100000)
    assert res["primal"] == pytest.approx(ref["primal"], rel=1e-8)
    np.testing.assert_array_equal(
        np.sort(res["S"][row_abs_max(res["A"]) > 0]), np.sort(ref["S"][row_abs_max(ref["A"]) > 0])
    )


def test_duplicate_columns(rng):
    X = _data(rng, p=6)
    # duplicate column: the copy's row is fixed at 0 (still reconstructed), or kept, or an error
    Xd = np.column_stack([X, X[:, 1]])
    e = CPFS(n_features_to_select=6, tol=1e-9, max_iter=50000).fit(Xd)
    assert e.result_.attrs["n_duplicate_columns"] == 1
    assert not e.support_[6] and e.scores_[6] == 0
    full = CPFS(lam=1.0, tol=1e-10, max_iter=50000).fit(X)
    dup = CPFS(lam=1.0, tol=1e-10, max_iter=50000).fit(Xd)
    # optimum with a duplicate target column: same selection on the original columns
    np.testing.assert_array_equal(full.support_, dup.support_[:6])
    with pytest.raises(InputError, match="duplicate"):
        CPFS(on_duplicate="error").fit(Xd)


def test_registry_and_lazy_export():
    assert isinstance(fsdask.get_method("cpfs", lam=1.0), CPFS)
    assert fsdask.cpfs_path is cpfs_path


def test_cli_select_cpfs_writes_path(tmp_path, rng):
    import subprocess
    import sys

    X = _data(rng, n=30, p=7)
    fsdask.ingest(X, tmp_path / "d.zarr")
    out = tmp_path / "r.zarr"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsdask.cli",
            "select",
            str(tmp_path / "d.zarr"),
            "--method",
            "cpfs",
            "--param",
            "n_features_to_select=3",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    res = fsdask.open_result(out)
    assert int(res["selected"].sum()) == 3
    assert res["path_diag"].dims == ("lambda", "feature") and res.attrs["duality_gap"] <= 1e-6
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsdask.cli",
            "select",
            str(tmp_path / "d.zarr"),
            "--method",
            "cpfs",
            "--param",
            "lam=-2",
            "-o",
            str(tmp_path / "bad.zarr"),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "'lam' parameter" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "fsdask.cli", "select", str(tmp_path / "d.zarr")]
        + ["--method", "cpfs", "--param", "max_scan_flops=100", "-o", str(tmp_path / "big.zarr")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "max_scan_flops=1.0e+02" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "big.zarr").exists()


def test_scan_cost_refused_before_x_is_read(rng):
    """The p² wall: a problem whose KKT scan would exceed ``max_scan_flops`` is refused before
    a single task runs; None lifts the limit."""
    from dask.callbacks import Callback

    X = da.from_array(_data(rng, n=20, p=40), chunks=(20, 10))
    ran = []
    with Callback(pretask=lambda key, dsk, state: ran.append(key)):
        with pytest.raises(ParameterError, match=r"2·p²·min\(n, p\) = 6\.4e\+04 flops"):
            CPFS(max_scan_flops=6e4).fit(X)
    assert ran == []
    assert CPFS(max_scan_flops=None, n_features_to_select=3).fit(X).support_.sum() == 3
    assert CPFS(max_scan_flops=6.4e4, n_features_to_select=3).fit(X).support_.sum() == 3


def test_leave_order(rng):
    X = _data(rng, p=6)
    e = CPFS(tol=1e-8, lambda_min_ratio=1e-4, n_lambdas=15).fit(X)
    lo = e.leave_order_
    entry = e.result_["entry_lambda"].values
    assert np.all(np.diff(entry[lo]) >= 0)  # first to leave = smallest entry λ
    assert lo[-1] == np.argmin(e.ranking_)


def test_qp_solver_at_small_lambda_with_p_above_n(rng):
    # p > n and |S| > rank X: G_SS is singular and the QP (5.5) not strongly convex; the former
    # spectral projected gradient stalled here (relative gap ~5e-4 after 2·10⁴ steps)
    X = rng.normal(size=(12, 6)) @ rng.normal(size=(6, 30)) + 0.05 * rng.normal(size=(12, 30))
    Xc = X - X.mean(0)
    lam = 0.01 * 2 * np.abs(Xc.T @ Xc).sum(1).max()
    fits = {
        s: CPFS(lam=lam, solver=s, tol=1e-9, max_iter=40000, n_lambdas=3).fit(X)
        for s in ("qp", "fista")
    }
    for e in fits.values():
        assert e.support_.sum() > np.linalg.matrix_rank(Xc)  # more active rows than the rank
        Pd, Dd = _certificate(X, e.coef_, lam)
        assert (Pd - Dd) / Pd <= 1e-8
    assert fits["qp"].result_.attrs["primal"] == pytest.approx(
        fits["fista"].result_.attrs["primal"], rel=1e-6
    )


def test_default_path_stops_where_it_says(rng):
    # wide X (n ≤ p): ratio 1e-2, max_features = min(n, p, 250); an explicit max_features stops there
    X = rng.normal(size=(30, 6)) @ rng.normal(size=(6, 80)) + 0.3 * rng.normal(size=(30, 80))
    path = cpfs_path(X, tol=1e-6)
    assert path.attrs["lambda_min_ratio"] == 1e-2 and path.attrs["max_features"] == 30
    assert path.attrs["path_stop"] in ("max_features", "reconstruction", "grid_end")
    cut = cpfs_path(X, max_features=7, tol=1e-6)
    act = cut["path_n_active"].values
    assert (
        cut.attrs["path_stop"] == "max_features"
        and "max_features=7" in cut.attrs["path_stop_reason"]
    )
    assert act[-1] >= 7 and np.all(act[:-1] < 7)  # stopped at the first λ with ≥ 7 rows
    # tall, exactly rank 3: the reconstruction is complete long before the grid's end
    Xt = rng.normal(size=(60, 3)) @ rng.normal(size=(3, 12))
    e = CPFS(tol=1e-8, max_iter=20000).fit(Xt)
    a = e.result_.attrs
    assert a["lambda_min_ratio"] == 1e-4 and a["path_stop"] == "reconstruction"
    Xc = Xt - Xt.mean(0)
    explained = 1 - e.result_["path_loss"].values / np.sum(Xc**2)
    n_active = e.result_["path_n_active"].values
    assert explained[-1] >= 0.999 or explained[-1] - explained[-2] < 1e-5
    assert np.all(explained[:-1][n_active[:-1] > 0] < 0.999)
    assert e.lambda_ > e.lambda_max_ * 1e-4  # stopped before the grid's end
    # a user's λ is reached whatever the defaults say
    assert (
        CPFS(lam=e.lambda_max_ * 1e-4, tol=1e-8, max_iter=20000).fit(Xt).result_.attrs["path_stop"]
        == "lam"
    )


class TestCPFS(SelectorChecks):
    cluster_exact = False  # the Gram / eigh run in threaded BLAS on the driver

    def make_estimator(self, **params):
        return CPFS(**{"n_features_to_select": 3, **params})


@pytest.mark.cluster
def test_duplicate_hashes_agree_across_processes_with_different_hash_seeds():
    """blake2b, not Python's salted hash(): two worker processes with different
    PYTHONHASHSEEDs give the same column hashes, and the duplicate is found on them."""
    import os

    from distributed import Client, Nanny, Scheduler, SpecCluster

    from fsdask.methods.cpfs import column_hashes, duplicate_columns

    class SeededNanny(Nanny):  # distributed gives every worker PYTHONHASHSEED=6640 by default
        def __init__(self, *args, hash_seed: str, **kwargs):
            super().__init__(*args, **kwargs)
            self.pre_spawn_env = {**self.pre_spawn_env, "PYTHONHASHSEED": hash_seed}

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 8))
    X[:, 6] = X[:, 1]
    workers = {
        f"w{seed}": {"cls": SeededNanny, "options": {"nthreads": 1, "hash_seed": seed}}
        for seed in ("11", "12345")
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0", "host": "127.0.0.1"}}
    saved = os.environ.get("PYTHONHASHSEED")  # each nanny sets it in this process before spawning
    try:
        with SpecCluster(scheduler=scheduler, workers={}) as spec, Client(spec) as client:
            for n, (name, worker) in enumerate(workers.items(), start=1):  # one at a time: the
                spec.worker_spec[name] = worker  # seed is set per spawn
                spec.sync(spec._correct_state)
                client.wait_for_workers(n)
            _check_hashes_on(client, X, column_hashes, duplicate_columns)
    finally:
        os.environ.pop("PYTHONHASHSEED", None) if saved is None else os.environ.update(
            PYTHONHASHSEED=saved
        )


def _check_hashes_on(client, X, column_hashes, duplicate_columns):
    salted = client.run(lambda: hash(b"fsdask column"))
    assert len(set(salted.values())) == 2  # the workers' hash() really differ
    first, second = client.run(column_hashes, X).values()
    np.testing.assert_array_equal(first, second)
    with dask.config.set(scheduler=client):
        dup = duplicate_columns(da.from_array(X, chunks=(20, 1)))
    assert np.flatnonzero(dup).tolist() == [6]


def test_default_tol_selects_what_a_tight_solve_selects(rng):
    # the default tol certifies every λ of the path within 1e-4 of a tol=1e-9 solve (the gap
    # bounds the distance to the optimum), and the rows it keeps are the same
    L = rng.normal(size=(100, 8))
    X = L @ (rng.normal(size=(8, 150)) * rng.uniform(0.2, 2.0, size=150))
    X += 0.05 * rng.normal(size=X.shape)
    lambdas = fsdask.cpfs_path(X, n_lambdas=6)["lambda"].values
    loose = fsdask.cpfs_path(X, lambdas=lambdas)
    # every other λ down to the smallest, the hardest to certify (a tight solve of a small
    # λ is most of this test's time)
    pick = [1, 3, 5]
    tight = fsdask.cpfs_path(X, lambdas=lambdas[pick], tol=1e-9, max_iter=50_000)
    assert loose["path_gap"].max() <= 1e-4 and tight["path_gap"].max() <= 1e-9
    P, Pt = loose["path_primal"].values[pick], tight["path_primal"].values
    assert np.all(P - Pt <= 1e-4 * Pt) and np.all(P - Pt >= -1e-9 * Pt), (P - Pt) / Pt
    assert np.array_equal(loose["path_n_active"].values[pick], tight["path_n_active"].values)
    q = 10
    a, b = (
        fsdask.CPFS(n_features_to_select=q).fit(X),
        fsdask.CPFS(n_features_to_select=q, tol=1e-9, max_iter=50_000).fit(X),
    )
    assert np.array_equal(a.support_, b.support_)
