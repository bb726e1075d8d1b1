"""Object-storage faults through a fault-injecting proxy (tests/faultproxy.py) in front of the
moto S3 server: 503 SlowDown, connection resets, truncated bodies and latency.  Retries are
the S3 client's own (``config_kwargs={"retries": …}`` in the storage options), not fsdask's."""

import subprocess
import sys

import numpy as np
import pytest
from faultproxy import FaultProxy

import fsdask

pytestmark = [pytest.mark.s3, pytest.mark.infra, pytest.mark.slow]

RETRIES = {"config_kwargs": {"retries": {"max_attempts": 12, "mode": "standard"}}}


def _data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(20, 300)).astype(np.float32)
    y = np.repeat([0, 1], 10)
    X[y == 1, :3] += 2
    return X, y


def test_20_percent_faults_give_the_fault_free_result(s3, s3_endpoint):
    url, opts = s3
    X, y = _data()
    reference = fsdask.Filter("ttest").fit(X, y).result_
    with FaultProxy(s3_endpoint, rate=0.2, seed=1) as proxy:
        faulty = {**opts, "endpoint_url": proxy.url, **RETRIES}
        fsdask.ingest(X, f"{url}/x.zarr", y=y, storage_options=faulty, chunk_bytes=20 * 4 * 60)
        ds = fsdask.open_dataset(f"{url}/x.zarr", storage_options=faulty)
        result = fsdask.Filter("ttest").fit(ds).result_
        fsdask.write_result(result, f"{url}/r.zarr", storage_options=faulty)
        back = fsdask.open_result(f"{url}/r.zarr", storage_options=faulty)
    assert sum(proxy.counts[f] for f in ("503", "reset", "truncate", "latency")) >= 5, proxy.counts
    assert all(proxy.counts[f] > 0 for f in ("503", "reset", "truncate")), proxy.counts
    np.testing.assert_array_equal(ds["X"].values, X)
    np.testing.assert_allclose(back["weight"].values, reference["weight"].values, rtol=1e-6)
    np.testing.assert_array_equal(back["selected"].values, reference["selected"].values)


def test_100_percent_faults_exit_2_naming_the_store_and_publish_nothing(s3, s3_endpoint):
    url, opts = s3
    X, y = _data()
    fsdask.ingest(X, f"{url}/x.zarr", y=y, storage_options=opts)
    with FaultProxy(s3_endpoint, rate=1.0, faults=("503", "reset"), seed=2) as proxy:
        args = [
            sys.executable,
            "-m",
            "fsdask.cli",
            "select",
            f"{url}/x.zarr",
            "--method",
            "ttest",
            "-o",
            f"{url}/out.zarr",
            "--no-progress",
            "--storage-option",
            f"endpoint_url={proxy.url}",
            "--storage-option",
            "config_kwargs={retries: {max_attempts: 2, mode: standard}}",
        ]
        r = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    # one line: no "Exception ignored" traceback of aiobotocore's abandoned requests after it
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("fsdask select: error:") and f"{url}/x.zarr" in lines[0], lines
    import s3fs

    assert not s3fs.S3FileSystem(**opts).exists(f"{url}/out.zarr")
