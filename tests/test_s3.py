"""Object storage for real: a moto S3 server on localhost, reached through s3fs (no fsspec mocks)."""

import json
import os
import socket
import subprocess
import sys

import dask
import numpy as np
import pytest
import xarray as xr

import fsdask
from fsdask.errors import StoreError
from fsdask.io.ingest import lazy_from_blocks

pytestmark = pytest.mark.s3

KEY, SECRET = "AKIAFSDASKTESTKEY01", "fsdask-very-secret-value-42"


@pytest.fixture
def bucket(s3):
    """The fixture's bucket, with credentials of our own that must never leak anywhere."""
    url, opts = s3
    return url, {**opts, "key": KEY, "secret": SECRET}


def _fs(opts):
    import s3fs

    return s3fs.S3FileSystem(**opts)


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "fsdask.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _data(rng, n=12, p=60):
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = np.repeat([0, 1], n // 2)
    X[y == 1, :3] += 3
    return X, y


def test_ingest_open_compute_list_write(bucket, rng, tmp_path):
    url, opts = bucket
    X, y = _data(rng)
    fp = fsdask.ingest(X, f"{url}/x.zarr", y=y, storage_options=opts, chunk_bytes=12 * 4 * 16)
    ds = fsdask.open_dataset(f"{url}/x.zarr", storage_options=opts)
    assert ds.attrs["fingerprint"] == fp and ds["X"].chunks[1] == (16, 16, 16, 12)
    np.testing.assert_array_equal(ds["X"].values, X)
    sel = fsdask.Filter("ttest", n_features_to_select=3).fit(ds)
    assert set(sel.get_support(indices=True)) == {0, 1, 2}
    assert sel.result_.attrs["input_store"] == f"{url}/x.zarr"
    fsdask.write_result(sel.result_, f"{url}/results/ttest.zarr", storage_options=opts)
    listing = {p.rsplit("/", 1)[-1] for p in _fs(opts).ls(url.removeprefix("s3://"))}
    assert listing == {"x.zarr", "results"}
    res = fsdask.open_result(f"{url}/results/ttest.zarr", storage_options=opts)
    np.testing.assert_allclose(res["weight"].values, sel.scores_)
    blob = json.dumps({k: str(v) for k, v in {**ds.attrs, **res.attrs}.items()})
    assert SECRET not in blob and KEY not in blob


def test_remote_overwrite_and_failed_write(bucket, rng):
    url, opts = bucket
    X, y = _data(rng)
    fp = fsdask.ingest(X, f"{url}/x.zarr", y=y, storage_options=opts)
    with pytest.raises(StoreError, match="already exists"):
        fsdask.ingest(X, f"{url}/x.zarr", y=y, storage_options=opts)
    with pytest.raises(StoreError, match="already exists"):
        fsdask.write_dataset(
            fsdask.open_dataset(f"{url}/x.zarr", storage_options=opts),
            f"{url}/x.zarr",
            storage_options=opts,
        )
    assert fsdask.ingest(X * 2, f"{url}/x.zarr", storage_options=opts, overwrite=True) != fp

    def block(j0, j1):
        if j0 >= 20:
            raise RuntimeError("network cable unplugged")
        return X[:, j0:j1]

    bad = xr.Dataset(
        {"X": (("sample", "feature"), lazy_from_blocks(block, X.shape[0], X.shape[1], 10))}
    )
    with dask.config.set(scheduler="sync"), pytest.raises(RuntimeError, match="unplugged"):
        fsdask.write_dataset(bad, f"{url}/bad.zarr", storage_options=opts, block=10)
    with pytest.raises(StoreError):
        fsdask.open_dataset(f"{url}/bad.zarr", storage_options=opts)
    assert not _fs(opts).exists(f"{url.removeprefix('s3://')}/bad.zarr/zarr.json")


@pytest.mark.cluster
def test_filter_on_cluster_reading_s3(bucket, rng, cluster):
    url, opts = bucket
    X, y = _data(rng)
    fsdask.ingest(X, f"{url}/x.zarr", y=y, storage_options=opts, chunk_bytes=12 * 4 * 16)
    ds = fsdask.open_dataset(f"{url}/x.zarr", storage_options=opts)
    with dask.config.set(scheduler=cluster):
        f = fsdask.Filter("f").fit(ds)
    np.testing.assert_allclose(f.scores_, fsdask.Filter("f").fit(X, y).scores_, rtol=1e-6)


def test_cli_with_storage_options_never_leaks_credentials(bucket, rng, tmp_path):
    """Credentials given on the command line appear neither in the logs (-vv) nor in the result."""
    url, opts = bucket
    X, y = _data(rng)
    np.savez(
        tmp_path / "d.npz", X=X, y=y, feature_names=np.array([f"g{j}" for j in range(X.shape[1])])
    )
    ep = f"--storage-option=endpoint_url={opts['endpoint_url']}"
    # credentials from the environment (the fixture sets AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)
    fsdask.ingest(
        tmp_path / "d.npz", f"{url}/d.zarr", storage_options={"endpoint_url": opts["endpoint_url"]}
    )
    # credentials given explicitly on the command line this time
    p = _cli(
        "-vv",
        "select",
        f"{url}/d.zarr",
        "--method",
        "ttest",
        "--param",
        "n_features_to_select=3",
        "-o",
        f"{url}/r.zarr",
        ep,
        f"--storage-option=key={KEY}",
        f"--storage-option=secret={SECRET}",
    )
    assert p.returncode == 0, p.stderr
    assert "3 of 60 features selected" in p.stdout
    for text in (p.stdout, p.stderr):
        assert SECRET not in text and KEY not in text
    res = fsdask.open_result(f"{url}/r.zarr", storage_options=opts)
    assert sorted(res["feature"].values[res["selected"].values]) == ["g0", "g1", "g2"]
    blob = json.dumps({k: str(v) for k, v in res.attrs.items()})
    assert SECRET not in blob and KEY not in blob and res.attrs["input_store"] == f"{url}/d.zarr"


def test_unreachable_storage(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    opts = {"endpoint_url": f"http://127.0.0.1:{port}", "key": KEY, "secret": SECRET}
    with pytest.raises(
        StoreError, match=f"storage unreachable: nothing answers at http://127.0.0.1:{port}"
    ):
        fsdask.open_dataset("s3://bucket/x.zarr", storage_options=opts)
    with pytest.raises(StoreError, match="unreachable"):
        fsdask.ingest(np.ones((3, 4)), "s3://bucket/x.zarr", storage_options=opts)
    p = _cli(
        "select",
        "s3://bucket/x.zarr",
        "--method",
        "variance",
        "-o",
        tmp_path / "r.zarr",
        f"--storage-option=endpoint_url=http://127.0.0.1:{port}",
        f"--storage-option=secret={SECRET}",
    )
    assert p.returncode == 2
    assert (
        p.stderr.count("\n") == 1
        and "storage unreachable" in p.stderr
        and "Traceback" not in p.stderr
    )
    assert SECRET not in p.stderr and not (tmp_path / "r.zarr").exists()
