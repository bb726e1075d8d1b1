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
from clusters import two_workers

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

#: the slowest test files, longest first (seconds summed over their tests on the 2-core
#: machine; a run prints the current figures at its end, "slowest test files").  ``--dist loadfile --no-loadscope-reorder`` hands files to the two test
#: processes in collection order, so these go first and the short files fill in at the end
#: (longest-processing-time-first); xdist's default order (most tests first) left these
#: few-test files for last, one process running them while the other sat idle.
SLOWEST_FILES = {
    "test_infra_hosts.py": 277,
    "test_infra_outofcore.py": 228,
    "test_infra_s3methods.py": 130,
    "test_infra_slurm.py": 88,
    "test_infra_hangs.py": 86,
    "test_cpfs.py": 76,
    "test_infra_workerloss.py": 67,
    "test_catalogue_cli.py": 59,
    "test_catalogue_memory.py": 46,
    "test_safety.py": 41,
    "test_write_var.py": 35,
    "test_estimators.py": 34,
    "test_scheduling.py": 29,
    "test_docs.py": 29,
    "test_s3.py": 28,
    "test_qalpha.py": 26,
    "test_catalogue_io.py": 24,
    "test_infra_s3faults.py": 24,
    "test_icechunk.py": 24,
    "test_cli.py": 23,
}


def pytest_collection_modifyitems(config, items):
    """The files of SLOWEST_FILES first, longest first; the others after, in their order."""
    items.sort(key=lambda item: -SLOWEST_FILES.get(item.path.name, 0))  # stable sort


#: seconds spent per test file (set-up, call and tear-down), summed on the controller
_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _FILE_SECONDS[name] = _FILE_SECONDS.get(name, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The slowest files, so SLOWEST_FILES can be kept in step with the suite."""
    slow = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:20]
    if slow and sum(_FILE_SECONDS.values()) > 60:
        terminalreporter.write_sep("-", "slowest test files (s, summed over their tests)")
        for name, secs in slow:
            mark = "" if name in SLOWEST_FILES else "   (not in SLOWEST_FILES)"
            terminalreporter.write_line(f"{secs:8.1f}  {name}{mark}")


@pytest.fixture(autouse=True)
def _iterations_on_dask(request, monkeypatch):
    """Infrastructure tests run every pass of an iterative method as dask tasks, as on data
    too big to hold (``fsdask.hold-x-below`` = 0): their small stores would otherwise be read
    into memory once and a killed worker or a failing bucket would meet only that read."""
    if not (request.node.get_closest_marker("infra") or request.node.get_closest_marker("slurm")):
        yield
        return
    import dask

    monkeypatch.setenv("DASK_FSDASK__HOLD_X_BELOW", "0")  # for the CLI in subprocesses
    with dask.config.set({"fsdask.hold-x-below": 0}):
        yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint():
    """Start ``moto.server`` (S3 API over HTTP) on localhost; stop it after the session."""
    pytest.importorskip("s3fs")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("moto server exited at start-up") from None
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("moto server did not start within 30 s")
    old = {
        k: os.environ.get(k)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
    }
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
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
    with two_workers("3GB") as client:
        yield client


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# --- real infrastructure (issue 16): a one-node SLURM cluster on this machine -------------

SLURM_TESTING = ROOT / "cluster" / "testing"


class SlurmTestCluster:
    """What the ``slurm`` fixture yields: the running test cluster and a jobqueue-YAML writer."""

    def __init__(self, directory: pathlib.Path):
        self.dir = directory
        self.conf = directory / "slurm.conf"
        self.logs = directory / "dask-logs"

    def jobqueue_yaml(self, path, *, jobs: int = 2, **overrides) -> pathlib.Path:
        """A cluster file for ``--scheduler``: ``jobs`` jobs of 1 core / 1 worker on this cluster,
        running this interpreter and importing this source tree."""
        import yaml

        spec = {
            "jobqueue": "slurm",
            "jobs": jobs,
            "cores": 1,
            "processes": 1,
            "memory": "1GB",
            "walltime": "00:30:00",
            "python": sys.executable,
            "log_directory": str(self.logs),
            "local_directory": str(self.dir / "work"),
            "worker_timeout": 120,
            "interface": "lo",  # scheduler and workers on loopback only (this host)
            "job_script_prologue": [f"export PYTHONPATH={ROOT}"],
        }
        spec.update(overrides)
        path = pathlib.Path(path)
        path.write_text(yaml.safe_dump(spec))
        return path

    def squeue(self) -> list[tuple[str, str]]:
        """(job id, state) of the jobs in the queue."""
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, check=True
        ).stdout
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def slurm():
    """A real one-node SLURM cluster (cluster/testing/slurm-up.sh), torn down after the session.

    Sets ``SLURM_CONF`` so sbatch/squeue/scancel (and dask-jobqueue) use it.  Skips with the
    reason where it cannot run (not root, no apt-get to install slurm-wlm/munge).
    """
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("a test SLURM cluster needs root (cluster/testing/slurm-up.sh)")
    directory = pathlib.Path(tempfile.mkdtemp(prefix="fsdask-slurm."))
    env = {**os.environ, "SLURMCTLD_PORT": str(_free_port()), "SLURMD_PORT": str(_free_port())}
    try:
        up = subprocess.run(
            [str(SLURM_TESTING / "slurm-up.sh"), str(directory)],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        subprocess.run([str(SLURM_TESTING / "slurm-down.sh"), str(directory)], env=env)
        pytest.fail("slurm-up.sh did not finish within 15 min")
    if up.returncode == 3:
        pytest.skip(up.stderr.strip().splitlines()[-1])
    if up.returncode != 0:
        subprocess.run([str(SLURM_TESTING / "slurm-down.sh"), str(directory)], env=env)
        pytest.fail(f"slurm-up.sh failed ({up.returncode}): {up.stderr[-2000:]}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(directory / "slurm.conf")
    try:
        yield SlurmTestCluster(directory)
    finally:
        subprocess.run(
            [str(SLURM_TESTING / "slurm-down.sh"), str(directory)], env=env, capture_output=True
        )
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


@pytest.fixture
def examples_import(monkeypatch):
    """``load(name, argv)`` imports ``examples/<name>.py`` as if run with ``argv``; the
    examples' modules are forgotten afterwards (their settings, e.g. ``_common.QUICK``, are
    read from sys.argv at import, so a cached module would carry one test's into the next)."""
    import importlib

    examples = ROOT / "examples"
    monkeypatch.syspath_prepend(str(examples))

    def forget():
        for name, mod in list(sys.modules.items()):
            if str(getattr(mod, "__file__", "") or "").startswith(str(examples)):
                del sys.modules[name]

    def load(name: str, argv: list[str]):
        forget()
        monkeypatch.setattr(sys, "argv", argv)
        return importlib.import_module(name)

    yield load
    forget()
