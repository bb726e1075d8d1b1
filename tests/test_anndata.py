"""AnnData (.h5ad, AnnData-on-Zarr, in memory), dense/CSR/CSC, read block by block; write-back.

Files are written by the ``anndata`` package itself; results are compared with the same
matrix as numpy.
"""

import tracemalloc

import numpy as np
import pandas as pd
import pytest

anndata = pytest.importorskip("anndata")
import scipy.sparse  # noqa: E402

import fsdask  # noqa: E402
from fsdask.cli import main  # noqa: E402
from fsdask.errors import InputError, StoreError  # noqa: E402

N, P = 30, 50


@pytest.fixture
def counts(rng):
    C = rng.poisson(0.4, size=(N, P)).astype(np.float32)  # sparse-ish counts
    cell_type = np.repeat(["B", "T", "NK"], N // 3)
    C[cell_type == "T", :4] += 3
    return C, cell_type


def _adata(C, cell_type, fmt):
    M = {"dense": C, "csr": scipy.sparse.csr_matrix(C), "csc": scipy.sparse.csc_matrix(C)}[fmt]
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical(cell_type), "depth": C.sum(1)},
        index=[f"cell{i}" for i in range(N)],
    )
    var = pd.DataFrame(
        {"symbol": [f"S{j}" for j in range(P)]}, index=[f"ENSG{j:04d}" for j in range(P)]
    )
    a = anndata.AnnData(X=M, obs=obs, var=var)
    a.layers["counts"] = scipy.sparse.csr_matrix((C * 2).astype(np.int32))
    a.raw = a
    a.uns["note"] = "kept"
    return a


def _ref(X, cell_type):
    codes = pd.Categorical(cell_type).codes
    return (
        fsdask.Filter("fisher").fit(np.asarray(X, dtype=np.float64), codes).result_["weight"].values
    )


def _write(a, where, kind, tmp_path, s3):
    name = f"a.{'h5ad' if where == 'h5ad' else 'zarr'}"
    local = tmp_path / name
    (a.write_h5ad if where == "h5ad" else a.write_zarr)(local)
    if kind == "local":
        return str(local), {}
    import s3fs

    bucket, opts = s3
    s3fs.S3FileSystem(**opts).put(str(local), f"{bucket}/{name}", recursive=where != "h5ad")
    return f"{bucket}/{name}", {"storage_options": opts}


@pytest.mark.parametrize("kind", ["local", "s3"])
@pytest.mark.parametrize("where", ["h5ad", "zarr"])
@pytest.mark.parametrize("fmt", ["dense", "csr", "csc"])
def test_anndata_equals_numpy(fmt, where, kind, tmp_path, request, counts):
    C, ct = counts
    s3 = request.getfixturevalue("s3") if kind == "s3" else None
    url, kw = _write(_adata(C, ct, fmt), where, kind, tmp_path, s3)
    ds = fsdask.open_dataset(
        url, label="obs:cell_type", chunk_bytes=N * 4 * 12, layout="features", **kw
    )
    assert len(ds["X"].chunks[1]) > 1 and len(ds["X"].chunks[0]) == 1  # several feature blocks
    np.testing.assert_array_equal(ds["X"].values, C)
    assert ds["feature"].values[3] == "ENSG0003" and ds["sample"].values[1] == "cell1"
    assert ds.attrs["class_names"] == ["B", "NK", "T"] and "AnnData" in ds.attrs["foreign"]
    np.testing.assert_allclose(
        fsdask.Filter("fisher").fit(ds).result_["weight"].values, _ref(C, ct), rtol=1e-6
    )
    if kind == "local":
        lay = fsdask.open_dataset(
            url, variable="layers/counts", label="cell_type", layout="features", **kw
        )
        np.testing.assert_array_equal(lay["X"].values, C * 2)
        raw = fsdask.open_dataset(url, variable="raw", layout="features", **kw)
        np.testing.assert_array_equal(raw["X"].values, C)
        assert "y" in raw  # cell_type is a default label name


def test_in_memory_anndata_and_ingest(tmp_path, counts):
    C, ct = counts
    a = _adata(C, ct, "csr")
    ds = fsdask.open_dataset(a, chunk_bytes=N * 4 * 8)
    np.testing.assert_array_equal(ds["X"].values, C)
    np.testing.assert_allclose(
        fsdask.Filter("fisher").fit(ds).result_["weight"].values, _ref(C, ct), rtol=1e-6
    )
    for fmt in ("csr", "csc", "coo"):
        S = scipy.sparse.coo_matrix(C).asformat(fmt)
        d = fsdask.open_dataset(S, chunk_bytes=N * 4 * 8)
        assert len(d["X"].chunks[1]) > 1
        np.testing.assert_array_equal(d["X"].values, C)
    a.write_h5ad(tmp_path / "a.h5ad")
    a.write_zarr(tmp_path / "a.zarr")
    for src in (a, tmp_path / "a.h5ad", tmp_path / "a.zarr"):
        out = tmp_path / f"ing{id(src)}.zarr"
        fsdask.ingest(src, out, label="cell_type", variable="layers/counts")
        d = fsdask.open_dataset(out)
        np.testing.assert_array_equal(d["X"].values, C * 2)
        assert d.attrs["class_names"] == ["B", "NK", "T"] and "foreign" not in d.attrs


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_is_densified_one_block_at_a_time(fmt, tmp_path, rng, caplog):
    n, p = 400, 4000
    S = scipy.sparse.random(n, p, density=0.01, format=fmt, dtype=np.float32, random_state=1)
    anndata.AnnData(X=S).write_h5ad(tmp_path / "big.h5ad")
    dense_bytes = n * p * 4  # 6.4 MB
    with caplog.at_level("WARNING", logger="fsdask"):
        ds = fsdask.open_dataset(
            tmp_path / "big.h5ad", chunk_bytes=n * 4 * 100, layout="features"
        )  # blocks of 100 features
    assert len(ds["X"].chunks[1]) == 40
    # CSR is filed by feature block once (cost printed), so a block never scans all rows
    assert ("filing its 16000 non-zeros by feature block" in caplog.text) == (fmt == "csr")
    tracemalloc.start()
    try:
        sums = ds["X"].sum(axis=0).compute(scheduler="sync")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(sums, np.asarray(S.sum(axis=0)).ravel(), rtol=1e-5)
    assert peak < dense_bytes / 3, f"peak {peak} B vs dense {dense_bytes} B"


def test_bad_anndata(tmp_path, counts):
    C, ct = counts
    a = _adata(C, ct, "csr")
    a.write_h5ad(tmp_path / "a.h5ad")
    u = str(tmp_path / "a.h5ad")
    for kw, msg in [
        ({"label": "obs:nope"}, "no obs column 'nope'"),
        ({"variable": "layers/x"}, "no 'layers/x'"),
        ({"variable": "obsm"}, "not an AnnData matrix"),
    ]:
        with pytest.raises(InputError, match=msg) as info:
            fsdask.open_dataset(u, **kw)
        assert "a.h5ad" in str(info.value) and "\n" not in str(info.value)
    b = _adata(C, ct, "csr")
    b.obs["cell_type"] = b.obs["cell_type"].cat.add_categories("x")
    b.obs.loc["cell3", "cell_type"] = np.nan
    b.var_names = ["g"] * (P - 1) + ["h"]
    b.write_h5ad(tmp_path / "b.h5ad")
    with pytest.raises(InputError, match="var_names are not unique"):
        fsdask.open_dataset(tmp_path / "b.h5ad")
    b.var_names = [f"g{j}" for j in range(P)]
    b.write_h5ad(tmp_path / "b.h5ad")
    with pytest.raises(InputError, match="'obs:cell_type' is missing for 1 sample.*cell3"):
        fsdask.open_dataset(tmp_path / "b.h5ad", label="cell_type")
    kept = fsdask.open_dataset(
        tmp_path / "b.h5ad", label="cell_type", drop_unlabelled=True, layout="features"
    )
    assert kept.attrs["dropped_unlabelled_samples"] == 1 and "cell3" not in kept["sample"]
    np.testing.assert_array_equal(kept["X"].values, np.delete(C, 3, axis=0))
    assert kept["y"].dtype == np.int64
    bad = C.copy()
    bad[2, 5] = np.nan
    bad[3, 5] = 1.0
    anndata.AnnData(X=scipy.sparse.csr_matrix(bad)).write_h5ad(tmp_path / "nan.h5ad")
    with pytest.raises(InputError, match="1 NaN/Inf.*--nan-policy"):
        fsdask.open_dataset(tmp_path / "nan.h5ad", layout="features")
    z = fsdask.open_dataset(tmp_path / "nan.h5ad", nan_policy="zero", layout="features")
    np.testing.assert_array_equal(z["X"].values, np.nan_to_num(bad, nan=0.0))


def test_annotate_and_export(tmp_path, counts, capsys):
    C, ct = counts
    a = _adata(C, ct, "csc")
    a.write_h5ad(tmp_path / "in.h5ad")
    a.write_zarr(tmp_path / "in.zarr")
    assert (
        main(
            [
                "select",
                str(tmp_path / "in.h5ad"),
                "--label",
                "obs:cell_type",
                "--method",
                "fisher",
                "--param",
                "n_features_to_select=5",
                "-o",
                str(tmp_path / "r.zarr"),
                "--no-progress",
            ]
        )
        == 0
    )
    res = fsdask.open_result(tmp_path / "r.zarr")
    for src, out in (
        (tmp_path / "in.h5ad", tmp_path / "out.h5ad"),
        (tmp_path / "in.zarr", tmp_path / "out.zarr"),
    ):
        assert (
            main(["export", str(tmp_path / "r.zarr"), "--anndata", str(src), "-o", str(out)]) == 0
        )
        b = anndata.read_h5ad(out) if out.suffix == ".h5ad" else anndata.read_zarr(out)
        assert int(b.var["fsdask_selected"].sum()) == 5
        np.testing.assert_allclose(b.var["fsdask_weight"].to_numpy(), res["weight"].values)
        np.testing.assert_array_equal(b.var["fsdask_rank"].to_numpy(), res["rank"].values)
        assert b.uns["fsdask"]["method"] == "fisher" and b.uns["note"] == "kept"
        # everything else untouched
        np.testing.assert_array_equal(b.X.toarray(), C)
        np.testing.assert_array_equal(b.layers["counts"].toarray(), C * 2)
        pd.testing.assert_frame_equal(b.obs, a.obs)
        assert list(b.var["symbol"]) == list(a.var["symbol"]) and list(b.var_names) == list(
            a.var_names
        )
        # never overwrite
        before = out.stat().st_mtime_ns
        assert (
            main(["export", str(tmp_path / "r.zarr"), "--anndata", str(src), "-o", str(out)]) == 2
        )
        assert "already exists" in capsys.readouterr().err and out.stat().st_mtime_ns == before
    assert (
        "fsdask_selected" not in anndata.read_h5ad(tmp_path / "in.h5ad").var
    )  # input never modified
    m = fsdask.annotate_anndata(res, a)
    assert m is a and a.var["fsdask_rank"].min() == 1 and a.uns["fsdask"]["n_selected"] == 5
    other = anndata.AnnData(X=C, var=pd.DataFrame(index=[f"x{j}" for j in range(P)]))
    with pytest.raises(InputError, match="not in var_names"):
        fsdask.annotate_anndata(res, other)
    with pytest.raises(StoreError, match="already exists"):
        fsdask.annotate_anndata(res, tmp_path / "in.h5ad", out=tmp_path / "out.h5ad")


def test_anndata_zarr_v3(tmp_path, s3, counts):
    import s3fs

    C, ct = counts
    with anndata.settings.override(zarr_write_format=3):
        _adata(C, ct, "csr").write_zarr(tmp_path / "v3.zarr")
    assert (tmp_path / "v3.zarr" / "zarr.json").exists()
    bucket, opts = s3
    s3fs.S3FileSystem(**opts).put(str(tmp_path / "v3.zarr"), f"{bucket}/v3.zarr", recursive=True)
    for url, kw in (
        (str(tmp_path / "v3.zarr"), {}),
        (f"{bucket}/v3.zarr", {"storage_options": opts}),
    ):
        ds = fsdask.open_dataset(url, chunk_bytes=N * 4 * 12, layout="features", **kw)
        np.testing.assert_array_equal(ds["X"].values, C)
        np.testing.assert_allclose(
            fsdask.Filter("fisher").fit(ds).result_["weight"].values, _ref(C, ct), rtol=1e-6
        )


@pytest.mark.cluster
def test_h5ad_blocks_on_worker_processes(tmp_path, counts, cluster):
    """Readers are shipped to distributed worker processes, which reopen the file themselves."""
    import dask

    C, ct = counts
    for fmt in ("csr", "csc"):
        _adata(C, ct, fmt).write_h5ad(tmp_path / f"{fmt}.h5ad")
        ds = fsdask.open_dataset(
            tmp_path / f"{fmt}.h5ad", chunk_bytes=N * 4 * 12, layout="features"
        )
        with dask.config.set(scheduler=cluster):
            w = fsdask.Filter("fisher").fit(ds).result_["weight"].values
        np.testing.assert_allclose(w, _ref(C, ct), rtol=1e-6)


@pytest.mark.cluster
def test_csr_copy_on_object_storage_read_by_workers(tmp_path, counts, s3, cluster):
    """A CSR matrix's per-block copy may go to any fsspec URL (--rechunk-to), where worker
    processes (on any host) read it; an existing location is never reused."""
    import dask
    import s3fs

    C, ct = counts
    bucket, opts = s3
    _adata(C, ct, "csr").write_h5ad(tmp_path / "a.h5ad")
    fs = s3fs.S3FileSystem(**opts)
    fs.put(str(tmp_path / "a.h5ad"), f"{bucket}/csr.h5ad")
    kw = dict(storage_options=opts, chunk_bytes=N * 4 * 12, rechunk_to=f"{bucket}/csr-copy")
    kw["layout"] = "features"
    ds = fsdask.open_dataset(f"{bucket}/csr.h5ad", **kw)
    assert any(p.endswith(".vals") for p in fs.ls(f"{bucket}/csr-copy", refresh=True))
    with dask.config.set(scheduler=cluster):
        w = fsdask.Filter("fisher").fit(ds).result_["weight"].values
    np.testing.assert_allclose(w, _ref(C, ct), rtol=1e-6)
    np.testing.assert_array_equal(ds["X"].values, C)
    with pytest.raises(StoreError, match="csr-copy: already exists"):
        fsdask.open_dataset(f"{bucket}/csr.h5ad", **kw)
