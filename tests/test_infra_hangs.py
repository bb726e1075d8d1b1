"""No silent hangs (issue 12 item 7): a scheduler address that is not a Dask scheduler, and a
LocalCluster whose workers keep dying, end with one clear line instead of waiting forever.
(The jobqueue cases — sbatch refusing, no worker arriving — are in test_infra_slurm.py.)"""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import fsdask
from fsdask.cluster import scheduler
from fsdask.errors import ClusterError


@pytest.fixture
def not_dask():
    """A TCP service on 127.0.0.1 that is not Dask: ``reply`` sent after the first read, or silence."""
    servers = []

    def start(reply: bytes | None) -> int:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        srv.settimeout(0.2)
        stop = threading.Event()

        def serve():
            conns = []
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    continue
                conns.append(conn)
                try:
                    conn.settimeout(2)
                    conn.recv(4096)
                    if reply:
                        conn.sendall(reply)
                except OSError:
                    pass
            for conn in conns:
                conn.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        servers.append((srv, stop, thread))
        return srv.getsockname()[1]

    yield start
    for srv, stop, thread in servers:
        stop.set()
        thread.join(5)
        srv.close()


@pytest.mark.timeout(60)
def test_a_silent_service_times_out_with_a_message(not_dask):
    port = not_dask(None)
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match="did not answer the Dask handshake within 2 s"):
        with scheduler(f"tcp://127.0.0.1:{port}", timeout=2):
            pass
    assert time.monotonic() - t0 < 20


def _select_ttest(tmp_path, *options: str, timeout: float, env=None) -> subprocess.CompletedProcess:
    """``fsdask select x.zarr --method ttest -o out.zarr OPTIONS`` in a subprocess."""
    cli = [sys.executable, "-m", "fsdask.cli", "select", str(tmp_path / "x.zarr")]
    cli += ["--method", "ttest", "-o", str(tmp_path / "out.zarr"), *options]
    return subprocess.run(cli, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "reply",
    [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n"],
)
def test_cli_on_a_non_dask_service_exits_2_with_one_line(not_dask, tmp_path, reply):
    port = not_dask(reply)
    X = np.random.default_rng(0).normal(size=(10, 20)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "x.zarr", y=np.repeat([0, 1], 5))
    r = _select_ttest(tmp_path, "--scheduler", f"tcp://127.0.0.1:{port}", timeout=100)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert (
        len(lines) == 1 and f"tcp://127.0.0.1:{port}" in lines[0] and "Dask protocol" in lines[0]
    ), r.stderr
    assert not (tmp_path / "out.zarr").exists()


def test_memory_limit_no_worker_can_run_under_is_refused_before_any_starts(tmp_path):
    X = np.random.default_rng(0).normal(size=(10, 200)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "x.zarr", y=np.repeat([0, 1], 5))
    r = _select_ttest(
        tmp_path, "--scheduler", "local:2", "--memory-limit", "1MB", "--no-progress", timeout=100
    )
    assert r.returncode == 2, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--memory-limit 1MB" in lines[0] and "256MiB" in lines[0], r.stderr
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.cluster
@pytest.mark.timeout(240)
def test_workers_that_keep_dying_stop_the_run_with_the_reason(tmp_path):
    """Every worker dies on its first task (a preload); distributed's own limit on a task's
    worker deaths is lifted, so only fsdask's watchdog can end the run."""
    X = np.random.default_rng(0).normal(size=(10, 200)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "x.zarr", y=np.repeat([0, 1], 5), chunk_bytes=10 * 4 * 20)
    preload = Path(__file__).with_name("crashing_worker_preload.py")
    env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{preload}"]',
        "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1000",
    }
    r = _select_ttest(tmp_path, "--scheduler", "local:2", "--no-progress", timeout=220, env=env)
    assert r.returncode == 2, r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert "worker processes died" in last and "crashed or were killed" in last and "-vv" in last, (
        last
    )
    assert r.stderr.count("Traceback") <= 2, r.stderr[-3000:]
    assert r.stderr.count("Restarting worker") < 20, "stopped after a few restarts, not hundreds"
    assert not (tmp_path / "out.zarr").exists()


def test_a_local_cluster_left_without_workers_is_stopped_with_the_reason(monkeypatch):
    """A worker that dies while its nanny is still starting it is not restarted, silently; when
    that leaves no worker, the watchdog ends the run instead of letting it wait forever."""
    import types

    from fsdask import cluster as cl

    monkeypatch.setattr(cl, "NO_WORKER_TIMEOUT", 1.5)
    cancelled = []
    dog = cl._Watchdog(2, "run again with -vv", scheduler=None, on_removal=False)
    dog.cancel = lambda scheduler: cancelled.append(dog.reason)
    fake = types.SimpleNamespace(
        scheduler=types.SimpleNamespace(workers={"w": 1}),
        loop=types.SimpleNamespace(add_callback=lambda fn: fn()),
    )
    stop = threading.Event()
    watcher = threading.Thread(target=cl._watch_for_no_workers, args=(fake, dog, stop), daemon=True)
    watcher.start()
    time.sleep(2.5)
    assert not cancelled, "workers present: no trip"
    fake.scheduler.workers = {}
    time.sleep(2.5)
    assert not cancelled, "no worker was ever lost: still starting, no trip"
    dog.removed = 2
    watcher.join(timeout=10)
    assert cancelled and "none has been alive for 2 s" in cancelled[0], cancelled
    assert "worker processes died 2 times" in cancelled[0] and "-vv" in cancelled[0]
