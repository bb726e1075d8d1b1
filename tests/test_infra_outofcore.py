"""Larger than a worker: per-feature results must stay chunked until they reach the client.

``dask.compute`` of a chunked (rows, p) array adds one finalize task that concatenates every
chunk on a worker, so that task's memory grows with p, not with the block size (100 × 5·10⁶
float32, 500 MB workers: the t-test's worker was killed, twice).  Here a 2-process
LocalCluster with 500 MB workers fits a t-test, SparseHSIC and Q-α on a store bigger than
either worker, and distributed's task stream records every task's result size: the largest
must stay bounded by one feature block, never by p.  The chunks are also released from the
workers as the client fetches them (fsdask._blocks), so a worker does not hold its share of
the p-long result until the end (that share alone paused these workers).

The fits attach by address (see test_infra_workerloss.py: a Client in the dask config
breaks nanny restarts).
"""

import os

import numpy as np
import pytest
import scipy.stats
from clusters import two_workers

import fsdask
from fsdask.cluster import scheduler

pytestmark = [pytest.mark.cluster, pytest.mark.infra, pytest.mark.slow]

# The size: 100 × 5·10⁶ float32 (2 GB, 4× a 500 MB worker).  A worker's fixed cost
# is ~290 MiB (Python, dask, pandas, scipy, numba's LLVM), which leaves ~90 MiB below
# distributed's pause threshold (80 % of 500 MB = 381 MiB): 8 MiB feature blocks (240 of them)
# keep a task's working set inside that.  FSDASK_TEST_OOC_FEATURES=N runs another p.
N, P = 100, int(os.environ.get("FSDASK_TEST_OOC_FEATURES", 5_000_000))
BLOCK = 8 * 2**20
SIGNAL = 5  # features shifted in class 1

METHODS = {
    "ttest": lambda: fsdask.Filter("ttest"),
    "hsic": lambda: fsdask.SparseHSIC(n_features_to_select=SIGNAL),
    # the default variant, one iteration, k=1 and a random Q⁽⁰⁾: the tasks and results have
    # the shapes of any k and init, the Gram of W (r = q·k columns) costs k² times less than
    # at the default k=2, and init="pca" would add a pass (~30 s at this size)
    "qalpha": lambda: fsdask.QAlpha(random_state=0, max_iter=1, k=1, init="random"),
}


@pytest.fixture(scope="module")
def lc():
    with two_workers("500MB") as client:
        yield client


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import dask.array as da

    y = np.repeat([0, 1], N // 2)
    shift = np.zeros(P, np.float32)
    shift[:SIGNAL] = 2.0
    X = da.random.default_rng(0).standard_normal(
        (N, P), chunks=(N, BLOCK // (4 * N)), dtype=np.float32
    )
    X = X + da.from_array(y[:, None].astype(np.float32)) * da.from_array(
        shift[None, :], chunks=(1, X.chunks[1])
    )
    path = tmp_path_factory.mktemp("ooc") / "x.zarr"
    with scheduler("threads"):
        fsdask.ingest(X, path, y=y, chunk_bytes=BLOCK)
    return path


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("method", list(METHODS))
def test_fit_larger_than_a_worker_keeps_tasks_block_sized(lc, store, method):
    ds = fsdask.open_dataset(store)
    assert ds["X"].nbytes > 0.75 * 500e6 and len(ds["X"].data.chunks[1]) > 16
    block_bytes = N * ds["X"].data.chunks[1][0] * 4
    # fresh workers for each method, as each `fsdask select` run has: the memory the previous
    # methods' kernels left behind (numba's compiled code, the allocator's free lists) is 20–40
    # MiB of a margin of ~90 MiB below distributed's pause threshold
    lc.restart()
    pids = set(lc.run(lambda: __import__("os").getpid()).values())
    from distributed import get_task_stream

    with get_task_stream(lc) as stream, scheduler(lc.scheduler.address):
        res = METHODS[method]().fit(ds).result_
    max_nbytes, biggest = max((t.get("nbytes", 0), str(t["key"])) for t in stream.data)
    # no worker was killed (the nanny would have restarted it under a new pid)
    assert set(lc.run(lambda: __import__("os").getpid()).values()) == pids
    # per-feature results: at most a few float64 rows per feature of ONE block, never ~p·8 bytes
    assert max_nbytes <= 2 * block_bytes, (max_nbytes, block_bytes, biggest)
    w = res["weight"].values
    assert w.shape == (P,) and np.isfinite(w).all()
    assert set(np.argsort(-w)[:SIGNAL]) == set(range(SIGNAL)) or method == "qalpha"
    if method == "ttest":  # the scores equal scipy's Welch t on a sample of features
        X = ds["X"].data
        y = ds["y"].values
        cols = np.r_[np.arange(SIGNAL), np.random.default_rng(1).choice(P, 200, replace=False)]
        xs = np.asarray(X[:, np.sort(cols)].compute(scheduler="threads"), dtype=np.float64)
        t = scipy.stats.ttest_ind(xs[y == 0], xs[y == 1], equal_var=False).statistic
        np.testing.assert_allclose(w[np.sort(cols)], np.abs(t), rtol=1e-6)
    if method == "qalpha":
        assert res["selected"].values.sum() >= 1
