"""Several hosts, simulated on loopback: a ``dask scheduler`` on 127.0.0.2 and two ``dask
worker`` processes on 127.0.0.3 / 127.0.0.4, started separately; ``fsdask select --scheduler
tcp://127.0.0.2:PORT`` attaches to them and the data is read only through its URL on the
local S3 server.  No full-matrix object may travel through the client or the scheduler.

What is measured, per method, on one ``select`` run:
* peak RSS of the client process and of the scheduler process (psutil, polled every 20 ms),
  as growth over the same run on a store 1/64 the size (client) or over its RSS before the
  run (scheduler);
* the bytes each of them received and sent through Dask comms over the whole run, and the
  largest single frame received (tests/commcount.py counts every frame ``distributed.comm.tcp``
  reads or writes, for all peers; loaded in the scheduler with ``--preload``).
Each must stay well below the matrix size.  Per-feature outputs (a few vectors of length p,
gathered to the client and written as the result) are allowed: with n = 400 samples they are
~1/50 of the matrix.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest
from conftest import ROOT

import fsdask

pytestmark = [pytest.mark.s3, pytest.mark.cluster, pytest.mark.infra, pytest.mark.slow]

HERE = os.path.dirname(__file__)
N, P = 400, 62_500  # float32: 100 MB
MATRIX = N * P * 4
CHUNK = N * 4 * 6_250  # 10 MB blocks
# the client's fsdask.memory-budget: below the matrix, as on a store that does not fit the client.
# (With the default 1 GiB, Logo holds an X that fits on the client by design — and that copy
# is gathered through the scheduler, the matrix travelling through both.)
CLIENT_BUDGET = {"DASK_FSDASK__MEMORY_BUDGET": "16MB"}
METHODS = {
    "ttest": [],
    # k=1: the r × r Gram (r = n·k) fits CLIENT_BUDGET, so the default solver sums it in one
    # pass per α-step, as it does at the default budget (at k=2 the 16 MB budget sends the
    # α-step to Lanczos, one pass per product: ~100 s here)
    "qalpha": ["random_state=0", "max_iter=2", "k=1"],
    "logo": ["max_iter=2"],
    "hsic": ["n_features_to_select=5"],
    "cpfs": ["n_features_to_select=3"],
}
# CPFS holds B = S·Vᵀ (r × p, r ≤ min(n, p)) and scans O(p²·r) by design (its p² wall): on a
# wide store B is as big as X (a 400 × 62 500 run held 1.5 GB on the client), so it runs
# on a tall store of the same size, where B is p × p.
SHAPES = {"wide": (N, P), "tall": (51_200, 500)}
SHAPE = {m: "tall" if m == "cpfs" else "wide" for m in METHODS}


def _port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _wait(proc, check, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if check():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not come up within {timeout} s")


def _listening(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def hosts(s3_endpoint, tmp_path_factory):
    """Scheduler on 127.0.0.2, workers on 127.0.0.3 and .4; yields (address, client, env)."""
    try:
        probe = socket.socket()
        probe.bind(("127.0.0.2", 0))
        probe.close()
    except OSError as exc:
        pytest.skip(f"cannot bind 127.0.0.2 here ({exc})")
    from distributed import Client

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), HERE]),
        "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error",
    }
    port = _port("127.0.0.2")
    address = f"tcp://127.0.0.2:{port}"
    work = tmp_path_factory.mktemp("hosts")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.2",
                "--port",
                str(port),
                "--dashboard-address",
                "127.0.0.2:0",
                "--preload",
                "commcount",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        _wait(procs[0], lambda: _listening("127.0.0.2", port), "dask scheduler")
        for host in ("127.0.0.3", "127.0.0.4"):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        address,
                        "--host",
                        host,
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--memory-limit",
                        "1.5GB",
                        "--no-dashboard",
                        "--local-directory",
                        str(work),
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        client = Client(address, timeout=30, set_as_default=False)
        client.wait_for_workers(2, timeout=60)
        assert {a.split(":")[1] for a in client.scheduler_info()["workers"]} == {
            "//127.0.0.3",
            "//127.0.0.4",
        }
        yield address, client, env, procs[0].pid
    finally:
        try:
            client.close()
        except Exception:
            pass
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="module")
def stores(s3_endpoint):
    """100 MB float32 stores (wide and tall) and 1/64 ones, in one bucket deleted afterwards."""
    import dask.array as da
    import s3fs

    opts = {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**opts)
    bucket = f"fsdask-hosts-{uuid.uuid4().hex[:8]}"
    fs.mkdir(bucket)
    try:
        urls = {}
        for shape, (n, p) in SHAPES.items():
            for name, (rows, cols) in (
                ("big", (n, p)),
                ("small", (n, p // 64) if shape == "wide" else (n // 64, p)),
            ):
                X = da.random.RandomState(7).standard_normal(
                    (rows, cols), chunks=(rows, max(1, CHUNK // (rows * 4)))
                )
                X = X.astype(np.float32)
                X[rows // 2 :, :4] += (
                    2  # informative features, so every method has something to find
                )
                url = f"s3://{bucket}/{shape}-{name}.zarr"
                fsdask.ingest(
                    X, url, y=np.repeat([0, 1], rows // 2), storage_options=opts, chunk_bytes=CHUNK
                )
                urls[shape, name] = url
        yield urls, opts
    finally:
        fs.rm(bucket, recursive=True)


class Peak:
    """Poll a process's RSS every 20 ms in a thread; ``peak`` is the largest seen."""

    def __init__(self, pid):
        import psutil

        self.proc, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except Exception:  # the process has exited
                return
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)


def _select(hosts, url, opts, method, out, tmp_path):
    """Run ``fsdask select`` in its own process (comm counter installed); return measures."""
    import psutil

    address, client, env, scheduler_pid = hosts
    counts = tmp_path / f"{method}-{uuid.uuid4().hex[:6]}.json"
    code = (
        "import commcount, sys; commcount.install(); from fsdask.cli import main; sys.exit(main())"
    )
    args = [
        sys.executable,
        "-c",
        code,
        "select",
        url,
        "--method",
        method,
        "-o",
        out,
        "--no-progress",
        "--scheduler",
        address,
        "--storage-option",
        f"endpoint_url={opts['endpoint_url']}",
    ]
    for param in METHODS[method]:
        args += ["--param", param]
    before = client.run_on_scheduler(lambda: __import__("commcount").totals())
    scheduler_rss = psutil.Process(scheduler_pid).memory_info().rss
    with Peak(scheduler_pid) as sched:
        proc = subprocess.Popen(
            args,
            env={**env, "FSDASK_COMMCOUNT_OUT": str(counts), **CLIENT_BUDGET},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with Peak(proc.pid) as cli:
            try:
                stdout, stderr = proc.communicate(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    after = client.run_on_scheduler(lambda: __import__("commcount").totals())
    assert proc.returncode == 0, stderr[-3000:]
    return {
        "client_peak": cli.peak,
        "scheduler_growth": sched.peak - scheduler_rss,
        "client": json.loads(counts.read_text()),
        "scheduler": {
            "received": after["received"] - before["received"],
            "sent": after["sent"] - before["sent"],
            "largest_frame": after["largest_frame"],
        },
    }


@pytest.mark.parametrize("method", list(METHODS))
def test_no_full_matrix_through_client_or_scheduler(hosts, stores, method, tmp_path):
    urls, opts = stores
    shape = SHAPE[method]
    matrix = SHAPES[shape][0] * SHAPES[shape][1] * 4
    bucket = urls[shape, "big"].rsplit("/", 1)[0]
    small = _select(
        hosts, urls[shape, "small"], opts, method, f"{bucket}/{method}-small.out.zarr", tmp_path
    )
    big = _select(
        hosts, urls[shape, "big"], opts, method, f"{bucket}/{method}-big.out.zarr", tmp_path
    )
    client_growth = big["client_peak"] - small["client_peak"]
    print(
        f"\n{method} ({shape}): matrix {matrix / 2**20:.0f} MiB; client peak RSS {big['client_peak'] / 2**20:.0f} MiB "
        f"(+{client_growth / 2**20:.0f} over the 1/64 store), comm recv {big['client']['received'] / 2**20:.1f} "
        f"sent {big['client']['sent'] / 2**20:.1f} MiB; scheduler RSS +{big['scheduler_growth'] / 2**20:.0f} MiB, "
        f"comm recv {big['scheduler']['received'] / 2**20:.1f} sent {big['scheduler']['sent'] / 2**20:.1f} MiB; "
        f"largest frame received: client {big['client']['largest_frame'] / 2**20:.2f}, "
        f"scheduler {big['scheduler']['largest_frame'] / 2**20:.2f} MiB"
    )
    # the run did go through the scheduler, and the result is the method's
    assert big["scheduler"]["received"] > 0 and big["client"]["sent"] > 0
    result = fsdask.open_result(f"{bucket}/{method}-big.out.zarr", storage_options=opts)
    assert result.sizes["feature"] == SHAPES[shape][1]
    # nothing near a full copy of X in either process
    assert client_growth < matrix / 4
    # the scheduler keeps task specs; Logo's carry the N × N matrix Π (eq. 3) in every block
    # task, which it forwards to the workers task by task — no copy of X, but ~70 MB here
    assert big["scheduler_growth"] < matrix
    for who in ("client", "scheduler"):  # summed over the whole run (every pass, every iteration)
        assert big[who]["received"] < matrix / 4, (who, big[who])
        # the scheduler's sends are mostly task specs to the workers; Logo's each carry Π (see above)
        assert big[who]["sent"] < (matrix / 4 if who == "client" else matrix), (who, big[who])
        assert big[who]["largest_frame"] < matrix / 16, (who, big[who])
