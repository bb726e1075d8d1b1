"""Where graphs run: threads, a LocalCluster made for the run, an existing scheduler, jobqueue YAML."""

import io
import logging
import pathlib
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest

import fsdask
from fsdask.cluster import jobqueue_cluster, progress, read_cluster_yaml, scheduler
from fsdask.errors import ClusterError, ParameterError

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _current_scheduler():
    return dask.base.get_scheduler()


def test_threads_and_sync():
    with scheduler("threads") as c:
        assert c is None and dask.config.get("scheduler") == "threads"
        assert int(da.ones(10, chunks=3).sum().compute()) == 10
    with scheduler("sync") as c:
        assert c is None and dask.config.get("scheduler") == "synchronous"


@pytest.mark.cluster
def test_local_2_is_a_real_cluster_and_is_closed(rng):
    X = rng.normal(size=(20, 30))
    y = np.repeat([0, 1], 10)
    with scheduler("local:2") as client:
        info = client.scheduler_info()
        assert len(info["workers"]) == 2
        pids = client.run(lambda: __import__("os").getpid())
        assert len(set(pids.values())) == 2 and __import__("os").getpid() not in pids.values()
        f = fsdask.Filter("ttest").fit(da.from_array(X, chunks=(20, 7)), y)
        cluster = client.cluster
    assert client.status == "closed" and cluster.status.name == "closed"
    np.testing.assert_allclose(f.scores_, fsdask.Filter("ttest").fit(X, y).scores_)


@pytest.mark.cluster
def test_tcp_joins_an_existing_scheduler_and_leaves_it_running(cluster):
    address = cluster.scheduler.address
    assert address.startswith("tcp://")
    with scheduler(address) as client:
        assert client.scheduler.address == address
        assert int(da.arange(100, chunks=10).sum().compute()) == 4950
    assert cluster.status == "running"
    assert int(cluster.submit(lambda: 41 + 1).result()) == 42


def test_bad_specs():
    for spec, msg in [
        ("local:x", "local:N"),
        ("local:0", "≥ 1"),
        ("gpu-please", "not understood"),
        ("missing.yaml", "no such cluster file"),
    ]:
        with pytest.raises(ParameterError, match=msg):
            with scheduler(spec):
                pass


def test_unreachable_scheduler():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ClusterError, match="could not reach the Dask scheduler"):
        with scheduler(f"tcp://127.0.0.1:{port}", timeout=2):
            pass


def test_slurm_yaml_makes_a_slurm_cluster_without_submitting():
    pytest.importorskip("dask_jobqueue")
    from dask_jobqueue import SLURMCluster

    cls, jobs, kwargs = read_cluster_yaml(ROOT / "cluster" / "slurm.yaml")
    assert (cls, jobs, kwargs["cores"], kwargs["processes"]) == ("SLURMCluster", 4, 8, 4)
    cluster = jobqueue_cluster(str(ROOT / "cluster" / "slurm.yaml"), scale=False)
    try:
        assert isinstance(cluster, SLURMCluster)
        script = cluster.job_script()
        assert "#SBATCH -p normal" in script and "#SBATCH -A myproject" in script
        assert "#SBATCH --cpus-per-task=8" in script and "#SBATCH -t 02:00:00" in script
        assert "#SBATCH --constraint=cpu" in script and "--nworkers 4" in script
        assert "source $HOME/fsdask/.venv/bin/activate" in script
        assert len(cluster.workers) == 0  # nothing submitted
    finally:
        cluster.close()


def test_pbs_yaml_job_script():
    pytest.importorskip("dask_jobqueue")
    cluster = jobqueue_cluster(str(ROOT / "cluster" / "pbs.yaml"), scale=False)
    try:
        script = cluster.job_script()
        assert "#PBS -q workq" in script and "#PBS -l select=1:ncpus=16:mem=64GB" in script
        assert "#PBS -l walltime=04:00:00" in script
    finally:
        cluster.close()


def test_bad_cluster_yaml(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("jobqueue: kubernetes\n")
    with pytest.raises(ParameterError, match="'jobqueue' must be one of"):
        read_cluster_yaml(bad)
    bad.write_text("jobqueue: slurm\njobs: many\n")
    with pytest.raises(ParameterError, match="'jobs' must be a whole number"):
        read_cluster_yaml(bad)
    bad.write_text("jobqueue: slurm\ncores: 2\nmemory: 1GB\nno_such_option: 3\n")
    with pytest.raises(ParameterError, match="bad option for dask_jobqueue.SLURMCluster"):
        jobqueue_cluster(str(bad), scale=False)
    bad.write_text("jobqueue: [unclosed\n")
    with pytest.raises(ParameterError, match="not valid YAML"):
        read_cluster_yaml(bad)


def test_task_progress_counts_each_computation_on_its_own():
    """A fit runs computations one after another (refits on the client: one or more each):
    the line counts the running one's tasks from 0 to its own total, numbered, instead of
    summing every computation's tasks, which held the share near 100 % for the rest of
    the fit."""
    import re

    out = io.StringIO()
    with progress(None, interval=0.0, stream=out):
        for width in (6, 3, 2):
            da.ones(width, chunks=1).map_blocks(lambda b: b + 1).sum(split_every=width).compute(
                scheduler="threads"
            )
    lines = [
        tuple(
            map(
                int,
                re.match(r"fsdask: (\d+)/(\d+) tasks \(\d+%\) of computation (\d+)", s).groups(),
            )
        )
        for s in out.getvalue().splitlines()
    ]
    for run in (1, 2, 3):
        mine = [(done, total) for done, total, r in lines if r == run]
        totals = {total for _, total in mine}
        assert len(totals) == 1 and [d for d, _ in mine] == list(range(1, totals.pop() + 1))
    assert lines[-1][0] == lines[-1][1] < sum({t for _, t, _ in lines})


def test_the_cluster_line_says_idle_rather_than_no_task_done(cluster):
    """Between passes (the client computing, every fetched result released) the scheduler
    holds no task: the line says so, instead of "0 tasks done, 0 running"."""
    import time

    out = io.StringIO()
    with progress(cluster, interval=0.05, stream=out):
        time.sleep(0.5)  # the client "works": nothing is submitted
    lines = out.getvalue().splitlines()
    n = len(cluster.scheduler_info()["workers"])
    assert lines and set(s.split(" after ")[0] for s in lines) == {
        f"fsdask: no task on the {n} worker(s)"
    }
    assert all(s.endswith("the client is working between passes") for s in lines)


def test_progress_lines_on_threads_and_cluster(cluster):
    out = io.StringIO()
    x = da.random.random((200, 200), chunks=20)
    with progress(None, interval=0.0, stream=out):
        (x @ x.T).sum().compute(scheduler="threads")
    lines = out.getvalue().splitlines()
    assert lines and lines[-1].startswith("fsdask: ") and "tasks (100%)" in lines[-1]

    out = io.StringIO()
    import time

    with dask.config.set(scheduler=cluster), progress(cluster, interval=0.05, stream=out):
        da.ones(100, chunks=10).map_blocks(lambda b: (time.sleep(0.1), b)[1]).sum().compute()
    assert "worker(s) after" in out.getvalue()
    out = io.StringIO()
    with progress(None, enabled=False, stream=out):
        da.ones(10, chunks=2).sum().compute()
    assert out.getvalue() == ""


def test_per_iteration_log(caplog):
    from fsdask.base import FitOutput, Selector

    class Iterating(Selector):
        method_name = "iterating"

        def __init__(self, n_features_to_select=None):
            self.n_features_to_select = n_features_to_select

        def _fit(self, X, y, ctx):
            for t in range(3):
                ctx.log_iteration(t + 1, objective=1.0 / (t + 1), change=0.5**t)
            return FitOutput(scores=np.arange(X.shape[1], dtype=float), n_iter=3, converged=True)

    with caplog.at_level(logging.INFO, logger="fsdask"):
        Iterating().fit(np.random.default_rng(0).normal(size=(5, 4)))
    msgs = [r.getMessage() for r in caplog.records if r.name == "fsdask"]
    assert any("iteration 2: objective=0.5, change=0.5" in m for m in msgs)
    assert any("done in" in m and "after 3 iteration(s), converged" in m for m in msgs)


#: set when the tasks of the counts test may end (the cluster runs in this process)
_RELEASE = threading.Event()


def _held_until_released(i):
    _RELEASE.wait(30)
    return i


def _identity(x):
    return x


@pytest.mark.cluster
def test_the_progress_counts_are_the_scheduler_tasks_states():
    """The counts each progress line shows, read from the task prefixes, are those of a
    walk over every task, while tasks are held in memory, running and waiting."""
    from distributed import Client, LocalCluster

    from fsdask.cluster import _scheduler_counts

    def walk(s):
        counts = {}
        for ts in s.tasks.values():
            counts[ts.state] = counts.get(ts.state, 0) + 1
        return counts

    _RELEASE.clear()
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        s = cluster.scheduler
        held = client.map(_identity, range(5), key=[f"held-{i}" for i in range(5)], pure=False)
        client.gather(held)
        blocked = client.map(
            _held_until_released, range(6), key=[f"slow-{i}" for i in range(6)], pure=False
        )
        after = [
            client.submit(_identity, b, key=f"after-{i}", pure=False) for i, b in enumerate(blocked)
        ]
        for _ in range(500):  # every task arrived, the two threads busy, the rest held back
            states = [ts.state for ts in s.tasks.values()]
            if len(states) == 17 and states.count("processing") >= 2:
                break
            time.sleep(0.02)
        mid = client.run_on_scheduler(_scheduler_counts)
        expected = walk(s)
        _RELEASE.set()
        client.gather(after)
        done = client.run_on_scheduler(_scheduler_counts)
        expected_done = walk(s)
    assert mid.pop("workers") == 1 and done.pop("workers") == 1
    assert mid == expected and mid["memory"] == 5 and mid["processing"] >= 1, (mid, expected)
    assert mid.get("waiting", 0) + mid.get("queued", 0) + mid.get("no-worker", 0) >= 6
    assert done == expected_done and done["memory"] == 5 + 6 + 6, done
