"""Worker loss on a real 2-process LocalCluster: a worker process SIGKILLed in the middle of
a fit, or killed by its nanny for exceeding its memory limit, costs time, never the result.

The fits attach by address (``--scheduler tcp://…``), not ``dask.config.set(scheduler=client)``:
a Client object in the dask config is handed to every worker the nanny restarts, and
cannot be pickled, so the restart fails."""

import os
import signal
import threading
import time

import numpy as np
import pytest
from clusters import two_workers

import fsdask
from fsdask.cluster import scheduler

pytestmark = [pytest.mark.cluster, pytest.mark.infra, pytest.mark.slow]

# each method on its out-of-core path (persisted blocks, dask passes), small enough for CI
METHODS = {
    "ttest": lambda: fsdask.Filter("ttest"),
    "qalpha": lambda: fsdask.QAlpha(random_state=0, max_iter=8),
    "logo": lambda: fsdask.Logo(max_iter=5),
    "hsic": lambda: fsdask.SparseHSIC(n_features_to_select=5),
    "cpfs": lambda: fsdask.CPFS(n_features_to_select=5),
}


@pytest.fixture
def lc():
    """A fresh cluster per test: the session one must not see workers die, and a nanny that
    fails to bring a killed worker back (distributed, on a busy box) must not leave the next
    test with one worker."""
    with two_workers("600MB", tolerate_slow_close=True) as client:
        yield client


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 600)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    X[y == 1, :4] += 1.5
    path = tmp_path_factory.mktemp("loss") / "x.zarr"
    fsdask.ingest(X, path, y=y, chunk_bytes=40 * 4 * 50)
    return fsdask.open_dataset(path)


def _tasks_done(client) -> int:
    return client.run_on_scheduler(
        lambda dask_scheduler: sum(ts.state == "memory" for ts in dask_scheduler.tasks.values())
    )


def _fit_while(client, make, ds, disturb):
    """Fit on the cluster in a thread; call ``disturb()`` once the first tasks are done."""
    out: dict = {}

    def fit():
        try:
            with scheduler(client.scheduler.address):
                out["result"] = make().fit(ds).result_
        except BaseException as exc:  # surfaced below
            out["error"] = exc

    before = _tasks_done(client)
    thread = threading.Thread(target=fit)
    thread.start()
    deadline = time.monotonic() + 60
    while _tasks_done(client) <= before and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    alive = thread.is_alive()
    disturb()
    thread.join(timeout=300)
    assert not thread.is_alive(), "the fit did not finish after losing a worker"
    if "error" in out:
        raise out["error"]
    return out["result"], alive


@pytest.mark.parametrize("method", list(METHODS))
def test_sigkill_of_a_worker_mid_fit_gives_the_undisturbed_result(lc, ds, method):
    with scheduler(lc.scheduler.address):
        reference = METHODS[method]().fit(ds).result_
    pids = lc.run(os.getpid)
    victim = sorted(pids.values())[0]
    result, mid_run = _fit_while(lc, METHODS[method], ds, lambda: os.kill(victim, signal.SIGKILL))
    assert mid_run, "the fit finished before the worker was killed"
    np.testing.assert_array_equal(result["weight"].values, reference["weight"].values)
    np.testing.assert_array_equal(result["selected"].values, reference["selected"].values)
    # the worker is gone (its restart by the nanny is tested with the memory limit below)
    assert victim not in lc.run(os.getpid).values()


def test_worker_over_its_memory_limit_is_restarted_and_the_fit_completes(lc, ds):
    with scheduler(lc.scheduler.address):
        reference = METHODS["logo"]().fit(ds).result_
    pids = lc.run(os.getpid)
    worker, victim = sorted(pids.items())[0]

    def hog():  # touch more than the 600 MB limit: the nanny terminates the process
        blocks = []
        for _ in range(16):
            blocks.append(np.ones(2**26 // 8 * 8 // 8, dtype=np.float64))  # 64 MiB each
            time.sleep(0.05)
        time.sleep(60)  # hold it until the nanny's monitor sees it (it samples; a busy box is slow)
        return len(blocks)

    held = []  # a released future is forgotten by the scheduler: the hog would never run

    def disturb():  # ahead of the fit's queued tasks on that worker (one thread), so mid-fit
        held.append(lc.submit(hog, workers=[worker], pure=False, retries=0, priority=1000))

    result, mid_run = _fit_while(lc, METHODS["logo"], ds, disturb)
    assert mid_run
    np.testing.assert_array_equal(result["weight"].values, reference["weight"].values)
    deadline = time.monotonic() + 120  # the nanny's monitor samples; a busy box is slow
    while victim in lc.run(os.getpid).values() and time.monotonic() < deadline:
        time.sleep(0.5)
    lc.wait_for_workers(2, timeout=120)
    assert victim not in lc.run(os.getpid).values(), "the nanny should have restarted the worker"
