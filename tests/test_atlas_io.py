"""Atlas sources read by sample blocks as stored: AnnData CSR (``.h5ad``, AnnData-on-Zarr),
layers and raw, dense Zarr chunked by samples; local and S3; and their bad input.

Files are written by ``anndata`` and ``xarray`` themselves.  A sample-blocked X is compared
with the matrix (blocks densified here, in the test) and with ``layout="features"``, which
gives the feature-blocked path of before.
"""

import logging
import os
import tempfile

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import xarray as xr

anndata = pytest.importorskip("anndata")

import fsdask  # noqa: E402
from fsdask.cli import main  # noqa: E402
from fsdask.errors import InputError  # noqa: E402
from fsdask.io import ReadOptions  # noqa: E402
from fsdask.io.rechunk import to_feature_blocks  # noqa: E402

N, P = 60, 24
NNZ_BLOCK = 8 * 40  # chunk_bytes: about 40 non-zeros (float32 value + column index) a block


@pytest.fixture
def counts():
    rng = np.random.default_rng(7)
    C = rng.poisson(0.5, size=(N, P)).astype(np.int32)
    C[:, 0] += 1  # no empty cell unless a test makes one
    C[N // 2 :, :3] += 4
    return C


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """An empty TMPDIR: where every copy fsdask makes (a re-blocked store, a CSR matrix
    filed by feature block) would go."""
    tmp = tmp_path / "scratch"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp


def _adata(M) -> "anndata.AnnData":
    n, p = M.shape
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical(np.repeat(["B", "T"], n // 2))},
        index=[f"cell{i}" for i in range(n)],
    )
    a = anndata.AnnData(X=M, obs=obs, var=pd.DataFrame(index=[f"g{j}" for j in range(p)]))
    return a


def _full(C) -> "anndata.AnnData":
    a = _adata(scipy.sparse.csr_matrix(C.astype(np.float32)))
    a.layers["counts"] = scipy.sparse.csr_matrix(C * 2)  # integer counts
    a.raw = _adata(scipy.sparse.csr_matrix(C.astype(np.float32) + 1))
    return a


def write_zarr_by_cells(a, path, chunk: int) -> None:
    """AnnData-on-Zarr with CSR data/indices/indptr in chunks of ``chunk`` entries (about a
    cell per chunk), through anndata's dispatched writer (``write_zarr`` chunks only dense X)."""
    import zarr
    from anndata.experimental import write_dispatched

    def chunked(write, store, elem_name, elem, *, dataset_kwargs, iospec):
        if iospec.encoding_type in ("csr_matrix", "csc_matrix"):
            dataset_kwargs = dict(dataset_kwargs, chunks=(chunk,))
        write(store, elem_name, elem, dataset_kwargs=dataset_kwargs)

    write_dispatched(zarr.open_group(str(path), mode="w"), "/", a, callback=chunked)


def dense(X: da.Array) -> np.ndarray:
    """A sample-blocked X's values (each CSR block densified here, in the test)."""
    todense = X.map_blocks(
        lambda b: b.toarray() if scipy.sparse.issparse(b) else b, meta=np.empty((0, 0), X.dtype)
    )
    return todense.compute()


def assert_streams(X: da.Array, sparse: bool = True) -> None:
    """Several sample blocks read straight from the store (no rechunk, no copy), every block
    and the meta CSR (never a dense n × block array)."""
    assert len(X.chunks[0]) > 1 and X.chunks[1] == (X.shape[1],)
    layers = list(X.__dask_graph__().layers)  # the read; a column selection (drop-feature)
    assert layers[0].startswith(("fsdask-rows-", "fsdask-foreign-")), layers
    assert all(name.startswith("getitem-") for name in layers[1:]), layers
    kind = scipy.sparse.csr_matrix if sparse else np.ndarray
    assert isinstance(X._meta, kind)
    first = dask.compute(*X.to_delayed().ravel()[:3])
    assert all(isinstance(b, kind) for b in first)


def _put(s3, local, name):
    import s3fs

    bucket, opts = s3
    s3fs.S3FileSystem(**opts).put(str(local), f"{bucket}/{name}", recursive=local.is_dir())
    return f"{bucket}/{name}", {"storage_options": opts}


@pytest.mark.parametrize("kind", ["local", "s3"])
@pytest.mark.parametrize("where", ["h5ad", "zarr"])
def test_anndata_csr_streams_as_stored(where, kind, tmp_path, request, counts, scratch):
    C = counts
    a = _full(C)
    local = tmp_path / f"a.{where}"
    if where == "h5ad":
        a.write_h5ad(local)
    else:
        # about one cell per stored chunk (on S3 ten: each chunk is an object, sent one by one)
        write_zarr_by_cells(a, local, chunk=5 if kind == "local" else 50)
    url, kw = (
        (str(local), {})
        if kind == "local"
        else _put(request.getfixturevalue("s3"), local, local.name)
    )
    ds = fsdask.open_dataset(url, chunk_bytes=NNZ_BLOCK, **kw)
    X = ds["X"].data
    assert_streams(X)
    assert ds.attrs["layout"] == "samples" and "by sample blocks" in ds.attrs["foreign"]
    np.testing.assert_array_equal(dense(X), C)
    # blocks of about NNZ_BLOCK / 8 non-zeros: stored chunks merged, never a block a cell
    nnz_rows = np.add.reduceat((C != 0).sum(1), np.cumsum((0,) + X.chunks[0][:-1]))
    assert len(X.chunks[0]) < N / 3
    assert np.abs(nnz_rows[:-1] - 40).max() <= (C != 0).sum(1).max()
    assert list(ds["y"].values[[0, -1]]) == [0, 1] and ds["feature"].values[2] == "g2"
    if kind == "local":  # the same reads on S3 (each open there lists many small objects)
        lay = fsdask.open_dataset(url, variable="layers/counts", chunk_bytes=NNZ_BLOCK, **kw)
        assert lay["X"].dtype == np.float32  # counts read as float, not normalised
        np.testing.assert_array_equal(dense(lay["X"].data), C * 2)
        raw = fsdask.open_dataset(url, variable="raw", chunk_bytes=NNZ_BLOCK, **kw)
        assert_streams(raw["X"].data)
        np.testing.assert_array_equal(dense(raw["X"].data), C + 1)
    assert os.listdir(scratch) == []  # no copy of any kind
    old = fsdask.open_dataset(url, chunk_bytes=N * 4 * 5, layout="features", **kw)
    assert len(old["X"].chunks[0]) == 1 and old.attrs["layout"] == "features"
    np.testing.assert_array_equal(old["X"].values, C)
    np.testing.assert_array_equal(to_feature_blocks(X, chunk_bytes=N * 4 * 5).compute(), C)


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_dense_zarr_by_samples(kind, tmp_path, request, scratch):
    rng = np.random.default_rng(3)
    Xn = rng.normal(size=(N, P))
    y = np.repeat([0, 1], N // 2)
    local = tmp_path / "rows.zarr"
    xr.Dataset(
        {"X": (("sample", "feature"), Xn), "y": ("sample", y)},
        coords={"feature": [f"f{j}" for j in range(P)]},
    ).to_zarr(local, encoding={"X": {"chunks": (1, P)}}, zarr_format=3)  # a sample per chunk
    url, kw = (
        (str(local), {})
        if kind == "local"
        else _put(request.getfixturevalue("s3"), local, "rows.zarr")
    )
    ds = fsdask.open_dataset(url, chunk_bytes=10 * P * 8, **kw)
    X = ds["X"].data
    assert_streams(X, sparse=False)
    assert X.chunks[0] == (10,) * (N // 10)  # ten stored chunks merged per block
    assert ds.attrs["layout"] == "samples"
    np.testing.assert_array_equal(X.compute(), Xn)
    np.testing.assert_array_equal(ds["y"].values, y)
    old = fsdask.open_dataset(url, chunk_bytes=10 * P * 8, layout="features", **kw)
    np.testing.assert_array_equal(old["X"].values, Xn)
    assert len(old["X"].chunks[0]) == 1
    np.testing.assert_array_equal(to_feature_blocks(X).compute(), Xn)
    assert os.listdir(scratch) == []


def test_to_feature_blocks_refuses_what_does_not_fit(counts):
    S = scipy.sparse.csr_matrix(counts.astype(np.float32))
    X = da.from_array(S, chunks=(10, P), asarray=False)
    Y = to_feature_blocks(X, chunk_bytes=N * 4 * 5)
    assert isinstance(Y._meta, np.ndarray) and Y.chunks[1] == (5, 5, 5, 5, 4)
    np.testing.assert_array_equal(Y.compute(), counts)
    opts = ReadOptions(memory_budget=1000)
    for M in (X, da.from_array(counts, chunks=(10, P))):
        with pytest.raises(InputError, match='layout="features"') as info:
            to_feature_blocks(M, where="atlas.h5ad", options=opts)
        assert "atlas.h5ad: X is held by sample blocks" in str(info.value)
        assert "\n" not in str(info.value)


def _nonfinite(tmp_path, C):
    bad = C.astype(np.float32)
    bad[4, 5], bad[40, 5], bad[41, 7] = np.nan, np.inf, np.nan
    _adata(scipy.sparse.csr_matrix(bad)).write_h5ad(tmp_path / "nan.h5ad")
    return bad


def test_nan_policy_per_block_as_the_feature_path(tmp_path, counts):
    _nonfinite(tmp_path, counts)
    u = tmp_path / "nan.h5ad"
    ds = fsdask.open_dataset(u, chunk_bytes=NNZ_BLOCK)  # refused where a block holds one
    with pytest.raises(
        InputError, match=r"NaN/Inf value\(s\) among the non-zeros of rows .*--nan-policy"
    ):
        dense(ds["X"].data)
    for policy in ("zero", "mean", "drop-feature"):
        new = fsdask.open_dataset(u, chunk_bytes=NNZ_BLOCK, nan_policy=policy)
        old = fsdask.open_dataset(u, chunk_bytes=N * 4 * 5, nan_policy=policy, layout="features")
        assert_streams(new["X"].data)
        np.testing.assert_allclose(dense(new["X"].data), old["X"].values, rtol=1e-6)
        assert list(new["feature"].values) == list(old["feature"].values)
    assert "g5" not in new["feature"].values and new.sizes["feature"] == P - 2


def test_csr_indices_unsorted_sorted_duplicates_refused(tmp_path, counts, capsys):
    S = scipy.sparse.csr_matrix(counts.astype(np.float32))
    shuffled = S.copy()
    for i in range(N):  # reverse each row's entries: valid CSR, unsorted
        a, b = shuffled.indptr[i], shuffled.indptr[i + 1]
        shuffled.indices[a:b] = shuffled.indices[a:b][::-1].copy()
        shuffled.data[a:b] = shuffled.data[a:b][::-1].copy()
    shuffled.has_sorted_indices = False
    _adata(shuffled).write_h5ad(tmp_path / "unsorted.h5ad")
    ds = fsdask.open_dataset(tmp_path / "unsorted.h5ad", chunk_bytes=NNZ_BLOCK)
    np.testing.assert_array_equal(dense(ds["X"].data), counts)
    dup = S.copy()
    dup.indices[dup.indptr[33] + 1] = dup.indices[dup.indptr[33]]  # row 33: a column twice
    dup.has_canonical_format = False
    _adata(dup).write_h5ad(tmp_path / "dup.h5ad")
    ds = fsdask.open_dataset(tmp_path / "dup.h5ad", chunk_bytes=NNZ_BLOCK)
    with pytest.raises(InputError, match="row 33 holds column .* twice .*sum_duplicates"):
        dense(ds["X"].data)
    out = tmp_path / "r.zarr"
    code = main(
        ["select", str(tmp_path / "dup.h5ad"), "--method", "f", "-o", str(out), "--no-progress"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "row 33 holds column" in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_empty_cells_missing_labels_duplicate_names(tmp_path, counts, caplog):
    C = counts.copy()
    C[[3, 17]] = 0
    a = _adata(scipy.sparse.csr_matrix(C))
    a.obs["cell_type"] = a.obs["cell_type"].cat.add_categories("x")
    a.obs.loc["cell8", "cell_type"] = np.nan
    a.write_h5ad(tmp_path / "a.h5ad")
    with caplog.at_level(logging.WARNING, logger="fsdask"):
        with pytest.raises(InputError, match="missing for 1 sample.*cell8.*--drop-unlabelled"):
            fsdask.open_dataset(tmp_path / "a.h5ad", label="cell_type")
    assert "2 cell(s) have no count (first: cell3, cell17); they are kept" in caplog.text
    kept = fsdask.open_dataset(
        tmp_path / "a.h5ad", label="cell_type", drop_unlabelled=True, chunk_bytes=NNZ_BLOCK
    )
    assert isinstance(kept["X"].data._meta, scipy.sparse.csr_matrix)
    np.testing.assert_array_equal(dense(kept["X"].data), np.delete(C, 8, axis=0))
    assert "cell8" not in kept["sample"].values and kept["y"].dtype == np.int64
    a.var_names = ["g0", "g1", "g0", "g1", "g2", "g2"] + [f"h{j}" for j in range(P - 6)]
    a.write_h5ad(tmp_path / "names.h5ad")
    with pytest.raises(InputError) as info:
        fsdask.open_dataset(tmp_path / "names.h5ad")
    msg = str(info.value)
    assert "var_names are not unique (3 repeated, e.g. 'g0', 'g1', 'g2')" in msg
    assert "var_names_make_unique" in msg and "\n" not in msg


@pytest.mark.cluster
def test_sample_blocks_on_worker_processes(tmp_path, counts, cluster):
    """The readers pickle: worker processes reopen the file or store and read their rows."""
    a = _full(counts)
    a.write_h5ad(tmp_path / "a.h5ad")
    write_zarr_by_cells(a, tmp_path / "a.zarr", chunk=5)
    for name in ("a.h5ad", "a.zarr"):
        ds = fsdask.open_dataset(tmp_path / name, chunk_bytes=NNZ_BLOCK, nan_policy="zero")
        assert_streams(ds["X"].data)
        with dask.config.set(scheduler=cluster):
            np.testing.assert_array_equal(dense(ds["X"].data), counts)


@pytest.mark.parametrize("source", ["h5ad", "dense-zarr"])
def test_fits_on_sample_blocks_equal_the_feature_path(source, tmp_path, counts, scratch):
    """Streaming filters fit the sample blocks as stored; ks (a per-feature sort) gets them
    re-blocked in memory; both equal the fit on feature blocks."""
    if source == "h5ad":
        _full(counts).write_h5ad(tmp_path / "a.h5ad")
        url = tmp_path / "a.h5ad"
    else:
        xr.Dataset(
            {"X": (("sample", "feature"), counts), "y": ("sample", np.repeat([0, 1], N // 2))}
        ).to_zarr(tmp_path / "d.zarr", encoding={"X": {"chunks": (7, P)}}, zarr_format=3)
        url = tmp_path / "d.zarr"
    new = fsdask.open_dataset(url, chunk_bytes=NNZ_BLOCK)
    old = fsdask.open_dataset(url, chunk_bytes=N * 4 * 5, layout="features")
    assert len(new["X"].chunks[0]) > 1 and len(old["X"].chunks[0]) == 1
    for stat in ("variance", "f", "ttest", "fold_change", "ks"):
        a, b = fsdask.Filter(stat).fit(new).result_, fsdask.Filter(stat).fit(old).result_
        np.testing.assert_allclose(a["weight"].values, b["weight"].values, rtol=1e-6)
        assert (a["selected"].values == b["selected"].values).all(), stat
    scratch_left = [f for f in os.listdir(scratch) if not f.startswith("fsdask-csr-")]
    assert scratch_left == []  # (the csr- folder is layout="features"' copy)


def test_streaming_select_refuses_bad_blocks_and_writes_nothing(tmp_path, counts, capsys):
    """``fsdask select`` with a method linear in n reads by sample blocks: a NaN or a duplicate
    index met in a block is one line, exit 2, and no result."""
    _nonfinite(tmp_path, counts)
    S = scipy.sparse.csr_matrix(counts.astype(np.float32))
    S.indices[S.indptr[33] + 1] = S.indices[S.indptr[33]]
    S.has_canonical_format = False
    _adata(S).write_h5ad(tmp_path / "dup.h5ad")
    for name, msg in (("nan.h5ad", "among the non-zeros of rows"), ("dup.h5ad", "row 33 holds")):
        out = tmp_path / f"{name}.r.zarr"
        argv = ["select", str(tmp_path / name), "--method", "ttest", "-o", str(out)]
        code = main([*argv, "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and msg in err and len(err.splitlines()) == 1, err
        assert not out.exists()


def test_dense_anndata_by_row_bands(tmp_path, counts, capsys):
    """A dense AnnData X (h5ad contiguous, Zarr in row chunks) is read by bands of rows;
    ``fsdask info`` describes it without reading a value."""
    a = _adata(counts)  # integer counts, dense
    a.write_h5ad(tmp_path / "d.h5ad")
    a.write_zarr(tmp_path / "d.zarr", chunks=(4, P))
    for name in ("d.h5ad", "d.zarr"):
        ds = fsdask.open_dataset(tmp_path / name, chunk_bytes=8 * P * 4)
        X = ds["X"].data
        assert_streams(X, sparse=False)
        assert X.dtype == np.float32 and set(X.chunks[0][:-1]) == {8}  # two stored chunks a band
        np.testing.assert_array_equal(X.compute(), counts)
        assert main(["info", str(tmp_path / name)]) == 0
        assert "by sample blocks" in capsys.readouterr().out


def test_sparse_blocks_are_costed_by_their_stored_values():
    # 2 % non-zeros: as dense it would be over the budget, its stored values are not
    S = scipy.sparse.random(400, 300, density=0.02, format="csr", dtype=np.float32, random_state=1)
    X = da.from_array(S, chunks=(50, 300), asarray=False)
    dense_bytes = 400 * 300 * 4
    opts = ReadOptions(memory_budget=dense_bytes // 2)
    Y = to_feature_blocks(X, chunk_bytes=400 * 4 * 10, options=opts)
    np.testing.assert_array_equal(Y.compute(), S.toarray())
    full = scipy.sparse.csr_matrix(np.ones((400, 300), np.float32))  # every value stored
    with pytest.raises(InputError, match="over the memory budget"):
        to_feature_blocks(da.from_array(full, chunks=(50, 300), asarray=False), options=opts)


def test_csr_read_kernel_checks_in_one_sweep():
    """csr_rows: the column range, order, duplicates and NaN/Inf of the stored rows, each
    refused (or sorted, filled) as before the checks were one compiled sweep."""
    from fsdask.io.blocks import csr_rows

    M = scipy.sparse.random(30, 12, density=0.4, format="csr", random_state=0, dtype=np.float32)
    kw = {"where": "X", "first_row": 100, "dtype": np.float64}

    def rows(data=None, indices=None, **more):
        d = M.data.copy() if data is None else data
        i = M.indices.copy() if indices is None else indices
        return csr_rows(d, i, M.indptr.copy(), M.shape, **{**kw, **more})

    got = rows()
    assert got.has_sorted_indices and got.dtype == np.float64
    np.testing.assert_array_equal(got.toarray(), M.toarray())
    counts = rows(data=np.arange(M.nnz))  # integer counts: no NaN to look for
    np.testing.assert_array_equal(counts.data, np.arange(M.nnz, dtype=np.float64))
    half = M.data.astype(np.float16)  # a dtype the compiled sweep does not take
    np.testing.assert_array_equal(rows(data=half).data, half.astype(np.float64))
    half[3] = np.nan
    with pytest.raises(InputError, match="1 NaN/Inf value\\(s\\) among the non-zeros"):
        rows(data=half)
    bad = M.indices.copy()
    bad[7] = 12
    with pytest.raises(InputError, match="rows 100–129 have column indices outside 0–11"):
        rows(indices=bad)
    rev = M.copy()
    for r in range(30):  # each row's entries reversed: valid CSR, unsorted
        a, b = rev.indptr[r], rev.indptr[r + 1]
        rev.indices[a:b], rev.data[a:b] = rev.indices[a:b][::-1], rev.data[a:b][::-1]
    got = csr_rows(rev.data.copy(), rev.indices.copy(), rev.indptr.copy(), M.shape, **kw)
    np.testing.assert_array_equal(got.toarray(), M.toarray())
    assert np.all(np.diff(got.indices[got.indptr[3] : got.indptr[4]]) > 0)
    dup = M.indices.copy()
    r = int(np.flatnonzero(np.diff(M.indptr) >= 2)[0])
    dup[M.indptr[r] + 1] = dup[M.indptr[r]]
    with pytest.raises(InputError, match=f"row {100 + r} holds column .* twice"):
        rows(indices=dup)
    nan = M.data.copy()
    nan[[2, 5]] = [np.nan, np.inf]
    with pytest.raises(InputError, match="2 NaN/Inf value\\(s\\) among the non-zeros"):
        rows(data=nan)
    filled = rows(data=nan.copy(), nan_fill=0.0)
    assert np.isfinite(filled.data).all() and filled.nnz == M.nnz - 2
    kept = rows(data=nan.copy(), nan_fill="keep")
    # empty rows before an unsorted or a doubled row: each row boundary counted once
    E = scipy.sparse.csr_matrix(
        (np.ones(6, np.float32), np.array([0, 5, 2, 3, 4, 1]), np.array([0, 2, 2, 2, 4, 6])),
        shape=(5, 12),
    )
    got = csr_rows(E.data.copy(), E.indices.copy(), E.indptr.copy(), E.shape, **kw)
    assert got.has_sorted_indices
    np.testing.assert_array_equal(got.toarray(), E.toarray())
    twice = np.array([0, 5, 2, 3, 4, 4])
    with pytest.raises(InputError, match="row 104 holds column .* twice"):
        csr_rows(E.data.copy(), twice, E.indptr.copy(), E.shape, **kw)
    assert np.isnan(kept.data[2]) and np.isinf(kept.data[5])


def test_in_memory_csr_blocks_are_views_and_labels_coded_as_numpy():
    """An in-memory CSR X is cut into row blocks that share its arrays (no copy of the
    non-zeros), and string labels are coded exactly as ``np.unique`` codes them."""
    from fsdask._validation import class_codes, missing_labels, sparse_sample_blocks

    S = scipy.sparse.random(300, 50, density=0.1, format="csr", dtype=np.float32, random_state=2)
    B = sparse_sample_blocks(S, chunk_bytes=8 * 200)
    assert B.numblocks[0] > 3
    blocks = dask.compute(*B.to_delayed().ravel(), scheduler="sync")
    for b in blocks:
        assert np.shares_memory(b.data, S.data) and np.shares_memory(b.indices, S.indices)
    np.testing.assert_array_equal(scipy.sparse.vstack(blocks).toarray(), S.toarray())
    np.testing.assert_array_equal(B.compute().toarray(), S.toarray())
    assert sparse_sample_blocks(S[:0]).compute().shape == (0, 50)  # one empty block
    rng = np.random.default_rng(0)
    for y in (
        rng.choice(["T", "B", "NK", "mono"], 400),
        rng.choice(np.array(["b", "a", "c"], dtype=object), 400),
        rng.integers(-3, 3, 400),
        rng.normal(size=20),
    ):
        for got, want in zip(class_codes(y), np.unique(y, return_inverse=True)):
            assert got.dtype == want.dtype or got.dtype.kind == want.dtype.kind == "i"
            np.testing.assert_array_equal(got, want)
    y = np.array(["a", "", None, float("nan"), " ", "b", "a"], dtype=object)
    np.testing.assert_array_equal(missing_labels(y), [0, 1, 1, 1, 1, 0, 0])


def test_string_ids_keep_strings_and_convert_the_rest():
    """Ids that are Python strings already are kept (shared, not rebuilt); numbers, bytes and
    fixed-width arrays become strings as before; the result is always an object array of str."""
    from fsdask._validation import string_ids

    names = pd.Index([f"cell{i}" for i in range(5)])
    out = string_ids(names)
    assert out.dtype == object and list(out) == list(names)
    assert out[3] is names[3]  # the same string objects, not copies
    for values, expected in (
        (np.arange(3), ["0", "1", "2"]),
        (np.array([b"a", b"bc"]), ["a", "bc"]),
        (np.array(["x", "yz"]), ["x", "yz"]),
        (np.array(["a", 1, 2.5], dtype=object), ["a", "1", "2.5"]),
        (np.array([], dtype=object), []),
    ):
        out = string_ids(values)
        assert out.dtype == object and list(out) == expected
        assert all(type(v) is str for v in out)
