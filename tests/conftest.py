"""Shared fixtures: real servers and clusters, started here and cleaned up.

* ``s3`` — a real S3-protocol HTTP server (moto's server mode) in a subprocess on a free
  localhost port, with a fresh bucket per test; yields ``(bucket_url, storage_options)``.
* ``cluster`` — a real ``distributed.LocalCluster`` with 2 worker processes (session-wide);
  use ``with dask.config.set(scheduler=cluster): ...`` to run a computation on it.
* ``shared_data`` — path of ``../shared/data`` (tests that need it skip when it is absent).
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint():
    """Start ``moto.server`` (S3 API over HTTP) on localhost; stop it after the session."""
    pytest.importorskip("s3fs")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("moto server exited at start-up")
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("moto server did not start within 30 s")
    old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3(s3_endpoint):
    """A fresh bucket on the local S3 server: ``(\"s3://bucket\", storage_options)``."""
    import s3fs
    opts = {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**opts)
    bucket = f"fsdask-{uuid.uuid4().hex[:10]}"
    fs.mkdir(bucket)
    yield f"s3://{bucket}", opts
    try:
        fs.rm(bucket, recursive=True)
    except Exception:
        pass


@pytest.fixture(scope="session")
def cluster():
    """A real LocalCluster with 2 worker processes, shared by the session; yields the Client."""
    from distributed import Client, LocalCluster
    from fsdask.cluster import quiet_distributed
    quiet_distributed()
    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      memory_limit="3GB")
    client = Client(lc, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        lc.close()


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
