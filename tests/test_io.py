"""Data layer: ingest, write, open, fingerprints, chunk alignment, errors."""

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import fsdask
from fsdask.errors import InputError, StoreError


def test_roundtrip_in_memory(tmp_path, rng):
    X = rng.normal(size=(12, 50)).astype(np.float32)
    y = np.repeat(["a", "b"], 6)
    fp = fsdask.ingest(
        X,
        tmp_path / "d.zarr",
        y=y,
        feature_names=[f"g{i}" for i in range(50)],
        chunk_bytes=12 * 4 * 16,
    )
    ds = fsdask.open_dataset(tmp_path / "d.zarr")
    np.testing.assert_array_equal(ds["X"].values, X)
    assert ds["X"].chunks[1] == (16, 16, 16, 2)
    assert list(ds["y"].values) == [0] * 6 + [1] * 6 and ds.attrs["class_names"] == ["a", "b"]
    assert ds["feature"].values[3] == "g3"
    # ids are plain strings: Zarr v3's StringDType would make .astype(str) raise
    assert list(ds["feature"].values.astype(str)[:2]) == ["g0", "g1"]
    assert ds["feature"].to_index().astype(str)[49] == "g49"
    sel = fsdask.Filter("ttest", n_features_to_select=3).fit(ds)
    fsdask.write_result(sel.result_, tmp_path / "r.zarr")
    res = fsdask.open_result(tmp_path / "r.zarr")
    assert res["feature"].values.astype(str).tolist() == [f"g{i}" for i in range(50)]
    assert ds.attrs["fingerprint"] == fp and ds.attrs["shape"] == [12, 50]
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="r")
    assert g["X"].metadata.dimension_names == ("sample", "feature")
    assert g["X"].chunks == (12, 16)


def test_uneven_dask_blocks_are_aligned_on_write(tmp_path, rng):
    """Irregular dask chunks must be rechunked to the Zarr grid (dask#12583, zarr#3514)."""
    X = rng.normal(size=(7, 100)).astype(np.float32)
    Xd = da.from_array(X, chunks=(7, (3, 31, 17, 9, 40)))
    ds = xr.Dataset({"X": (("sample", "feature"), Xd)})
    fsdask.write_dataset(ds, tmp_path / "u.zarr", block=16)
    back = fsdask.open_dataset(tmp_path / "u.zarr")
    np.testing.assert_array_equal(back["X"].values, X)
    assert set(back["X"].chunks[1][:-1]) == {16}


def test_fingerprint_depends_on_content(tmp_path, rng):
    X = rng.normal(size=(5, 20)).astype(np.float32)
    a = fsdask.ingest(X, tmp_path / "a.zarr")
    b = fsdask.ingest(X, tmp_path / "b.zarr")
    X[0, 0] += 1
    c = fsdask.ingest(X, tmp_path / "c.zarr")
    assert a == b != c


def test_npz_from_shared(tmp_path, shared_data):
    fsdask.ingest(shared_data / "colon_alon.npz", tmp_path / "c.zarr")
    ds = fsdask.open_dataset(tmp_path / "c.zarr")
    assert ds["X"].shape == (62, 2000)
    assert sorted(np.unique(ds["y"].values, return_counts=True)[1]) == [22, 40]
    assert ds.attrs["class_names"] == ["normal", "tumor"]


def test_open_errors(tmp_path, rng):
    with pytest.raises(StoreError, match="no such file"):
        fsdask.open_dataset(tmp_path / "missing.zarr")
    xr.Dataset({"Z": ("a", np.arange(3))}).to_zarr(
        tmp_path / "other.zarr", zarr_format=3, consolidated=False
    )
    with pytest.raises(StoreError, match="not an fsdask dataset"):
        fsdask.open_dataset(tmp_path / "other.zarr")
    (tmp_path / "junk").mkdir()
    with pytest.raises(StoreError):
        fsdask.open_dataset(tmp_path / "junk")


def test_incomplete_store_is_refused(tmp_path, rng):
    X = rng.normal(size=(4, 10)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "d.zarr")
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="r+")
    g.attrs["fsdask_complete"] = False
    with pytest.raises(StoreError, match="incomplete"):
        fsdask.open_dataset(tmp_path / "d.zarr")


def test_nan_policies(tmp_path, rng):
    X = rng.normal(size=(6, 8)).astype(np.float32)
    X[1, 2] = np.nan
    X[3, 5] = np.inf
    with pytest.raises(InputError, match=r"2 NaN/Inf value\(s\) in 2 feature"):
        fsdask.ingest(X, tmp_path / "e.zarr")
    assert not (tmp_path / "e.zarr").exists()
    fsdask.ingest(X, tmp_path / "z.zarr", nan_policy="zero")
    assert fsdask.open_dataset(tmp_path / "z.zarr")["X"].values[1, 2] == 0
    fsdask.ingest(X, tmp_path / "m.zarr", nan_policy="mean")
    col = np.delete(X[:, 2], 1)
    assert np.isclose(fsdask.open_dataset(tmp_path / "m.zarr")["X"].values[1, 2], col.mean())
    fsdask.ingest(X, tmp_path / "d.zarr", nan_policy="drop-feature")
    assert fsdask.open_dataset(tmp_path / "d.zarr")["X"].shape == (6, 6)


def test_ingest_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        fsdask.ingest(tmp_path / "nope.npz", tmp_path / "o.zarr")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match="empty"):
        fsdask.ingest(tmp_path / "empty.csv", tmp_path / "o.zarr")
    with pytest.raises(InputError, match="8 entries but X has 4"):
        fsdask.ingest(np.ones((4, 3)), tmp_path / "o.zarr", y=np.arange(8))
    fsdask.ingest(np.arange(12.0).reshape(4, 3), tmp_path / "o.zarr")
    with pytest.raises(StoreError, match="already exists"):
        fsdask.ingest(np.ones((4, 3)), tmp_path / "o.zarr")
