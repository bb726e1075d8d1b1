"""Worker memory respected automatically (issue 43, item 2).

Before a fit computes on a ``distributed`` cluster, its largest task (a stored block read
compressed and decoded, its float64 copy, its per-feature results) is compared with the
workers' memory limit.  The issue's case — 2 × 500 MB workers, fsdask's default 64 MiB
blocks — ended in a raw ``KilledWorker``; here the same workers and block size (on less
data) are refused in one line with the remedy, exit 2, and 32 MiB blocks, whose read fits,
complete in pieces with the threaded scheduler's result and no worker killed.

The estimate and the limits of each cluster kind (scheduler info through a ``tcp://``
address, a ``Client`` of a LocalCluster, a jobqueue cluster file without any job) are
tested without computing.
"""

import logging
import os
import subprocess
import sys

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from clusters import two_workers

import fsdask
from fsdask.cluster import current_workers, scheduler, yaml_worker_memory
from fsdask.errors import ClusterError, ParameterError
from fsdask.linalg.worker_memory import (
    WORKER_FIXED_COST,
    TaskMemory,
    WorkerMemory,
    admit,
    task_memory,
)

N = 100
LIMIT = 500_000_000  # the issue's workers: 500 MB each
DEFAULT_BLOCK = 64 * 2**20  # fsdask ingest's default block
ISSUE_COLS = DEFAULT_BLOCK // (4 * N)  # 167 772 float32 features of 100 samples


# --------------------------------------------------------------------------- the estimate
def test_the_largest_task_is_the_block_read_its_float64_copy_and_results():
    X = da.zeros((N, 400_000), chunks=(N, ISSUE_COLS), dtype=np.float32)
    task = task_memory(X)
    assert (task.rows, task.cols, task.itemsize) == (N, ISSUE_COLS, 4)
    assert task.stored == N * ISSUE_COLS * 4 <= DEFAULT_BLOCK
    # compressed + decoded block, the float64 copy, 8 float64 rows of per-feature results
    assert task.nbytes == 2 * task.stored + N * ISSUE_COLS * 8 + 8 * ISSUE_COLS * 8
    # the widest block counts, whatever its position
    assert task_memory(X[:, 100:]).cols == ISSUE_COLS
    # nothing to estimate: NumPy in memory, sparse blocks
    assert task_memory(np.zeros((3, 4))) is None
    sparse = da.zeros((N, 10), chunks=(N, 5)).map_blocks(scipy.sparse.csr_matrix)
    assert task_memory(sparse) is None


def test_the_room_of_a_task_is_the_pause_threshold_less_the_workers_own_memory():
    w = WorkerMemory(LIMIT)
    assert w.room == int(LIMIT * 0.8) - WORKER_FIXED_COST
    assert WorkerMemory(LIMIT, threads=2).room == w.room // 2
    assert WorkerMemory(200 * 2**20).room == 0  # below a worker's own memory: no room
    import dask

    with dask.config.set({"distributed.worker.memory.pause": False}):
        assert w.room == int(LIMIT * 0.95) - WORKER_FIXED_COST  # then: terminate
    off = {"distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}
    with dask.config.set(off):
        assert w.room == LIMIT - WORKER_FIXED_COST
    task = TaskMemory(N, ISSUE_COLS, 4)
    assert WorkerMemory(w.limit_for(task)).room >= task.nbytes


# --------------------------------------------------------------------------- the decision
def test_threads_and_unlimited_workers_admit_x_unchanged():
    X = da.zeros((N, 400_000), chunks=(N, ISSUE_COLS), dtype=np.float32)
    assert admit(X, None) is X
    assert admit(X, WorkerMemory(8 * 2**30)) is X
    with scheduler("threads"):
        assert current_workers() is None


def test_a_block_too_big_for_the_workers_is_refused_in_one_line():
    X = da.zeros((N, 400_000), chunks=(N, ISSUE_COLS), dtype=np.float32)
    with pytest.raises(ClusterError) as err:
        admit(X, WorkerMemory(LIMIT, source="the workers of local:2"))
    msg = str(err.value)
    assert "\n" not in msg
    assert "64.00 MiB blocks (100 × 167772 float32)" in msg
    assert "476.84 MiB" in msg  # the limit
    assert "--chunk-mb 16" in msg  # the largest block that fits these workers
    assert "memory_limit of 700MiB or more" in msg
    # the block suggested does fit, and the next larger one does not
    room = WorkerMemory(LIMIT).room
    assert TaskMemory(N, 16 * 2**20 // (4 * N), 4).nbytes <= room
    assert TaskMemory(N, 32 * 2**20 // (4 * N), 4).nbytes > room


def test_a_block_whose_read_fits_is_worked_on_in_pieces_of_it():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 200_000)).astype(np.float32)
    cols = 32 * 2**20 // (4 * N)  # 32 MiB blocks: 83 886 features
    X = da.from_array(x, chunks=(N, cols))
    out = admit(X, WorkerMemory(LIMIT))
    assert out is not X and out.chunks[0] == X.chunks[0]
    # every piece lies inside one block: a task holds one stored block, never two
    edges = set(np.cumsum(X.chunks[1]))
    assert edges <= set(np.cumsum(out.chunks[1]))
    piece = max(out.chunks[1])
    assert (
        piece < cols
        and TaskMemory(N, cols, 4).stored + TaskMemory(N, piece, 4).working()
        <= WorkerMemory(LIMIT).room
    )
    np.testing.assert_array_equal(out.compute(scheduler="threads"), x)


# --------------------------------------------------------------------------- the limits
def test_a_jobqueue_file_gives_the_limit_of_one_worker_process_without_any_job(tmp_path):
    path = tmp_path / "slurm.yaml"
    path.write_text("jobqueue: slurm\njobs: 4\ncores: 8\nprocesses: 4\nmemory: 32GB\n")
    w = yaml_worker_memory(str(path))
    assert (w.limit, w.threads) == (8_000_000_000, 2)
    assert "32GB over 4 processes" in w.source and "`memory:`" in w.remedy
    # without `processes`, dask-jobqueue splits the cores as distributed does
    from distributed.deploy.utils import nprocesses_nthreads

    path.write_text("jobqueue: pbs\ncores: 16\nmemory: 64GiB\n")
    procs = nprocesses_nthreads(16)[0]
    assert yaml_worker_memory(str(path)).limit == 64 * 2**30 // procs
    path.write_text("jobqueue: slurm\ncores: 4\n")
    assert yaml_worker_memory(str(path)) is None  # dask-jobqueue's config decides
    path.write_text("jobqueue: slurm\ncores: 4\nmemory: lots\n")
    with pytest.raises(ParameterError, match="'memory' must be a size"):
        yaml_worker_memory(str(path))
    shipped = fsdask.cluster.shipped_configs()["slurm.yaml"]
    assert yaml_worker_memory(shipped).limit == 8_000_000_000


@pytest.fixture(scope="module")
def lc():
    with two_workers("500MB") as client:
        yield client


@pytest.mark.cluster
def test_the_limit_is_read_from_the_scheduler_of_a_tcp_address_and_of_a_client(lc):
    address = lc.scheduler.address
    with scheduler(address):
        w = current_workers()
    assert (w.limit, w.threads) == (LIMIT, 1)
    assert address in w.source and "dask worker --memory-limit" in w.remedy
    from distributed import Client

    with Client(address, set_as_default=True) as client:  # the user's own client
        w = current_workers()
        assert (w.limit, w.threads) == (LIMIT, 1) and client is not None
    assert current_workers() is None  # no client, no distributed scheduler


# --------------------------------------------------------------------------- the issue's case
@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(200)
def test_default_blocks_on_2_x_500MB_workers_exit_2_in_one_line_before_any_work(tmp_path):
    """The issue's workers and block size on 100 × 167 772 float32 (one 64 MiB block)."""
    X = np.random.default_rng(0).normal(size=(N, ISSUE_COLS)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "x.zarr", y=np.repeat([0, 1], N // 2))
    assert fsdask.open_dataset(tmp_path / "x.zarr")["X"].data.chunks[1][0] == ISSUE_COLS
    cli = [sys.executable, "-m", "fsdask.cli", "select", str(tmp_path / "x.zarr")]
    cli += ["--method", "ttest", "-o", str(tmp_path / "out.zarr"), "--no-progress"]
    cli += ["--scheduler", "local:2", "--memory-limit", "500MB"]
    r = subprocess.run(cli, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    assert r.returncode == 2, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    line = lines[0]
    assert "KilledWorker" not in line and "died" not in line
    assert "64.00 MiB blocks (100 × 167772 float32)" in line
    assert "--memory-limit 500MB" in line and "476.84 MiB" in line
    assert "`fsdask ingest --chunk-mb 16`" in line and "--memory-limit 700MiB or more" in line
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.cluster
@pytest.mark.slow
def test_blocks_whose_read_fits_complete_in_pieces_with_the_threaded_result(lc, tmp_path, caplog):
    """32 MiB blocks (one here): their read fits the 500 MB workers, their float64 copy not."""
    X = np.random.default_rng(1).normal(size=(N, 32 * 2**20 // (4 * N))).astype(np.float32)
    y = np.repeat([0, 1], N // 2)
    X[y == 1, :5] += 2.0
    fsdask.ingest(X, tmp_path / "x.zarr", y=y, chunk_bytes=32 * 2**20)
    ds = fsdask.open_dataset(tmp_path / "x.zarr")
    assert ds["X"].data.chunks[1] == (32 * 2**20 // (4 * N),)
    pids = set(lc.run(os.getpid).values())
    with caplog.at_level(logging.INFO, logger="fsdask"), scheduler(lc.scheduler.address):
        on_cluster = fsdask.Filter("ttest").fit(ds).scores_
    assert "worked on in pieces" in caplog.text
    assert set(lc.run(os.getpid).values()) == pids  # no worker was killed and restarted
    with scheduler("threads"):
        threaded = fsdask.Filter("ttest").fit(ds).scores_
    np.testing.assert_array_equal(on_cluster, threaded)
    assert set(np.argsort(-on_cluster)[:5]) == set(range(5))


def test_a_jobqueue_files_limit_stands_for_workers_not_yet_connected(tmp_path):
    """Queued jobs: the scheduler knows no worker yet; the cluster file's limit is used."""
    from distributed import Client, LocalCluster

    from fsdask.cluster import client_worker_memory

    path = tmp_path / "pbs.yaml"
    path.write_text("jobqueue: pbs\ncores: 2\nprocesses: 1\nmemory: 600MB\n")
    plan = yaml_worker_memory(str(path))
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster, set_as_default=False) as client:
            assert client_worker_memory(client, plan) == plan
            assert client_worker_memory(client) is None  # nothing known: nothing checked
    X = da.zeros((N, 400_000), chunks=(N, ISSUE_COLS), dtype=np.float32)
    with pytest.raises(ClusterError, match=r"per thread \(2 threads each\).*`memory:` in .*pbs"):
        admit(X, plan)
