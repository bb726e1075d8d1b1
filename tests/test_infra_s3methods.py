"""Every method reading X from S3 on a real 2-process LocalCluster, through the fault proxy
(tests/faultproxy.py): 20 % of requests failing gives the fault-free result; credentials
rejected (403), a bucket that does not exist and the store deleted mid-run each end
``fsdask select`` with a one-line error naming the store, exit 2, nothing published.

Retries are the S3 client's (``config_kwargs={"retries": …}`` in the storage options)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
from faultproxy import FaultProxy

import fsdask
from fsdask.cluster import scheduler

pytestmark = [pytest.mark.s3, pytest.mark.cluster, pytest.mark.infra, pytest.mark.slow]

RETRIES = {"config_kwargs": {"retries": {"max_attempts": 12, "mode": "standard"}}}
METHODS = {
    "ttest": lambda: fsdask.Filter("ttest"),
    "qalpha": lambda: fsdask.QAlpha(random_state=0, max_iter=4),
    "logo": lambda: fsdask.Logo(max_iter=3),
    "hsic": lambda: fsdask.SparseHSIC(n_features_to_select=5),
    "cpfs": lambda: fsdask.CPFS(n_features_to_select=4),
}


@pytest.fixture(scope="module")
def store(s3_endpoint):
    """A small store in its own bucket (deleted afterwards): ``(url, storage_options)``."""
    import s3fs

    opts = {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**opts)
    bucket = f"fsdask-methods-{uuid.uuid4().hex[:8]}"
    fs.mkdir(bucket)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 240)).astype(np.float32)
    y = np.repeat([0, 1], 15)
    X[y == 1, :4] += 1.5
    url = f"s3://{bucket}/x.zarr"
    fsdask.ingest(X, url, y=y, storage_options=opts, chunk_bytes=30 * 4 * 40)  # 6 blocks
    try:
        yield url, opts
    finally:
        fs.rm(bucket, recursive=True)


@pytest.mark.parametrize("method", list(METHODS))
def test_20_percent_faults_on_the_cluster_give_the_fault_free_result(
    cluster, store, s3_endpoint, method
):
    url, opts = store
    address = cluster.scheduler.address  # by address: a Client in the dask config is unpicklable
    with scheduler(address):
        reference = METHODS[method]().fit(fsdask.open_dataset(url, storage_options=opts)).result_
    out = f"{url.rsplit('/', 1)[0]}/{method}.out.zarr"
    with FaultProxy(s3_endpoint, rate=0.2, seed=len(method)) as proxy:
        faulty = {**opts, "endpoint_url": proxy.url, **RETRIES}
        with scheduler(address):
            result = METHODS[method]().fit(fsdask.open_dataset(url, storage_options=faulty)).result_
        fsdask.write_result(result, out, storage_options=faulty)
        back = fsdask.open_result(out, storage_options=faulty)
        weight, selected = back["weight"].values, back["selected"].values
    assert sum(proxy.counts[f] for f in ("503", "reset", "truncate", "latency")) >= 3, proxy.counts
    np.testing.assert_array_equal(weight, reference["weight"].values)
    np.testing.assert_array_equal(selected, reference["selected"].values)


def _select(url, out, *extra, timeout=180):
    args = [
        sys.executable,
        "-m",
        "fsdask.cli",
        "select",
        url,
        "--method",
        "ttest",
        "-o",
        out,
        "--no-progress",
        *extra,
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def _one_line_naming(r, url):
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and url in lines[0], r.stderr[-3000:]
    return lines[0]


def test_credentials_rejected_403(store, s3_endpoint):
    url, opts = store
    out = f"{url.rsplit('/', 1)[0]}/denied.out.zarr"
    with FaultProxy(s3_endpoint, rate=1.0, faults=("403",)) as proxy:
        r = _select(url, out, "--storage-option", f"endpoint_url={proxy.url}")
    assert proxy.counts["403"] > 0
    line = _one_line_naming(r, url)
    print(line)
    import s3fs

    assert not s3fs.S3FileSystem(**opts).exists(out)


def test_bucket_that_does_not_exist(s3_endpoint):
    url = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x.zarr"
    r = _select(
        url, f"{url.rsplit('/', 1)[0]}/out.zarr", "--storage-option", f"endpoint_url={s3_endpoint}"
    )
    print(_one_line_naming(r, url))


def test_store_deleted_mid_run(cluster, s3_endpoint, tmp_path):
    """The store's objects removed while ``fsdask select`` is reading it on the cluster."""
    import s3fs

    opts = {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**opts)
    bucket = f"fsdask-deleted-{uuid.uuid4().hex[:8]}"
    fs.mkdir(bucket)
    try:
        rng = np.random.default_rng(6)
        X = rng.normal(size=(40, 4000)).astype(np.float32)
        url = f"s3://{bucket}/x.zarr"
        fsdask.ingest(
            X, url, y=np.repeat([0, 1], 20), storage_options=opts, chunk_bytes=40 * 4 * 100
        )  # 40 blocks
        out = f"s3://{bucket}/out.zarr"
        args = [
            sys.executable,
            "-m",
            "fsdask.cli",
            "select",
            url,
            "--method",
            "qalpha",
            "--param",
            "max_iter=50",
            "--param",
            "random_state=0",
            "-o",
            out,
            "--no-progress",
            "--scheduler",
            cluster.scheduler.address,
            "--storage-option",
            f"endpoint_url={s3_endpoint}",
            # the session cluster's workers may predate the AWS_* variables: name the keys
            "--storage-option",
            "key=testing",
            "--storage-option",
            "secret=testing",
        ]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        before = _tasks_seen(cluster)
        deadline = time.monotonic() + 120
        while (
            _tasks_seen(cluster) <= before and proc.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before the store could be deleted"
        fs.rm(url, recursive=True)
        stdout, stderr = proc.communicate(timeout=300)
        r = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
        line = _one_line_naming(r, url)
        print(line)
        assert "Credentials" not in line
        assert not fs.exists(out)
    finally:
        fs.rm(bucket, recursive=True)


def _tasks_seen(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
