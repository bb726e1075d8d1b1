"""fsdask on a real SLURM cluster (cluster/testing/slurm-up.sh): jobs submitted with sbatch,
workers connecting back, a job cancelled mid-run, sbatch refusing, workers never arriving,
and the nightly recipe of cluster/scheduling/slurm run by sbatch.

Every test of the test cluster lives in this file: pytest-xdist (``--dist loadfile``) then
runs them all on one worker, and a host has one SLURM cluster."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from test_scheduling import SCHED, _events, _project, _sbatch_env

import fsdask
from fsdask.cluster import scheduler

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "fsdask.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(fsdask.__path__[0].rsplit("/", 1)[0])},
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 400)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    X[y == 1, :5] += 1.5
    path = tmp_path_factory.mktemp("slurm-data") / "x.zarr"
    fsdask.ingest(X, path, y=y, chunk_bytes=40 * 4 * 100)
    return path


@pytest.mark.parametrize(
    "method,params",
    [
        ("ttest", []),
        ("qalpha", ["--param", "random_state=0", "--param", "max_iter=5"]),
        ("logo", []),
    ],
)
def test_select_on_slurm_equals_threaded(slurm, store, tmp_path, method, params):
    conf = slurm.jobqueue_yaml(tmp_path / "slurm.yaml")
    threaded = _cli(
        "select",
        store,
        "--method",
        method,
        *params,
        "-o",
        tmp_path / "threads.zarr",
        "--no-progress",
    )
    assert threaded.returncode == 0, threaded.stderr
    on_slurm = _cli(
        "select",
        store,
        "--method",
        method,
        *params,
        "-o",
        tmp_path / "slurm.zarr",
        "--no-progress",
        "--scheduler",
        conf,
    )
    assert on_slurm.returncode == 0, on_slurm.stderr
    a, b = (
        fsdask.open_result(tmp_path / "threads.zarr"),
        fsdask.open_result(tmp_path / "slurm.zarr"),
    )
    np.testing.assert_allclose(b["weight"].values, a["weight"].values, rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(b["selected"].values, a["selected"].values)
    assert b.attrs["scheduler"] == str(conf)
    assert not [j for j in slurm.squeue()], "the run's worker jobs must be cancelled when it ends"


def test_scancel_of_one_worker_job_mid_run_still_completes(slurm, store, tmp_path):
    """One of two worker jobs is cancelled while a Logo fit runs: the other worker recomputes
    what was lost and the fit completes with the undisturbed result (jobqueue does not
    resubmit the job; one worker is enough)."""
    ds = fsdask.open_dataset(store)
    reference = fsdask.Logo(max_iter=5).fit(ds).result_["weight"].values
    conf = slurm.jobqueue_yaml(tmp_path / "slurm.yaml", jobs=2)
    deadline = time.monotonic() + 240  # earlier runs' jobs should have left (the node has ≥ 8 CPUs)
    while slurm.squeue() and time.monotonic() < deadline:
        time.sleep(1)
    with scheduler(str(conf)) as client:
        client.wait_for_workers(2, timeout=300)  # a job still completing holds a CPU a while
        jobs = [j.job_id for j in client.cluster.workers.values()]
        out: dict = {}
        fit = threading.Thread(target=lambda: out.update(w=fsdask.Logo(max_iter=5).fit(ds).result_))
        fit.start()
        deadline = time.monotonic() + 120
        while (
            not client.run_on_scheduler(
                lambda dask_scheduler: sum(
                    ts.state == "memory" for ts in dask_scheduler.tasks.values()
                )
            )
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert fit.is_alive(), "the fit ended before a job could be cancelled"
        subprocess.run(["scancel", jobs[0]], check=True)
        fit.join(timeout=240)
        assert not fit.is_alive()
        assert jobs[0] not in [j for j, _ in slurm.squeue() if _ == "RUNNING"]
    np.testing.assert_allclose(out["w"]["weight"].values, reference, rtol=1e-6, atol=1e-12)


def test_sbatch_rejecting_the_job_is_one_line_and_nothing_is_written(slurm, store, tmp_path):
    conf = slurm.jobqueue_yaml(tmp_path / "bad.yaml", queue="no-such-partition")
    t0 = time.monotonic()
    r = _cli(
        "select",
        store,
        "--method",
        "ttest",
        "-o",
        tmp_path / "out.zarr",
        "--scheduler",
        conf,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "refused the worker job" in lines[0] and "invalid partition" in lines[0].lower(), lines[
        0
    ]
    assert not (tmp_path / "out.zarr").exists() and time.monotonic() - t0 < 60


def test_workers_never_arriving_time_out_naming_jobs_and_logs(slurm, store, tmp_path):
    conf = slurm.jobqueue_yaml(tmp_path / "never.yaml", python="/nonexistent/bin/python3")
    r = _cli(
        "select",
        store,
        "--method",
        "ttest",
        "-o",
        tmp_path / "out.zarr",
        "--scheduler",
        conf,
        "--worker-timeout",
        "15",
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    msg = lines[0]
    assert "no worker connected within 15 s" in msg and str(slurm.logs) in msg, msg
    assert "job(s) " in msg and "/nonexistent/bin/python3" in msg, msg
    assert not (tmp_path / "out.zarr").exists()
    assert not slurm.squeue(), "the pending/failed jobs must be cancelled"


def test_slurm_batch_script_under_real_slurm(tmp_path, slurm):
    """`sbatch --wait` of the shipped script on the real one-node SLURM cluster of cluster/testing/."""
    config = _project(tmp_path / "proj")
    tmp_path.chmod(0o755)
    p = subprocess.run(
        [
            "sbatch",
            "--wait",
            "--cpus-per-task=1",
            "--mem=1000",
            f"--chdir={tmp_path}",
            f"--output={tmp_path}/job.log",
            "--time=00:10:00",
            str(SCHED / "slurm" / "fsdask-nightly.sbatch"),
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=_sbatch_env(tmp_path),
    )
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").exists() else ""
    assert p.returncode == 0, p.stderr + log
    assert "scheduler=local:1" in log and "memory_limit=900MB" in log
    assert _events(tmp_path / "proj" / "logs" / "nightly.jsonl")[-1]["exit_code"] == 0
