"""Issue 40 item 1: the sample-blocked seam (``Execution.sum_blocks``, the block kernels of
``linalg/colstats``), the screen and the univariate filters on sample-blocked X.

Every layout — in-memory dense or CSR, dask dense or CSR blocks, one row block or several —
gives the same sums as NumPy on the whole matrix, and the filters give the fit of the
feature-blocked path (rtol 1e-10, the same selection).
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from fsdask.linalg.colstats import (
    MOMENT_MAXIMA,
    SCREEN_MAXIMA,
    moment_rows,
    moment_sums,
    screen_sums,
    xt_dot,
)
from fsdask.linalg.execution import Execution


def _sparse_counts(rng, n=240, p=37, density=0.2):
    X = rng.poisson(3.0, (n, p)).astype(np.float64)
    X[rng.random((n, p)) > density] = 0
    X[:, 5] = 0  # a column with no stored value
    X[:, 6] = 4.0  # and one with no implicit zero
    return X


def _layouts(X):
    """The same matrix in every layout sum_blocks accepts."""
    csr = sp.csr_matrix(X)
    return {
        "numpy": X,
        "csr": csr,
        "dask-features": da.from_array(X, chunks=(-1, 11)),
        "dask-samples": da.from_array(X, chunks=(53, 16)),
        "dask-csr": da.from_array(csr, chunks=(53, -1), asarray=False),
        "dask-csr-cols": da.from_array(csr, chunks=(64, 20), asarray=False),
    }


@pytest.mark.parametrize("layout", list(_layouts(np.zeros((2, 2)))))
def test_sum_blocks_moments_equal_numpy(layout, rng):
    X = _sparse_counts(rng)
    X[3] -= 1.5  # negative values: the minimum is stored, not an implicit zero
    n, p = X.shape
    codes = rng.integers(0, 3, n)
    w = rng.normal(size=n)
    Xl = _layouts(X)[layout]
    ex = Execution()
    K = ex.first_row(Xl)
    assert (K is None) == (layout == "dask-features")

    def fn(xb, c, ww, *k):
        return moment_sums(xb, c, ww, *k, n_classes=3)

    got = ex.sum_blocks(
        fn,
        Xl,
        codes,
        w,
        shape=(moment_rows(3),),
        maxima=MOMENT_MAXIMA,
        columns=() if K is None else (K,),
    )
    assert got.shape == (moment_rows(3), p)
    K = X[0]
    D = X - K
    want_s = np.stack([D[codes == c].sum(0) for c in range(3)])
    want_q = np.stack([(D[codes == c] ** 2).sum(0) for c in range(3)])
    np.testing.assert_allclose(got[:3], want_s, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(got[3:6], want_q, rtol=1e-12)
    np.testing.assert_allclose(got[6], w @ D, rtol=1e-10, atol=1e-9)
    assert not got[7].any()  # no NaN/Inf
    np.testing.assert_array_equal(got[8], K)
    np.testing.assert_array_equal(-got[9], X.min(0))
    np.testing.assert_array_equal(got[10], X.max(0))
    assert ex.passes == (0 if layout in ("numpy", "csr") else 1)


@pytest.mark.parametrize("layout", ["numpy", "csr", "dask-samples", "dask-csr"])
def test_screen_sums_count_nonfinite_and_implicit_zeros(layout, rng):
    X = _sparse_counts(rng)
    X[7, 2] = np.nan
    X[9, 2] = np.inf
    X[11, 8] = -np.inf
    got = Execution().sum_blocks(screen_sums, _layouts(X)[layout], shape=(3,), maxima=SCREEN_MAXIMA)
    fin = np.where(np.isnan(X), -np.inf, X)
    np.testing.assert_array_equal(got[0], (~np.isfinite(X)).sum(0))
    np.testing.assert_array_equal(got[2], fin.max(0))
    fin = np.where(np.isnan(X), np.inf, X)
    np.testing.assert_array_equal(-got[1], fin.min(0))
    assert -got[1][5] == got[2][5] == 0  # all implicit zeros: a constant column


@pytest.mark.parametrize("layout", ["numpy", "csr", "dask-samples", "dask-csr-cols"])
def test_sum_blocks_xt_dot(layout, rng):
    X = _sparse_counts(rng)
    M = rng.normal(size=(X.shape[0], 4))
    got = Execution().sum_blocks(xt_dot, _layouts(X)[layout], M, shape=(4,))
    np.testing.assert_allclose(got, (X.T @ M).T, rtol=1e-12, atol=1e-12)


def test_sum_blocks_integer_counts_and_duplicates(rng):
    X = _sparse_counts(rng).astype(np.int32)
    csr = sp.csr_matrix(X)
    # the same matrix with one value split in two duplicate entries
    r = 1
    row0 = csr.indptr[r]
    j, v = csr.indices[row0], csr.data[row0]
    dup = sp.csr_matrix(
        (
            np.concatenate([csr.data[:row0], [v - 1, 1], csr.data[row0 + 1 :]]),
            np.concatenate([csr.indices[:row0], [j, j], csr.indices[row0 + 1 :]]),
            np.concatenate([csr.indptr[: r + 1], csr.indptr[r + 1 :] + 1]),
        ),
        shape=csr.shape,
    )
    assert not dup.has_canonical_format
    codes = np.zeros(X.shape[0], np.int64)
    for m in (X, csr, dup, da.from_array(dup, chunks=(50, -1), asarray=False)):
        got = Execution().sum_blocks(
            lambda xb, c: moment_sums(xb, c, None, np.zeros(X.shape[1])),
            m,
            codes,
            shape=(7,),
            maxima=MOMENT_MAXIMA,
        )
        np.testing.assert_array_equal(got[0], X.sum(0))
        np.testing.assert_array_equal(got[1], (X.astype(np.float64) ** 2).sum(0))


def test_sum_blocks_does_not_depend_on_threads(rng, monkeypatch):
    """In-memory rows are swept in fixed slices merged in a fixed order."""
    from fsdask.linalg import execution

    monkeypatch.setattr(execution, "ROW_SLICE_BYTES", 64 * 8)  # many slices and tree nodes
    X = rng.normal(100, 1, (2000, 64))
    fn = lambda xb: xb.sum(0)[None]  # noqa: E731
    runs = []
    for n_cores in (1, 2, 3):
        monkeypatch.setattr(execution, "cores", lambda n_cores=n_cores: n_cores)
        runs.append(Execution().sum_blocks(fn, X, shape=(1,)))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    np.testing.assert_allclose(runs[0][0], X.sum(0), rtol=1e-13)


def test_sum_blocks_graph_holds_no_dense_block(rng):
    """CSR blocks reach the kernel as CSR: no task of the graph densifies them."""
    from fsdask.linalg.reductions import sum_over_row_blocks

    X = _sparse_counts(rng)
    Xd = da.from_array(sp.csr_matrix(X), chunks=(60, -1), asarray=False)
    seen = []

    def fn(xb, c):
        seen.append(type(xb))
        return moment_sums(xb, c, n_classes=1)

    codes = np.zeros(X.shape[0], np.int64)
    lazy = sum_over_row_blocks(fn, Xd, codes, shape=(7,), maxima=MOMENT_MAXIMA)
    lazy.compute(scheduler="sync")
    assert seen and all(t is sp.csr_matrix for t in seen)


def test_sum_blocks_row_and_column_arguments_of_different_widths(rng):
    """Two row arguments (n × 2, n × 3) and two column arguments (4 × p, p) of their own widths
    reach the kernel as their own blocks; the sums equal the in-memory ones."""
    from fsdask.linalg.reductions import sum_over_row_blocks

    X = rng.normal(size=(50, 9))
    A, B = rng.normal(size=(50, 2)), rng.normal(size=(50, 3))
    C, d = rng.normal(size=(4, 9)), rng.normal(size=9)

    def fn(xb, a, b, c, dd):
        return np.stack([a.sum() * xb.sum(0), (b @ np.ones(3)) @ xb, c.sum(0) * xb.sum(0), dd])

    Xd = da.from_array(X, chunks=(20, 4))
    got = sum_over_row_blocks(fn, Xd, A, B, columns=(C, d), shape=(4,)).compute(scheduler="sync")
    rows = (slice(0, 20), slice(20, 40), slice(40, 50))  # X's row blocks
    want = np.stack(
        [
            sum(A[r].sum() * X[r].sum(0) for r in rows),
            B.sum(1) @ X,
            C.sum(0) * X.sum(0),
            len(rows) * d,
        ]
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


# --------------------------------------------------------------------------- the filters
STREAMED = ("variance", "pearson", "fisher", "f", "ttest", "snr", "fold_change")
N, P = 120, 30


def _data(rng, kind):
    """(X dense, y for each statistic): counts with implicit zeros (sparse) or shifted normals,
    with one constant feature (all implicit zeros for the sparse data)."""
    if kind == "sparse":
        X = rng.poisson(2.0, (N, P)).astype(np.float64)
        X[rng.random((N, P)) > 0.3] = 0
        X[:, :4] += 3.0 * (X[:, :4] > 0) * np.arange(N)[:, None] % 2  # informative features
        X[:, 9] = 0.0
    else:
        X = rng.normal(size=(N, P)) + 50.0  # a large offset: the shifted sums keep the digits
        X[:, :4] += 1.5 * (np.arange(N) % 2)[:, None]
        X[:, 9] = 2.5
    return X


def _y(stat, X, rng):
    if stat == "variance":
        return None
    if stat == "pearson":
        return X[:, 0] + rng.normal(size=N)
    if stat in ("fisher", "f"):
        return np.arange(N) % 3
    return np.arange(N) % 2


def _sample_layouts(X):
    csr = sp.csr_matrix(X)
    return {
        "csr": csr,
        "dask-dense-samples": da.from_array(X, chunks=(40, 13)),
        "dask-csr-samples": da.from_array(csr, chunks=(40, -1), asarray=False),
        "dask-csr-blocks": da.from_array(csr, chunks=(48, 16), asarray=False),
    }


class _TaskOutputs:
    """A dask callback recording the type and shape of every task's result (threads)."""

    def __init__(self):
        from dask.callbacks import Callback

        self.seen = []
        self.cb = Callback(posttask=self._post)

    def _post(self, key, result, dsk, state, worker_id):
        self.seen.append((type(result), getattr(result, "shape", None)))

    def dense_row_blocks(self, min_rows):
        """Dense 2-D results with at least ``min_rows`` rows: a densified block of samples."""
        return [
            s
            for t, s in self.seen
            if t is np.ndarray and s is not None and len(s) == 2 and s[0] >= min_rows
        ]


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("stat", STREAMED)
def test_filter_sample_blocked_equals_feature_blocked(stat, kind, rng, tmp_path, monkeypatch):
    import tempfile

    import dask

    import fsdask
    from fsdask.methods.filters import score_block

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a scratch copy would go
    X = _data(rng, kind)
    y = _y(stat, X, rng)
    ref = fsdask.Filter(stat, n_features_to_select=5).fit(X, y)  # feature blocks
    # the former feature-blocked kernel (two-pass moments of the whole columns)
    active = np.ones(P, bool)
    active[9] = False
    codes = None if stat in ("variance", "pearson") else np.unique(y, return_inverse=True)[1]
    yc = None if stat != "pearson" else y - y.mean()
    old = score_block(
        X[:, active], stat, codes, 3 if stat in ("f", "fisher") else 2, yc, False, kind == "sparse"
    )
    np.testing.assert_allclose(ref.scores_[active], old, rtol=1e-10)
    for name, Xs in _sample_layouts(X).items():
        rec = _TaskOutputs()
        with dask.config.set(scheduler="threads"), rec.cb:
            f = fsdask.Filter(stat, n_features_to_select=5).fit(Xs, y)
        np.testing.assert_allclose(f.scores_, ref.scores_, rtol=1e-10, err_msg=name)
        np.testing.assert_array_equal(f.support_, ref.support_, err_msg=name)
        np.testing.assert_array_equal(f.ranking_, ref.ranking_, err_msg=name)
        assert f.scores_[9] == 0 and not f.active_features_[9]
        if f.pvalues_ is not None:
            np.testing.assert_allclose(f.pvalues_, ref.pvalues_, rtol=1e-8, err_msg=name)
        assert f.n_passes_ == 1
        if "csr" in name:
            assert rec.dense_row_blocks(min_rows=12) == [], name
    assert not list(tmp_path.iterdir())  # no scratch copy


def test_filter_streams_integer_counts_as_stored(rng):
    """Integer counts in CSR blocks: no float copy of X; the same scores as float64."""
    import fsdask
    from fsdask._validation import check_array

    X = _data(rng, "sparse")
    y = np.arange(N) % 2
    csr = sp.csr_matrix(X.astype(np.int32))
    Xd = da.from_array(csr, chunks=(40, -1), asarray=False)
    assert check_array(Xd, layout="samples").dtype == np.int32
    f = fsdask.Filter("ttest").fit(Xd, y)
    np.testing.assert_allclose(f.scores_, fsdask.Filter("ttest").fit(X, y).scores_, rtol=1e-10)


def test_screen_on_sample_blocks_names_nonfinite_and_implicit_zero_constants(rng):
    import fsdask
    from fsdask.errors import InputError

    X = _data(rng, "sparse")
    X[:, 3] = 0.0
    X[5, 3] = 7.0  # one stored value: the implicit zeros make it vary
    X[:, 11] = 4.0  # stored everywhere, constant
    Xd = da.from_array(sp.csr_matrix(X), chunks=(40, -1), asarray=False)
    f = fsdask.Filter("variance").fit(Xd)
    assert f.active_features_[3] and not f.active_features_[9] and not f.active_features_[11]
    X[50, 20] = np.nan
    Xd = da.from_array(sp.csr_matrix(X), chunks=(40, -1), asarray=False)
    with pytest.raises(InputError, match=r"1 NaN/Inf value\(s\) in 1 feature\(s\) \(first: #20\)"):
        fsdask.Filter("variance").fit(Xd)
    X[50, 20] = 1.0
    Xd = da.from_array(sp.csr_matrix(X), chunks=(40, -1), asarray=False)
    with pytest.raises(InputError, match=r"X has 2 constant feature\(s\) \(first: #9, #11\)"):
        fsdask.Filter("variance", on_constant="error").fit(Xd)


def test_non_streaming_method_converts_sample_blocks_once(rng, monkeypatch):
    """ks (a per-feature sort) and every method without ``streams_samples`` get feature
    blocks through fsdask.io.rechunk.to_feature_blocks."""
    import fsdask
    from fsdask.io import rechunk

    calls = []
    real = rechunk.to_feature_blocks

    def counted(X, **kw):
        calls.append(X.chunks)
        return real(X, **kw)

    monkeypatch.setattr("fsdask.base.to_feature_blocks", counted)
    X = _data(rng, "dense")
    y = np.arange(N) % 2
    assert not fsdask.Filter("ks").streams_samples and fsdask.Filter("ttest").streams_samples
    ks = fsdask.Filter("ks").fit(da.from_array(X, chunks=(40, 13)), y)
    np.testing.assert_array_equal(ks.scores_, fsdask.Filter("ks").fit(X, y).scores_)
    assert len(calls) == 1
    fsdask.Filter("ttest").fit(da.from_array(X, chunks=(40, 13)), y)
    assert len(calls) == 1  # streamed: not converted


def test_ks_refuses_a_sort_over_the_budget():
    import fsdask
    from fsdask.errors import InputError

    X = np.random.default_rng(0).normal(size=(400, 3))
    y = np.arange(400) % 2
    with dask_budget("8KiB"), pytest.raises(InputError, match="statistic='ks' sorts each"):
        fsdask.Filter("ks").fit(X, y)


def dask_budget(size):
    import dask

    return dask.config.set({"fsdask.memory-budget": size})


@pytest.mark.cluster
def test_filter_sample_blocked_on_a_2_process_cluster(cluster, rng):
    import dask

    import fsdask

    X = _data(rng, "sparse")
    y = np.arange(N) % 3
    Xd = da.from_array(sp.csr_matrix(X), chunks=(40, 16), asarray=False)
    with dask.config.set(scheduler=cluster):
        f = fsdask.Filter("f").fit(Xd, y)
    np.testing.assert_allclose(f.scores_, fsdask.Filter("f").fit(X, y).scores_, rtol=1e-10)


def test_filter_streams_a_sample_chunked_zarr_store_on_s3(s3, rng, tmp_path, monkeypatch):
    """A dense Zarr array chunked by samples on object storage (moto): read by its own
    sample chunks, no scratch copy, the same fit as in memory."""
    import tempfile

    import zarr

    import fsdask

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    bucket, opts = s3
    X = _data(rng, "dense").astype(np.float32)
    y = np.arange(N) % 3
    url = f"{bucket}/cells.zarr"
    z = zarr.create_array(
        store=url, shape=X.shape, chunks=(32, P), dtype="float32", storage_options=opts
    )
    z[:] = X
    Xd = da.from_zarr(url, storage_options=opts)
    assert len(Xd.chunks[0]) == 4  # sample-blocked
    f = fsdask.Filter("f", n_features_to_select=5).fit(Xd, y)
    ref = fsdask.Filter("f", n_features_to_select=5).fit(X, y)
    np.testing.assert_allclose(f.scores_, ref.scores_, rtol=1e-10)
    np.testing.assert_array_equal(f.support_, ref.support_)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("sparse", [False, True])
def test_one_sample_per_chunk_is_merged_not_a_task_per_sample(sparse, rng):
    import fsdask
    from fsdask._validation import check_array

    X = _data(rng, "sparse")
    src = sp.csr_matrix(X) if sparse else X
    Xd = da.from_array(src, chunks=(1, -1), asarray=not sparse)
    merged = check_array(Xd, layout="samples", check_finite=False)
    assert len(merged.chunks[0]) == 1 and sp.issparse(merged._meta) == sparse
    y = np.arange(N) % 2
    f = fsdask.Filter("ttest").fit(Xd, y)
    np.testing.assert_allclose(f.scores_, fsdask.Filter("ttest").fit(X, y).scores_, rtol=1e-10)


def test_filter_streams_csr_row_blocks_read_from_s3(s3, rng):
    """CSR arrays (indptr, indices, data) in Zarr on object storage, read row block by row
    block as CSR (what an AnnData-on-Zarr X is): the fit equals the in-memory fit."""
    import dask
    import zarr

    import fsdask

    bucket, opts = s3
    X = _data(rng, "sparse")
    csr = sp.csr_matrix(X.astype(np.float32))
    root = zarr.open_group(f"{bucket}/x.zarr", mode="w", storage_options=opts)
    for name in ("indptr", "indices", "data"):
        arr = getattr(csr, name)
        root.create_array(name, shape=arr.shape, dtype=arr.dtype, chunks=(64,))[:] = arr
    indptr = root["indptr"][:]

    def rows(r0, r1):
        g = zarr.open_group(f"{bucket}/x.zarr", mode="r", storage_options=opts)
        a, b = int(indptr[r0]), int(indptr[r1])
        data, idx = g["data"][a:b], g["indices"][a:b]
        return sp.csr_matrix((data, idx, indptr[r0 : r1 + 1] - a), shape=(r1 - r0, P))

    bounds = [(r, min(N, r + 40)) for r in range(0, N, 40)]
    meta = sp.csr_matrix((0, 0), dtype=np.float32)
    Xd = da.concatenate(
        [
            da.from_delayed(dask.delayed(rows)(r0, r1), (r1 - r0, P), dtype=np.float32, meta=meta)
            for r0, r1 in bounds
        ]
    )
    for stat in ("variance", "pearson", "ttest"):  # no class, a response, classes
        y = _y(stat, X, rng)
        got = fsdask.Filter(stat).fit(Xd, y).scores_
        np.testing.assert_allclose(got, fsdask.Filter(stat).fit(X, y).scores_, rtol=1e-10)


@pytest.mark.parametrize("weighted", [False, True])
def test_csr_class_sums_keep_the_row_order_to_the_bit(weighted, rng):
    """The CSR kernel takes the rows class by class (for speed); every class's sums must
    still add their values in row order: equal to the bit to a sequential reference."""
    n, p, C = 500, 40, 7
    X = rng.normal(size=(n, p)) * 10.0 ** rng.uniform(-3, 3, size=(n, p))
    X[rng.random((n, p)) > 0.4] = 0
    codes = rng.integers(0, C, n)
    w = rng.normal(size=n) if weighted else None
    out = moment_sums(sp.csr_matrix(X), codes, w, np.zeros(p), n_classes=C)
    s, q = np.zeros((C, p)), np.zeros((C, p))
    for i in range(n):  # the reference: row after row, as unbuffered sums do it
        j = np.flatnonzero(X[i])
        s[codes[i], j] += X[i, j]
        q[codes[i], j] += X[i, j] * X[i, j]
    np.testing.assert_array_equal(out[:C], s)
    np.testing.assert_array_equal(out[C : 2 * C], q)
