"""X held on the workers of a ``distributed`` cluster, not gathered to the client (issue 43).

When X's columns fit the memory budget, :meth:`fsdask.linalg.execution.Execution.hold` holds
them: on dask's threaded scheduler in the client's memory (unchanged), on a ``distributed``
cluster persisted on its workers when they have room, so every later sweep is tasks on the
workers.  A real 2-process LocalCluster (the session's ``cluster`` fixture) and a real Zarr
store written by fsdask's ingest.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from dask.core import flatten
from dask.utils import key_split
from distributed import get_task_stream, wait

import fsdask
from fsdask.cluster import current_workers, scheduler
from fsdask.linalg.execution import Execution
from fsdask.linalg.worker_memory import WorkerMemory

N, P, BLOCK = 40, 3000, 500


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, P)).astype(np.float32)
    y = np.repeat([0, 1], N // 2)
    X[y == 1, :4] += 1.5
    path = tmp_path_factory.mktemp("hold") / "x.zarr"
    fsdask.ingest(X, path, y=y, chunk_bytes=N * BLOCK * 4)
    return path


def _held_keys(client) -> set:
    return {k for keys in client.has_what().values() for k in keys}


@pytest.mark.cluster
def test_held_columns_live_on_the_workers_and_are_not_gathered(cluster, store):
    X = fsdask.open_dataset(store)["X"].data
    idx = np.arange(0, P, 3)
    with scheduler(cluster.scheduler.address):
        workers = current_workers()
        ex = Execution(workers=workers)
        held = ex.hold(X, idx)
        assert workers is not None and workers.count == 2
        assert isinstance(held, da.Array) and ex.passes == 1  # one persist, one pass
        wait(held)  # persisted asynchronously
        assert set(flatten(held.__dask_keys__())) <= _held_keys(cluster)
        assert held.chunks[1][0] == BLOCK  # X's block width
        forced = ex.hold(X, idx[:5], force=True)  # a small selection the caller wants here
        assert isinstance(forced, np.ndarray)
        values = held.compute()
    np.testing.assert_array_equal(values, np.asarray(X)[:, idx])


def test_the_threaded_scheduler_and_unknown_workers_gather_to_the_client(store):
    X = fsdask.open_dataset(store)["X"].data
    with scheduler("threads"):
        assert current_workers() is None
        assert isinstance(Execution().hold(X), np.ndarray)
    # a jobqueue file's workers before any job connects: their count is not known
    assert isinstance(Execution(workers=WorkerMemory(8 * 2**30)).hold(X), np.ndarray)
    assert not WorkerMemory(8 * 2**30, count=2).holds(2 * 8 * 2**30)  # no room: gathered
    assert WorkerMemory(8 * 2**30, count=2).holds(X.nbytes)


@pytest.mark.cluster
def test_a_logo_fit_sweeps_x_on_the_workers_with_the_threaded_result(cluster, store):
    ds = fsdask.open_dataset(store)

    def fit():
        return fsdask.Logo(max_iter=2, certify=False).fit(ds["X"].data, ds["y"].values)

    with scheduler(cluster.scheduler.address), get_task_stream(cluster) as stream:
        on_cluster = fit()
    # the standardisation and the iterations' tree sums (distances, Z̄'s products) ran as
    # tasks on the workers; gathered to the client, X would have been read by them, no more
    kinds = {key_split(t["key"]) for t in stream.data}
    assert "truediv" in kinds and any("sum-term" in k for k in kinds), kinds
    with scheduler("threads"):
        threaded = fit()
    np.testing.assert_allclose(on_cluster.scores_, threaded.scores_, rtol=1e-10, atol=1e-12)
