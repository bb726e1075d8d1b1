"""Ingest from every supported source, streaming CSV, atomic writes, read-error translation."""

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import fsdask
from fsdask.errors import InputError, StoreError
from fsdask.io.ingest import lazy_from_blocks


def _features_as_rows_csv(path, X, sep=",", label=None):
    """Write X (sample × feature) as a CSV with a row per feature, line by line."""
    n, p = X.shape
    with open(path, "w") as fh:
        fh.write(sep.join(["feature"] + [f"s{i}" for i in range(n)]) + "\n")
        if label is not None:
            fh.write(sep.join(["label"] + [str(v) for v in label]) + "\n")
        for j in range(p):
            fh.write(sep.join([f"f{j}"] + [repr(float(v)) for v in X[:, j]]) + "\n")


def test_csv_features_as_rows_streams_50000_rows(tmp_path, rng):
    n, p = 8, 50_000
    X = rng.normal(size=(n, p)).astype(np.float32)
    src = tmp_path / "big.csv"
    _features_as_rows_csv(src, X)
    # small chunks and batches: many appends, a batch boundary inside a chunk
    fp = fsdask.ingest(
        src, tmp_path / "big.zarr", orient="features", batch=7_000, chunk_bytes=n * 4 * 4_096
    )
    ds = fsdask.open_dataset(tmp_path / "big.zarr")
    np.testing.assert_array_equal(ds["X"].values, X)
    assert ds["X"].chunks[1][:-1] == (4_096,) * (len(ds["X"].chunks[1]) - 1)
    assert ds["feature"].values[12_345] == "f12345" and ds["sample"].values[3] == "s3"
    assert ds["feature"].values.tolist() == [f"f{j}" for j in range(p)]
    # the streamed fingerprint equals the one of the same data written in one go
    assert (
        fp
        == fsdask.ingest(X, tmp_path / "same.zarr", chunk_bytes=n * 4 * 4_096)
        == ds.attrs["fingerprint"]
    )
    assert ds.attrs["shape"] == [n, p] and ds.attrs["fsdask_complete"] is True


def test_csv_features_as_rows_label_row_and_tsv(tmp_path, rng):
    X = rng.normal(size=(6, 30)).astype(np.float32)
    lab = ["ALL", "AML", "ALL", "AML", "ALL", "ALL"]
    _features_as_rows_csv(tmp_path / "g.tsv", X, sep="\t", label=lab)
    fsdask.ingest(
        tmp_path / "g.tsv", tmp_path / "g.zarr", label="label", batch=4
    )  # auto: label row → features
    ds = fsdask.open_dataset(tmp_path / "g.zarr")
    np.testing.assert_allclose(ds["X"].values, X)
    assert ds.attrs["class_names"] == ["ALL", "AML"] and list(ds["y"].values) == [0, 1, 0, 1, 0, 0]
    assert "label" not in set(ds["feature"].values)


def test_csv_samples_as_rows_with_label_and_ids(tmp_path, rng):
    X = rng.normal(size=(20, 5))
    df = pd.DataFrame(X, columns=[f"g{j}" for j in range(5)])
    df.insert(0, "patient", [f"p{i}" for i in range(20)])
    df.insert(3, "diagnosis", np.repeat(["healthy", "sick"], 10))
    df.to_csv(tmp_path / "s.csv", index=False)
    fsdask.ingest(tmp_path / "s.csv", tmp_path / "s.zarr", label="diagnosis")
    ds = fsdask.open_dataset(tmp_path / "s.zarr")
    np.testing.assert_allclose(ds["X"].values, X.astype(np.float32))
    assert list(ds["feature"].values) == ["g0", "g1", "g2", "g3", "g4"]
    assert ds["sample"].values[7] == "p7" and ds["y"].values.sum() == 10
    df.to_csv(tmp_path / "s.tsv", index=False, sep="\t")
    fsdask.ingest(tmp_path / "s.tsv", tmp_path / "t.zarr", label="diagnosis", orient="samples")
    assert fsdask.open_dataset(tmp_path / "t.zarr").attrs["fingerprint"] == ds.attrs["fingerprint"]


def test_csv_non_numeric_columns_are_named(tmp_path, rng):
    df = pd.DataFrame(rng.normal(size=(12, 3)), columns=["a", "b", "c"])
    df["tissue"] = ["liver"] * 12
    df["y"] = [0, 1] * 6
    df.to_csv(tmp_path / "x.csv", index=False)
    with pytest.raises(InputError, match=r"non-numeric column.*tissue.*--label"):
        fsdask.ingest(tmp_path / "x.csv", tmp_path / "x.zarr", label="y", orient="samples")
    assert not (tmp_path / "x.zarr").exists()
    # features as rows: a stray text value in the middle of the stream → no store left behind
    X = rng.normal(size=(4, 40))
    _features_as_rows_csv(tmp_path / "f.csv", X)
    lines = (tmp_path / "f.csv").read_text().splitlines()
    lines[31] = lines[31].rsplit(",", 1)[0] + ",n/a?"
    (tmp_path / "f.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"non-numeric value .* feature 'f30'"):
        fsdask.ingest(
            tmp_path / "f.csv",
            tmp_path / "f.zarr",
            orient="features",
            batch=8,
            chunk_bytes=4 * 4 * 8,
        )
    assert not (tmp_path / "f.zarr").exists() and not list(tmp_path.glob(".f.zarr*"))


def test_csv_empty_inputs(tmp_path):
    (tmp_path / "h.csv").write_text("feature,s0,s1\n")
    with pytest.raises(InputError, match="no feature rows"):
        fsdask.ingest(tmp_path / "h.csv", tmp_path / "h.zarr", orient="features")
    with pytest.raises(InputError, match="no data rows"):
        fsdask.ingest(tmp_path / "h.csv", tmp_path / "h.zarr", orient="samples")
    assert not (tmp_path / "h.zarr").exists()


def test_mat_v5_and_v73(tmp_path, rng):
    import h5py
    import scipy.io
    import scipy.sparse

    X = rng.normal(size=(9, 13))
    y = np.array([1, 2, 1, 2, 3, 3, 1, 2, 3])
    scipy.io.savemat(tmp_path / "v5.mat", {"X": X, "Y": y[:, None]})
    fsdask.ingest(tmp_path / "v5.mat", tmp_path / "v5.zarr")
    ds = fsdask.open_dataset(tmp_path / "v5.zarr")
    np.testing.assert_allclose(ds["X"].values, X.astype(np.float32))
    np.testing.assert_array_equal(ds["y"].values, y)
    scipy.io.savemat(tmp_path / "sp.mat", {"fea": scipy.sparse.csc_matrix(X), "gnd": y})
    fsdask.ingest(tmp_path / "sp.mat", tmp_path / "sp.zarr", x_key="fea")
    np.testing.assert_allclose(
        fsdask.open_dataset(tmp_path / "sp.zarr")["X"].values, X.astype(np.float32)
    )
    # v7.3 = HDF5 with a MATLAB header; MATLAB stores arrays column-major (transposed in HDF5)
    path = tmp_path / "v73.mat"
    with h5py.File(path, "w", userblock_size=512) as f:
        f["X"] = X.T
        f["y"] = y[None, :].astype(float)
    head = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, HDF5 schema 1.00 ."
    with open(path, "r+b") as fh:
        fh.write(head.ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02IM")
    fsdask.ingest(path, tmp_path / "v73.zarr")
    ds = fsdask.open_dataset(tmp_path / "v73.zarr")
    np.testing.assert_allclose(ds["X"].values, X.astype(np.float32))
    np.testing.assert_array_equal(ds["y"].values, y)
    with pytest.raises(InputError, match="no 'X' variable"):
        fsdask.ingest(tmp_path / "v5.mat", tmp_path / "o.zarr", x_key="nope")
    (tmp_path / "bad.mat").write_bytes(b"this is not matlab" * 20)
    with pytest.raises(InputError, match="not a readable MATLAB"):
        fsdask.ingest(tmp_path / "bad.mat", tmp_path / "o.zarr")


def test_h5ad(tmp_path, rng):
    anndata = pytest.importorskip("anndata")
    import scipy.sparse

    X = rng.poisson(2.0, size=(10, 7)).astype(np.float32)
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical(["T", "B"] * 5)}, index=[f"c{i}" for i in range(10)]
    )
    var = pd.DataFrame(index=[f"gene{j}" for j in range(7)])
    anndata.AnnData(X=scipy.sparse.csr_matrix(X), obs=obs, var=var).write_h5ad(tmp_path / "a.h5ad")
    fsdask.ingest(tmp_path / "a.h5ad", tmp_path / "a.zarr", label="cell_type")
    ds = fsdask.open_dataset(tmp_path / "a.zarr")
    np.testing.assert_array_equal(ds["X"].values, X)
    assert ds["feature"].values[2] == "gene2" and ds["sample"].values[1] == "c1"
    assert ds.attrs["class_names"] == ["B", "T"] and list(ds["y"].values[:2]) == [1, 0]
    with pytest.raises(InputError, match="no obs column 'nope'"):
        fsdask.ingest(tmp_path / "a.h5ad", tmp_path / "b.zarr", label="nope")


def test_in_memory_sources(tmp_path, rng):
    X = rng.normal(size=(10, 30)).astype(np.float32)
    y = np.arange(10) % 2
    a = fsdask.ingest(X, tmp_path / "np.zarr", y=y)
    b = fsdask.ingest(da.from_array(X, chunks=(5, 7)), tmp_path / "da.zarr", y=y)
    Xa = xr.DataArray(
        X.T, dims=("feature", "sample"), coords={"feature": [f"g{j}" for j in range(30)]}
    )
    c = fsdask.ingest(Xa, tmp_path / "xa.zarr", y=y)
    ds = xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y)})
    d = fsdask.ingest(ds, tmp_path / "xd.zarr")
    assert a == b == c == d
    back = fsdask.open_dataset(tmp_path / "xa.zarr")
    assert back["feature"].values[4] == "g4"
    np.testing.assert_array_equal(back["X"].values, X)
    np.testing.assert_array_equal(fsdask.open_dataset(tmp_path / "xd.zarr")["y"].values, y)
    with pytest.raises(InputError, match="not numeric"):
        fsdask.ingest(np.array([["a", "b"], ["c", "d"]]), tmp_path / "s.zarr")
    with pytest.raises(InputError, match="empty"):
        fsdask.ingest(np.zeros((0, 4)), tmp_path / "e.zarr")
    with pytest.raises(InputError, match="2-D"):
        fsdask.ingest(np.zeros(4), tmp_path / "e.zarr")


def test_failed_write_leaves_nothing_that_opens(tmp_path, rng):
    """A write that fails midway (third block raises) never leaves a complete-looking store."""
    X = rng.normal(size=(5, 40)).astype(np.float32)

    def block(j0, j1):
        if j0 >= 20:
            raise RuntimeError("disk on fire")
        return X[:, j0:j1]

    lazy = lazy_from_blocks(block, 5, 40, block=10)
    ds = xr.Dataset({"X": (("sample", "feature"), lazy)})
    with dask.config.set(scheduler="sync"), pytest.raises(RuntimeError, match="disk on fire"):
        fsdask.write_dataset(ds, tmp_path / "w.zarr", block=10)
    assert not (tmp_path / "w.zarr").exists() and list(tmp_path.iterdir()) == []
    # over an existing good store: the old store stays, intact
    fp = fsdask.ingest(X, tmp_path / "w.zarr")
    with pytest.raises(RuntimeError, match="disk on fire"):
        fsdask.write_dataset(ds, tmp_path / "w.zarr", block=10, overwrite=True)
    assert fsdask.open_dataset(tmp_path / "w.zarr").attrs["fingerprint"] == fp
    assert [p.name for p in tmp_path.iterdir()] == ["w.zarr"]


def test_corrupted_chunk_names_the_store(tmp_path, rng):
    X = rng.normal(size=(10, 40)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "c.zarr", y=[0, 1] * 5, chunk_bytes=10 * 4 * 16)
    chunk = tmp_path / "c.zarr" / "X" / "c" / "0" / "1"
    assert chunk.exists()
    chunk.write_bytes(b"\x00garbage" * 7)
    ds = fsdask.open_dataset(tmp_path / "c.zarr")  # metadata is fine: opening works
    with pytest.raises(
        StoreError, match=r"c\.zarr: cannot read X \(features 16–31\).*corrupted.*fsdask ingest"
    ):
        fsdask.Filter("ttest").fit(ds)
    with pytest.raises(StoreError, match="corrupted"):
        ds["X"].sum().compute()


def test_corrupted_chunk_on_cluster(tmp_path, rng, cluster):
    X = rng.normal(size=(10, 40)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "c.zarr", y=[0, 1] * 5, chunk_bytes=10 * 4 * 16)
    (tmp_path / "c.zarr" / "X" / "c" / "0" / "2").write_bytes(b"junk")
    ds = fsdask.open_dataset(tmp_path / "c.zarr")
    with (
        dask.config.set(scheduler=cluster),
        pytest.raises(StoreError, match=r"features 32–39.*corrupted"),
    ):
        fsdask.Filter("f").fit(ds)


def test_store_that_is_not_a_fsdask_dataset(tmp_path):
    zarr.open_group(str(tmp_path / "plain.zarr"), mode="w", zarr_format=3).create_array(
        "data", shape=(3, 3), dtype="f4"
    )
    # foreign stores are opened (issue 14), but never by guessing which dim is which
    with pytest.raises(InputError, match=r"plain.zarr.*dims \('dim_0', 'dim_1'\).*--sample-dim"):
        fsdask.open_dataset(tmp_path / "plain.zarr")
    xr.Dataset({"X": (("a", "b"), np.ones((2, 2)))}).to_zarr(
        tmp_path / "dims.zarr", zarr_format=3, consolidated=False
    )
    with pytest.raises(InputError, match=r"dims \('a', 'b'\), none named 'sample' or 'feature'"):
        fsdask.open_dataset(tmp_path / "dims.zarr")
    (tmp_path / "file.zarr").write_text("hello")
    with pytest.raises(StoreError):
        fsdask.open_dataset(tmp_path / "file.zarr")


def test_the_ingest_command_shows_task_progress_unless_told_not_to(
    tmp_path, rng, capsys, monkeypatch
):
    """A long conversion is not silent: ``fsdask ingest`` prints the tasks done on stderr
    (stdout keeps the summary), and ``--no-progress`` prints none."""
    import re

    from fsdask.cli import main

    X = rng.normal(size=(20, 30))
    np.savez(tmp_path / "m.npz", X=X, y=np.arange(20) % 2)
    monkeypatch.setenv("FSDASK_PROGRESS_INTERVAL", "0")
    capsys.readouterr()
    assert main(["ingest", str(tmp_path / "m.npz"), str(tmp_path / "a.zarr")]) == 0
    out, err = capsys.readouterr()
    assert re.search(r"^fsdask: \d+/\d+ tasks \(100%\)", err, re.M), err
    assert "tasks" not in out
    argv = ["ingest", str(tmp_path / "m.npz"), str(tmp_path / "b.zarr"), "--no-progress"]
    assert main(argv) == 0
    assert "tasks" not in capsys.readouterr().err
    stored = fsdask.open_dataset(tmp_path / "b.zarr")["X"].values
    np.testing.assert_array_equal(stored, X.astype(stored.dtype))
