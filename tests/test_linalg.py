"""fsdask.linalg against plain numpy, on one block, many blocks and an uneven last block."""

import dask
import dask.array as da
import numpy as np
import pytest

import fsdask.linalg
from fsdask.linalg import (
    feature_dot,
    feature_kernel_matmul,
    khatri_rao,
    khatri_rao_gram,
    khatri_rao_gram_block,
    khatri_rao_matvec,
    khatri_rao_rmatvec,
    leading_eigh,
    map_and_sum,
    map_features,
    row_dot,
    row_dot_summary,
    sample_dot,
    sample_pairwise,
    sum_over_blocks,
    tall_skinny_qr,
    tall_skinny_svd,
)

LAYOUTS = {"one block": 57, "many blocks": 5, "uneven last": 13}


@pytest.fixture(params=list(LAYOUTS), ids=list(LAYOUTS))
def X(request, rng):
    Xn = rng.normal(size=(9, 57))
    return Xn, da.from_array(Xn, chunks=(9, LAYOUTS[request.param]))


def test_map_features(X):
    Xn, Xd = X
    np.testing.assert_allclose(map_features(lambda b: b.std(0), Xd).compute(), Xn.std(0))
    two = map_features(lambda b: np.stack([b.min(0), b.max(0)]), Xd, out_rows=2).compute()
    np.testing.assert_allclose(two, np.stack([Xn.min(0), Xn.max(0)]))


@pytest.mark.parametrize("split_every", [2, 8, None])
def test_sum_over_blocks_weighted_gram(X, rng, split_every):
    Xn, Xd = X
    w = rng.random(57)
    G = sum_over_blocks(
        lambda b, wb: (b * wb) @ b.T,
        Xd,
        da.from_array(w, chunks=11),
        shape=(9, 9),
        split_every=split_every,
    )
    np.testing.assert_allclose(G.compute(), (Xn * w) @ Xn.T)


def test_feature_row_and_sample_dot(X, rng):
    Xn, Xd = X
    W = rng.normal(size=(57, 3))
    C = rng.normal(size=(9, 4))
    np.testing.assert_allclose(feature_dot(Xd, W).compute(), Xn @ W)
    np.testing.assert_allclose(row_dot(Xd, C).compute(), Xn.T @ C)
    out = sample_dot(Xd, C)
    assert out.chunks[1] == Xd.chunks[1]
    np.testing.assert_allclose(out.compute(), C.T @ Xn)


@pytest.mark.parametrize("r", [2, 9])  # fused numba sweep (r ≤ 8) and BLAS
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_dot_summary(X, rng, dtype, r):
    Xn, _ = X
    Xn = Xn.astype(dtype)
    Xn[:, 3] = 2.5  # constant
    Xn[1, 8], Xn[4, 8], Xn[0, 20] = np.nan, np.inf, -np.inf
    Xn[:, 30] = np.inf  # an all-Inf column: inf − inf is NaN, still caught
    Xd = da.from_array(Xn, chunks=(9, X[1].chunks[1]))
    C = rng.normal(size=(9, r))
    out = row_dot_summary(Xd, C, sd=True).compute()
    assert out.shape == (r + 3, 57) and out.dtype == np.float64
    clean = np.where(np.isfinite(Xn), Xn, 0).astype(np.float64)
    np.testing.assert_allclose(out[:r].T, clean.T @ C, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out[r], (~np.isfinite(Xn)).sum(axis=0))
    ok = np.isfinite(Xn).all(axis=0)
    np.testing.assert_allclose(out[r + 1][ok], np.ptp(Xn[:, ok].astype(np.float64), axis=0))
    assert out[r + 1][3] == 0 and np.all(out[r + 1][ok & (np.arange(57) != 3)] > 0)
    np.testing.assert_allclose(
        out[r + 2][ok], Xn[:, ok].astype(np.float64).std(axis=0, ddof=1), rtol=1e-6
    )
    assert np.all(row_dot_summary(Xd, C).compute()[r + 2] == 0)
    # the float32 → float64 cast goes slab by slab of samples: several slabs, same product
    from fsdask.linalg.reductions import _ct_dot

    np.testing.assert_allclose(
        _ct_dot(clean.astype(dtype), C.T.copy(), slab_bytes=2 * 8 * 57),
        C.T @ clean.astype(dtype).astype(np.float64),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("metric", ["manhattan", "sqeuclidean", "dot"])
def test_sample_pairwise(X, rng, metric):
    Xn, Xd = X
    w = rng.random(57)
    diff = Xn[:, None, :] - Xn[None, :, :]
    expected = {
        "manhattan": (np.abs(diff) * w).sum(-1),
        "sqeuclidean": (diff**2 * w).sum(-1),
        "dot": (Xn * w) @ Xn.T,
    }[metric]
    np.testing.assert_allclose(sample_pairwise(Xd, metric, w).compute(), expected, atol=1e-10)


@pytest.mark.parametrize("tile", [4, 16, 100])
def test_feature_kernel_matmul_rbf(X, rng, tile):
    Xn, Xd = X
    B = rng.normal(size=(57, 2))
    k = lambda a, b: np.exp(-((a[:, :, None] - b[:, None, :]) ** 2).sum(0) / 10)  # noqa: E731
    V = k(Xn, Xn)
    np.testing.assert_allclose(
        feature_kernel_matmul(Xd, k, B, tile=tile).compute(), V @ B, rtol=1e-10
    )
    np.testing.assert_allclose(
        feature_kernel_matmul(Xd, k, B[:, 0], tile=tile).compute(), V @ B[:, 0], rtol=1e-10
    )
    # X held in memory: an ndarray from the same tiles
    np.testing.assert_allclose(feature_kernel_matmul(Xn, k, B, tile=tile), V @ B, rtol=1e-10)
    np.testing.assert_allclose(
        feature_kernel_matmul(Xn, k, B[:, 0], tile=tile), V @ B[:, 0], rtol=1e-10
    )


def test_feature_kernel_matmul_rejects_bad_kernel(X):
    Xn, Xd = X
    with pytest.raises(ValueError, match="kernel returned shape"):
        feature_kernel_matmul(Xd, lambda a, b: np.ones((2, 2)), np.ones(57), tile=8).compute()
    with pytest.raises(ValueError, match="kernel returned shape"):
        feature_kernel_matmul(Xn, lambda a, b: np.ones((2, 2)), np.ones(57), tile=8)
    with pytest.raises(ValueError, match="B has 56 rows but X has 57 features"):
        feature_kernel_matmul(Xn, lambda a, b: a.T @ b, np.ones(56), tile=8)


@pytest.mark.parametrize("method", ["tsqr", "gram"])
def test_tall_skinny_svd(X, method):
    Xn, Xd = X
    M = Xd.T  # feature-major (57 × 9)
    U, s, Vt = tall_skinny_svd(M, method=method)
    np.testing.assert_allclose((U.compute() * s) @ Vt, Xn.T, atol=1e-9)
    np.testing.assert_allclose(s, np.linalg.svd(Xn.T, compute_uv=False), rtol=1e-9)


def test_tall_skinny_qr(X):
    Xn, Xd = X
    Q, R = tall_skinny_qr(Xd.T)
    Q, R = Q.compute(), R.compute()
    np.testing.assert_allclose(Q @ R, Xn.T, atol=1e-10)
    np.testing.assert_allclose(Q.T @ Q, np.eye(9), atol=1e-10)


def test_khatri_rao(X, rng):
    Xn, Xd = X
    P = rng.normal(size=(57, 3))
    Pd = da.from_array(P, chunks=(20, 3))  # deliberately different row chunks
    W = (Xn.T[:, :, None] * P[:, None, :]).reshape(57, -1)
    np.testing.assert_allclose(khatri_rao(Xd.T, Pd).compute(), W)
    np.testing.assert_allclose(khatri_rao_gram(Xd.T, Pd, row_batch=4).compute(), W.T @ W)


@pytest.mark.parametrize("k", [1, 3])
def test_khatri_rao_block_products(rng, k):
    m, p = rng.normal(size=(40, 7)), rng.normal(size=(40, k))
    W = (m[:, :, None] * p[:, None, :]).reshape(40, -1)
    np.testing.assert_allclose(khatri_rao_gram_block(m, p), W.T @ W, atol=1e-12)
    G32 = khatri_rao_gram_block(m, p, np.float32)
    assert G32.dtype == np.float64  # float32 products, returned for float64 accumulation
    np.testing.assert_allclose(G32, W.T @ W, rtol=1e-5, atol=1e-5 * np.abs(W.T @ W).max())
    assert np.abs(G32 - W.T @ W).max() > 0  # the products were taken in float32
    u, a = rng.normal(size=7 * k), rng.normal(size=40)
    np.testing.assert_allclose(khatri_rao_matvec(m, p, u), W @ u, atol=1e-12)
    np.testing.assert_allclose(khatri_rao_rmatvec(m, p, a), W.T @ a, atol=1e-12)


def test_map_and_sum_one_pass(X, rng):
    Xn, Xd = X
    w = rng.random(57)
    calls = []

    def f(xb, wb):
        calls.append(xb.shape[1])
        return xb.sum(0) * wb, [(xb * wb) @ xb.T, xb.max(0).sum()[None]]

    mapped, (gram, mx) = map_and_sum(f, Xd, da.from_array(w, chunks=13), shapes=[(9, 9), (1,)])
    got = dask.compute(mapped, gram, mx, scheduler="sync")
    np.testing.assert_allclose(got[0], Xn.sum(0) * w)
    np.testing.assert_allclose(got[1], (Xn * w) @ Xn.T)
    np.testing.assert_allclose(got[2], [Xn.max(0).sum()])
    assert sum(calls) == 57 and len(calls) == Xd.numblocks[1]  # every block read once


def test_graphs_over_closures_are_built_without_pickling_them(X, rng, monkeypatch):
    # an iterative method builds a reduction over a closure of its current iterate at every
    # step; naming the layer by tokenizing the closure cloudpickles it (and what it holds)
    import cloudpickle

    Xn, Xd = X
    big = rng.normal(size=(9, 9))
    pickled = []
    real = cloudpickle.dumps
    monkeypatch.setattr(cloudpickle, "dumps", lambda *a, **k: pickled.append(1) or real(*a, **k))
    sums = [sum_over_blocks(lambda b, c=c: c * (b @ b.T), Xd, shape=(9, 9)) for c in (1.0, 2.0)]
    maps = [map_features(lambda b, c=c: c * b.sum(0), Xd) for c in (1.0, 2.0)]
    mapped, (gram,) = map_and_sum(lambda b: (b.sum(0), [big @ (b @ b.T)]), Xd, shapes=[(9, 9)])
    assert pickled == []
    # fresh names: two closures that differ only in what they capture never share keys
    got = dask.compute(*sums, *maps, mapped, gram, scheduler="sync")
    np.testing.assert_allclose(got[1], 2 * got[0])
    np.testing.assert_allclose(got[3], 2 * got[2])
    np.testing.assert_allclose(got[5], big @ (Xn @ Xn.T))


@pytest.mark.parametrize("n", [30, 200])
def test_leading_eigh(rng, n):
    A = rng.normal(size=(n, n))
    A = A + A.T
    evals = np.linalg.eigvalsh(A)
    w, V = leading_eigh(lambda v: A @ v, n, k=2, which="LA")
    np.testing.assert_allclose(w, evals[::-1][:2], rtol=1e-8)
    np.testing.assert_allclose(A @ V, V * w, atol=1e-6)
    w, _ = leading_eigh(lambda v: A @ v, n, k=1, which="LM")
    assert np.isclose(abs(w[0]), np.abs(evals).max())


@pytest.mark.parametrize("method", ["network", "rowsort"])
@pytest.mark.parametrize("data", ["continuous", "ties", "signed zeros", "float64"])
@pytest.mark.parametrize("n1", [1, 17, 30])
def test_ks_columns_matches_scipy(rng, data, n1, method):
    """Both sorted-key KS kernels equal scipy's ks_2samp, ties and −0.0 included."""
    import scipy.stats

    from fsdask.linalg.twosample import ks_columns

    X = rng.normal(size=(41, 150)).astype(np.float32)
    if data == "ties":
        X = np.round(X * 2).astype(np.float32)
    elif data == "signed zeros":
        X = np.where(X > 0.3, X, np.where(X > 0, np.float32(0.0), np.float32(-0.0))).astype(
            np.float32
        )
    elif data == "float64":
        X = X.astype(np.float64)
    first = np.zeros(41, bool)
    first[rng.choice(41, n1, replace=False)] = True
    out = ks_columns(X, first, with_screen=True, method=method)
    ref = scipy.stats.ks_2samp(X[first], X[~first], axis=0).statistic
    np.testing.assert_allclose(out[0], ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_array_equal(out[2], X.min(0))
    np.testing.assert_array_equal(out[3], X.max(0))


@pytest.mark.parametrize(
    "n1, n2",
    [(1, 1), (1, 2), (2, 1), (3, 5), (8, 8), (9, 7), (50, 50), (64, 1), (33, 95), (200, 130)],
)
def test_ks_network_kernel_equals_rowsort_and_scipy(rng, n1, n2):
    """The sorting-network kernel gives bit-identical D and screen to the row-sort kernel
    (and scipy's D), for uneven, one-sample and non-power-of-two groups, tiles of several
    widths (the last one partial) and heavy ties."""
    import scipy.stats

    from fsdask.linalg.twosample import ks_columns

    n = n1 + n2
    w = 700 if n < 100 else 90
    X = rng.normal(size=(n, w)).astype(np.float32)
    X[:, ::3] = np.round(X[:, ::3])  # ties within and across samples
    X[:, 1] = 2.5  # a constant column
    first = np.zeros(n, bool)
    first[rng.choice(n, n1, replace=False)] = True
    net = ks_columns(X, first, with_screen=True, method="network")
    row = ks_columns(X, first, with_screen=True, method="rowsort")
    np.testing.assert_array_equal(net, row)
    ref = scipy.stats.ks_2samp(X[first], X[~first], axis=0).statistic
    np.testing.assert_allclose(net[0], ref, rtol=0, atol=1e-12)
    assert net[0, 1] == 0
    # a column slice of a block (rows not contiguous) is read in place
    np.testing.assert_array_equal(ks_columns(X[:, 5:40], first, method="network"), row[:1, 5:40])


def test_ks_columns_auto_kernel_by_sample_count(rng, monkeypatch):
    """``method="auto"`` takes the network kernel up to _NETWORK_MAX samples, the row sorts above."""
    import fsdask.linalg.twosample as ts

    real, used = ts._ks_by_network, []

    def spy(xb, *args):
        used.append(xb.shape[0])
        return real(xb, *args)

    monkeypatch.setattr(ts, "_ks_by_network", spy)
    for n in (ts._NETWORK_MAX, ts._NETWORK_MAX + 1):
        X = rng.normal(size=(n, 40)).astype(np.float32)
        first = np.arange(n) % 3 == 0
        out = ts.ks_columns(X, first, with_screen=True)
        np.testing.assert_array_equal(
            out, ts.ks_columns(X, first, with_screen=True, method="rowsort")
        )
    assert used == [ts._NETWORK_MAX]


@pytest.mark.parametrize("m", [1, 2, 4, 8, 9, 16])
def test_batcher_network_sorts_every_01_input(m):
    """0–1 principle: a comparator network sorts everything iff it sorts all 0–1 inputs; the
    padding-resolved networks (sizes below a power of two) and the merge are checked too."""
    from fsdask.linalg.twosample import ks_network

    for n1, n2 in {(m, m), (max(1, m - 3), m), (m, max(1, m // 2 + 1))}:
        sort_c, merge_c, init, order = ks_network(n1, n2)
        n = n1 + n2
        assert sorted(order) == list(range(n))
        seen = np.zeros(n, bool)  # a "fresh" merge comparator meets two unmerged rows
        for a, b, fresh in merge_c:
            assert (
                fresh == (not seen[a] and not seen[b])
                and (fresh or init[a] or seen[a])
                and (fresh or init[b] or seen[b])
            )
            seen[a] = seen[b] = True
        assert np.all(init | seen)
        if n > 20:
            continue
        codes = np.arange(2**n)
        X = ((codes[None, :] >> np.arange(n)[:, None]) & 1).astype(np.int8)  # every 0–1 input
        lab = np.repeat((np.arange(n) < n1)[:, None], X.shape[1], axis=1)
        ones1 = X[:n1].sum(0)
        for a, b in sort_c:
            X[a], X[b] = np.minimum(X[a], X[b]), np.maximum(X[a], X[b])
        assert np.all(np.diff(X[:n1], axis=0) >= 0) and np.all(np.diff(X[n1:], axis=0) >= 0)
        for a, b, _ in merge_c:
            swap = X[a] > X[b]
            X[a], X[b] = np.minimum(X[a], X[b]), np.maximum(X[a], X[b])
            lab[a], lab[b] = np.where(swap, lab[b], lab[a]), np.where(swap, lab[a], lab[b])
        assert np.all(np.diff(X[order], axis=0) >= 0)
        assert np.all(lab.sum(0) == n1) and np.all((X * lab).sum(0) == ones1)  # labels follow keys


def test_ks_columns_screen_counts_nonfinite(rng):
    from fsdask.linalg.twosample import ks_columns

    X = rng.normal(size=(12, 5)).astype(np.float32)
    X[3, 1], X[0, 1], X[5, 4], X[7, 2] = np.nan, np.inf, -np.inf, -np.nan
    for method in ("network", "rowsort"):
        out = ks_columns(X, np.arange(12) % 3 == 0, with_screen=True, method=method)
        np.testing.assert_array_equal(out[1], [0, 2, 1, 0, 1])
    with pytest.raises(ValueError, match="both groups"):
        ks_columns(X, np.ones(12, bool))
    with pytest.raises(ValueError, match="method="):
        ks_columns(X, np.arange(12) % 3 == 0, method="bogus")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_center_unit_columns(rng, dtype):
    """Centred unit-norm columns equal numpy's over several tiles; constant columns stay 0,
    also a float64 0.1 whose mean is off by an ulp; a column varying in its last bit does not."""
    from fsdask.linalg.moments import center_unit_columns

    X = (rng.normal(size=(37, 1300)) * 3 + 50).astype(dtype)
    X[:, 5], X[:, 6], X[:, 7] = 0.0, 0.1, 1 / 3
    one = np.float32(1.0)
    X[:, 8] = one
    X[::2, 8] = np.nextafter(one, np.float32(2))
    out = center_unit_columns(X)
    assert out.dtype == np.float64 and out.shape == X.shape
    Xc = X.astype(np.float64) - X.astype(np.float64).mean(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = Xc / np.linalg.norm(Xc, axis=0)
    live = np.r_[0:5, 8:1300]
    np.testing.assert_allclose(out[:, live], ref[:, live], rtol=1e-12, atol=1e-14)
    assert not out[:, 5:8].any()
    np.testing.assert_allclose(np.linalg.norm(out[:, live], axis=0), 1.0, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_class_moments_match_numpy(rng, dtype):
    """Fused class moments (two-pass, float64) equal numpy's, over several column tiles."""
    from fsdask.linalg.moments import class_moments

    n, w, C = 23, 1300, 3
    X = (rng.normal(size=(n, w)) * 3 + 1e4).astype(dtype)  # a large offset: must not cancel
    X[:, 5] = 7.0
    X[2, 9] = np.nan
    X[4, 11] = -np.inf
    codes = rng.integers(0, C, n)
    codes[:C] = np.arange(C)
    yw = rng.normal(size=n)
    m = class_moments(X, codes, C, yw)
    Xf = X.astype(np.float64)
    for c in range(C):
        xc = Xf[codes == c]
        ok = np.isfinite(xc).all(0)
        np.testing.assert_allclose(m.mean[c][ok], xc.mean(0)[ok], rtol=1e-12)
        np.testing.assert_allclose(m.var[c][ok], xc.var(0, ddof=1)[ok], rtol=1e-9, atol=1e-9)
        assert m.counts[c] == (codes == c).sum()
    ok = np.isfinite(Xf).all(0)
    np.testing.assert_allclose(m.dot[ok], (yw @ Xf)[ok], rtol=1e-10)
    np.testing.assert_array_equal(m.screen[0], (~np.isfinite(Xf)).sum(0))
    np.testing.assert_array_equal(m.screen[1][ok], Xf.min(0)[ok])
    np.testing.assert_array_equal(m.screen[2][ok], Xf.max(0)[ok])
    assert m.var[:, 5].max() == 0


def test_l1_ball_thresholds_against_sort(rng):
    from fsdask.linalg import l1_ball_thresholds, project_l1_ball_rows, prox_linf_rows

    V = rng.normal(size=(40, 33))
    V[:4] = 1.0  # ties
    V[4] = 0.0  # zero row
    V[5, :30] = 0.0  # mostly zeros
    rad = rng.uniform(0, 20, size=40)
    rad[:2] = 0.0  # radius 0: projection 0, prox = v
    rad[6] = 1e6  # inside the ball: θ = 0
    th = l1_ball_thresholds(V, rad)
    for i in range(40):  # θ from the sorted magnitudes (Duchi et al. 2008)
        u = np.sort(np.abs(V[i]))[::-1]
        if u.sum() <= rad[i]:
            assert th[i] == 0
            continue
        cs = np.cumsum(u)
        rho = max(j for j in range(1, u.size + 1) if u[j - 1] >= (cs[j - 1] - rad[i]) / j)
        assert th[i] == pytest.approx((cs[rho - 1] - rad[i]) / rho, abs=1e-12)
    P = project_l1_ball_rows(V, rad)
    np.testing.assert_allclose(np.abs(P).sum(1), np.minimum(np.abs(V).sum(1), rad), atol=1e-9)
    np.testing.assert_allclose(prox_linf_rows(V, rad), V - P, atol=1e-12)
    assert np.all(P[:2] == 0) and np.all(P[6] == V[6])


def test_prox_linf_grad_step_matches_numpy(rng):
    from fsdask.linalg.prox import prox_linf_grad_step, prox_linf_rows

    Y, G, A = (rng.normal(size=(7, 40)) for _ in range(3))
    c = rng.uniform(0.1, 1.0, 7)
    tau = np.r_[0.0, 1e3, rng.uniform(0.5, 20.0, 5)]  # τ = 0 keeps the row; a huge τ zeroes it
    An, dots = prox_linf_grad_step(Y, G, A, c, tau)
    ref = prox_linf_rows(Y - c[:, None] * G, tau)
    np.testing.assert_allclose(An, ref, atol=1e-12)
    np.testing.assert_allclose(dots, ((Y - ref) * (ref - A)).sum(1), rtol=1e-10, atol=1e-10)
    assert np.all(An[1] == 0) and np.allclose(An[0], Y[0] - c[0] * G[0])
    out = (np.empty_like(Y), np.empty_like(Y))  # fused momentum point, into given buffers
    An2, dots2, Yn = prox_linf_grad_step(Y, G, A, c, tau, beta=0.3, out=out)
    assert An2 is out[0] and Yn is out[1]
    np.testing.assert_array_equal(An2, An)
    np.testing.assert_array_equal(dots2, dots)
    np.testing.assert_allclose(Yn, An + 0.3 * (An - A), atol=1e-14)


def test_prox_linf_grad_step_split_over_threads_equals_one_thread(rng, monkeypatch):
    from fsdask.linalg import prox

    # 5 rows × 300 000 entries: over the threading size, rows split unevenly between cores
    Y, G, A = (rng.normal(size=(5, 300_000)) for _ in range(3))
    c, tau = rng.uniform(0.1, 1.0, 5), np.r_[0.0, 1e9, rng.uniform(10.0, 1e4, 3)]
    assert Y.size >= prox._THREADED_ENTRIES
    threaded = prox.prox_linf_grad_step(Y, G, A, c, tau, beta=0.4)
    monkeypatch.setattr(prox, "_THREADED_ENTRIES", np.inf)
    serial = prox.prox_linf_grad_step(Y, G, A, c, tau, beta=0.4)
    for a, b in zip(threaded, serial):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(
        threaded[0], prox.prox_linf_rows(Y - c[:, None] * G, tau), atol=1e-12
    )


@pytest.mark.parametrize("block_bytes", [1, 8 * 500 * 7, 32 * 2**20])
def test_row_l1_norms_is_the_plain_product_in_any_blocks(rng, block_bytes):
    """Blocks on the thread pool (one BLAS thread each) give the sums of the whole product,
    to the bit, whatever the block size: the KKT scan's decisions do not depend on it."""
    from fsdask.linalg import row_l1_norms

    M, E = rng.normal(size=(203, 9)), rng.normal(size=(9, 500))
    C = rng.normal(size=(203, 500))
    np.testing.assert_array_equal(row_l1_norms(M, E, block_bytes=block_bytes), np.abs(M @ E).sum(1))
    np.testing.assert_array_equal(
        row_l1_norms(M, E, C, block_bytes=block_bytes), np.abs(M @ E - C).sum(1)
    )


def test_row_l1_norms_screened(rng):
    from fsdask.linalg import row_l1_norms_screened

    M = rng.normal(size=(300, 6)) * rng.uniform(0.01, 3, size=(300, 1))
    E = rng.normal(size=(6, 500))
    ref = np.abs(M @ E).sum(1)
    vals, exact = row_l1_norms_screened(M, E, above=np.quantile(ref, 0.8))
    assert np.all(vals >= ref - 1e-9)  # a safe upper bound everywhere
    np.testing.assert_allclose(vals[exact], ref[exact])  # exact where computed
    assert exact[ref > np.quantile(ref, 0.8)].all()  # every row above the threshold is exact
    assert 0 < exact.sum() < 300  # and the bound certified some rows
    vals, exact = row_l1_norms_screened(M, E)  # above=None: the maximum is exact
    assert vals.max() == pytest.approx(ref.max()) and exact[np.argmax(ref)]


def test_row_l1_norms_screened_from_a_reference(rng):
    """``upper`` = last values + the bound of the change: still safe, and far fewer exact rows."""
    from fsdask.linalg import row_l1_bound, row_l1_norms_screened

    M = rng.normal(size=(400, 5)) * rng.uniform(0.01, 3, size=(400, 1))
    E0 = rng.normal(size=(5, 300))
    E1 = E0 + 1e-3 * rng.normal(size=E0.shape)
    ref1 = np.abs(M @ E1).sum(1)
    assert np.all(row_l1_bound(M, E1) >= ref1 - 1e-9)
    above = np.quantile(ref1, 0.9)
    v0, _ = row_l1_norms_screened(M, E0, above)
    v1, exact = row_l1_norms_screened(M, E1, above, upper=v0 + row_l1_bound(M, E1 - E0))
    _, exact_plain = row_l1_norms_screened(M, E1, above)
    assert np.all(v1 >= ref1 - 1e-9)
    np.testing.assert_allclose(v1[exact], ref1[exact])
    assert exact[ref1 > above].all()
    assert exact.sum() < exact_plain.sum()


def test_row_l1_bound_is_the_smaller_of_two(rng):
    """Triangle bound over the SVD and Cauchy–Schwarz √q‖row‖₂: safe, and ≤ each (here ~1.4×)."""
    from fsdask.linalg import row_l1_bound

    M, E = rng.normal(size=(300, 20)), rng.normal(size=(20, 2000))
    ref = np.abs(M @ E).sum(1)
    b = row_l1_bound(M, E)
    assert np.all(b >= ref * (1 - 1e-12))
    assert np.all(b <= np.sqrt(2000) * np.linalg.norm(M @ E, axis=1) * (1 + 1e-9))
    assert np.median(b / ref) < 1.5
    Mf, flat = rng.normal(size=(10, 3)), np.ones((3, 50))  # equal magnitudes: C–S is tight
    assert np.all(row_l1_bound(Mf, flat) >= np.abs(Mf @ flat).sum(1) * (1 - 1e-12))


@pytest.mark.parametrize("shape", [(20, 3000), (40, 25), (7, 7)])
def test_row_l1_bound_factors_a_wide_residual_as_its_transpose(rng, shape):
    """The bound's thin SVD of a wide E is taken on Eᵀ (faster in LAPACK): the same
    singular values and subspaces to rounding, so the same bound to rounding."""
    from fsdask.linalg import row_l1_bound

    E = rng.normal(size=shape) * rng.uniform(0.1, 10, size=(shape[0], 1))
    M = rng.normal(size=(200, shape[0]))
    U, s, Vt = np.linalg.svd(E, full_matrices=False)
    MU = M @ U  # the bound written with the direct factorisation
    direct = np.minimum(
        np.abs(MU) @ (s * np.abs(Vt).sum(axis=1)),
        np.sqrt(shape[1]) * np.sqrt(np.square(MU * s).sum(axis=1)) * (1.0 + 1e-10),
    )
    np.testing.assert_allclose(row_l1_bound(M, E), direct, rtol=1e-10)
    assert np.all(row_l1_bound(M, E) >= np.abs(M @ E).sum(1) * (1 - 1e-12))


def test_blas_threads_for_parallel_blocks_only():
    """One BLAS thread inside computes of several blocks on the threaded scheduler; the client keeps its threads."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import dask

    from fsdask.linalg.threads import blas_threads_for

    def blas_threads(*_):  # the most of any library (tests/test_threads.py: SCS's is one)
        return np.array(
            [
                max(
                    d["num_threads"]
                    for d in threadpoolctl.threadpool_info()
                    if d["user_api"] == "blas"
                )
            ]
        )

    before = int(blas_threads()[0])
    many, one = da.ones((4, 100), chunks=(4, 25)), da.ones((4, 100), chunks=(4, 100))
    inside = da.map_blocks(
        blas_threads, many, chunks=(1,), drop_axis=[0, 1], new_axis=None, dtype=int
    )
    with dask.config.set(scheduler="threads", num_workers=2):
        with blas_threads_for(many):
            assert set(inside.compute().tolist()) == {1}  # in the tasks
            assert int(blas_threads()[0]) == before  # on the client, between computes
        with blas_threads_for(one):
            assert set(inside.compute().tolist()) == {before}
    with dask.config.set(scheduler="sync"), blas_threads_for(many):
        assert set(inside.compute().tolist()) == {before}
    rows = da.ones((100, 4), chunks=(25, 4))  # sample blocks, as an atlas is read
    inside_rows = da.map_blocks(
        blas_threads, rows, chunks=(1,), drop_axis=[0, 1], new_axis=None, dtype=int
    )
    with dask.config.set(scheduler="threads", num_workers=2), blas_threads_for(rows):
        assert set(inside_rows.compute().tolist()) == {1}
    assert int(blas_threads()[0]) == before


@pytest.mark.parametrize("name", [n for n in fsdask.linalg.__all__ if n[0].islower()])
def test_public_linalg_functions_document_parameters_returns_and_memory(name):
    """numpydoc Parameters and Returns, and what the function holds in memory (the way dask's
    ``tsqr`` states it): the building blocks are read by people sizing a cluster."""
    import inspect

    doc = inspect.getdoc(getattr(fsdask.linalg, name)) or ""
    missing = [s for s in ("Parameters\n---", "Returns\n---", "emory") if s not in doc]
    assert not missing, f"fsdask.linalg.{name}: docstring lacks {missing}"
