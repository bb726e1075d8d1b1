"""No dask task holds all p features: per-feature results are joined on the client.

``dask.compute`` of an array chunked by feature block ends in one finalize task that
concatenates every chunk — on a worker, under distributed, so that task's memory grows with
p whatever the block size (tests/test_infra_outofcore.py shows it on 500 MB workers).  Here
a dask callback sees every task's result on a small X of 5 feature blocks: none may have an
axis of length p.  Seconds, on the synchronous scheduler.
"""

from __future__ import annotations

import tracemalloc
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

import fsdask
from fsdask._validation import check_array
from fsdask.evaluate import evaluate
from fsdask.io.ingest import apply_nan_policy
from fsdask.linalg import gram_factor
from fsdask.linalg.execution import Execution

N, P, BLOCK = 24, 250, 50  # 5 feature blocks; p differs from every other size involved


class WideTasks(Callback):
    """Records the tasks whose result has an axis of length p (one task holding every feature)."""

    def __init__(self):
        super().__init__()
        self.wide: list[tuple[str, tuple]] = []

    def _posttask(self, key, result, dsk, state, id):
        for r in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(r, np.ndarray) and P in r.shape:
                self.wide.append((str(key), r.shape))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], N // 2)
    X = rng.normal(size=(N, P))
    X[y == 1, :5] += 2.0
    # inlined: no graph key holds X whole, every read task gives one block
    return da.from_array(X, chunks=(N, BLOCK), inline_array=True), y


def _fit(name, **params):
    return lambda X, y: fsdask.get_method(name, **params).fit(X, y)


CASES = {
    "laplacian_score": _fit("laplacian_score"),
    "logo": _fit("logo", max_iter=3),
    "logo_out_of_budget": _fit("logo", max_iter=2, memory_budget=0, standardize=False),
    "persisted_columns": lambda X, y: _persisted(X).columns(np.arange(P)),
    "cpfs": _fit("cpfs", n_features_to_select=5),
    "jolliffe_i": _fit("jolliffe_i", n_features_to_select=5),
    "pfa": _fit("pfa", n_features_to_select=5),
    "spca": _fit("spca", n_features_to_select=5, max_bisect=3),
    "hsic": _fit("hsic", n_features_to_select=5),
    "qalpha": _fit("qalpha", max_iter=2, random_state=0),
    "ttest": _fit("ttest"),
    "gram_factor_gram": lambda X, y: gram_factor(X),
    "gram_factor_tsqr": lambda X, y: gram_factor(X, method="tsqr"),
    "check_finite": lambda X, y: check_array(X),
    "nan_policy_mean": lambda X, y: apply_nan_policy(X.map_blocks(_with_nan, meta=X._meta), "mean"),
    "evaluate_folds": lambda X, y: evaluate(
        X, y, "ttest", protocol="kfold", n_splits=2, n_features=3, parallel="folds"
    ),
}


def _persisted(X):
    """A persisted operator (budget 0), as Logo's Z̄ out of budget, whose columns are gathered."""
    return Execution(0).operator(lambda xb: 2.0 * xb, X)


def _with_nan(b: np.ndarray) -> np.ndarray:
    b = b.copy()
    b[3, ::7] = np.nan
    return b


@pytest.mark.parametrize("case", list(CASES))
def test_no_task_holds_every_feature(data, case):
    X, y = data
    spy = WideTasks()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence on a toy X is not the point here
        with spy, dask.config.set(scheduler="sync"):
            CASES[case](X, y)
    assert spy.wide == [], f"{case}: tasks with a p-long axis {sorted(set(spy.wide))[:3]}"


class TaskPeak(Callback):
    """The largest memory (tracemalloc) any single task allocated while it ran."""

    def __init__(self):
        super().__init__()
        self.worst = 0

    def _pretask(self, key, dsk, state):
        self.base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()

    def _posttask(self, key, result, dsk, state, id):
        self.worst = max(self.worst, tracemalloc.get_traced_memory()[1] - self.base)


@pytest.mark.parametrize("scale", [False, True])
def test_cpfs_passes_hold_one_float64_copy_per_block(scale):
    """CPFS centres (and scales) each float32 block in one float64 copy: a task holds the
    block and that copy (3× the block's bytes), not the 6× of a chain of dask ops, whose
    fused task keeps every float64 intermediate (100 × 10⁷ on 0.93 GiB workers: killed)."""
    from fsdask.methods.cpfs import CPFS

    n, b = 50, 10_000
    X = np.random.default_rng(0).normal(size=(n, 4 * b)).astype(np.float32)
    Xd = da.from_array(X, chunks=(n, b), inline_array=True)
    tracemalloc.start()
    try:
        with dask.config.set(scheduler="synchronous"), TaskPeak() as peak:
            CPFS(scale=scale)._prepare(Xd)
    finally:
        tracemalloc.stop()
    assert peak.worst <= 3.5 * n * b * 4, peak.worst / (n * b * 4)


@pytest.mark.cluster
@pytest.mark.parametrize("chunks", [24, 6])
def test_distributed_workers_release_each_chunk_once_the_client_has_it(cluster, chunks):
    """Under distributed, per-feature chunks leave the workers as they reach the client.

    With one ``dask.compute`` every chunk stays in worker memory until the last one is done:
    each worker holds its share of the p-long result on top of its blocks (100 × 5·10⁶
    t-test: ~40 MB per worker, enough to pause 500 MB workers).  The scheduler's transition
    log shows whether an output chunk was released before the last one was computed.  With
    few chunks too (6, as a store of a few large blocks gives): the client receives a chunk
    while the workers compute the next, instead of receiving them all after the last.
    """
    import time

    from fsdask._blocks import compute_blocks

    def slow_square(b):
        time.sleep(0.05)  # on 2 one-thread workers: the computation spans chunks × 25 ms
        return b * b

    x = da.arange(chunks * 100, chunks=100, dtype=np.float64).map_blocks(slow_square)
    with dask.config.set(scheduler=cluster):
        (out,) = compute_blocks(x)
    np.testing.assert_array_equal(out, np.arange(chunks * 100, dtype=np.float64) ** 2)
    keys = {str(k) for k in x.__dask_keys__()}

    def log(dask_scheduler):
        return [(str(t.key), t.start, t.finish, t.timestamp) for t in dask_scheduler.transition_log]

    events = [e for e in cluster.run_on_scheduler(log) if e[0] in keys]
    last_done = max(ts for _, start, finish, ts in events if finish == "memory")
    released = {k for k, start, _, ts in events if start == "memory" and ts < last_done}
    assert len(released) >= len(keys) // 2, (len(released), len(keys))


def _shuffled(b, block_info=None):
    """A chunk that finishes after a pseudo-random delay (arrival order ≠ grid order), with
    block (1, 2) of another dtype when asked (the join must then concatenate, as dask does)."""
    import time

    loc = block_info[0]["chunk-location"]
    time.sleep(0.002 * ((loc[0] * 7 + loc[1] * 3) % 5))
    return b.astype(np.float32) if loc == (1, 2) and b.dtype == np.int64 else b * 1.5


@pytest.mark.parametrize("odd", [False, True])
@pytest.mark.parametrize("where", ["threads", "cluster"])
def test_compute_blocks_joins_chunks_as_dask_compute_does(where, odd, request):
    """Chunks that arrive in any order, one of them of another dtype, are joined into
    dask.compute's result, with its dtype, on threads and on a cluster.  Several arrays of
    one graph share their tasks; a single chunk comes back as it is, and a NumPy argument
    passes through."""
    from fsdask._blocks import compute_blocks

    base = da.arange(4 * 9, chunks=9).reshape(4, 9).rechunk((2, 3))
    x = (base if odd else base.astype(np.float64)).map_blocks(_shuffled, dtype=np.float64)
    y = x.sum(axis=0)
    one = da.ones((3, 2), chunks=(3, 2))
    plain = np.arange(3)
    sched = request.getfixturevalue("cluster") if where == "cluster" else "threads"
    with dask.config.set(scheduler="threads"):
        expected = dask.compute(x, y, one)
    with dask.config.set(scheduler=sched):
        got = compute_blocks(x, y, one, plain)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)
    assert got[3] is plain


def _traced_peak(fn) -> float:
    """Bytes (tracemalloc: NumPy's arrays included) that ``fn()`` allocated at its peak."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_compute_blocks_holds_its_result_once(scheduler):
    """The chunks are copied into the result as they arrive and dropped: a result of S bytes
    peaks near S, not at 2·S (every chunk, then their concatenation: 2.00·S before)."""
    from fsdask._blocks import compute_blocks

    x = da.random.default_rng(0).standard_normal((100, 160_000), chunks=(100, 10_000))
    size = 8.0 * x.size
    out = []
    with dask.config.set(scheduler=scheduler):
        peak = _traced_peak(lambda: out.extend(compute_blocks(x)))
    np.testing.assert_array_equal(out[0], x.compute(scheduler="sync"))
    assert peak <= 1.3 * size, peak / size


@pytest.mark.parametrize("method", ["jolliffe_i", "jolliffe_ni", "pfa"])
def test_pca_baselines_hold_their_factor_about_once(method):
    """The factor B (r × p) is the largest array a PCA baseline holds: its join no longer
    doubles it, and JolliffeNI and PFA take their loadings from B's rows instead of a p × r
    copy V (peaks 2.12, 2.28 and 2.58 · B before; ~1.6 · B now, the rest being the blocks
    of the pass that makes B)."""
    n, p = 40, 50_000
    X = np.random.default_rng(0).normal(size=(n, p)).astype(np.float32)
    Xd = da.from_array(X, chunks=(n, 5_000))
    kw = {"n_init": 1} if method == "pfa" else {}
    est = fsdask.get_method(method, n_features_to_select=5, **kw)
    est.fit(Xd)  # compiled and imported: the peak below is the fit's arrays
    with dask.config.set(scheduler="threads"):
        peak = _traced_peak(lambda: est.fit(Xd))
    assert peak <= 1.9 * 8.0 * (n - 1) * p, peak / (8.0 * (n - 1) * p)


def test_cpfs_scans_reuse_their_factor_sized_arrays():
    """CPFS's KKT scans bound ‖∇f_i‖₁ from the SVD of an r × p residual: its p × r products,
    their absolute values and squares are made in place, and E = B_S A − B reuses the
    product's array, so a fit peaks at ~7.5 factors B, not ~9.6 (tracemalloc; the same
    values bit for bit)."""
    n, p = 100, 20_000
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 10)) @ rng.normal(size=(10, p)) + 0.1 * rng.normal(size=(n, p))
    Xd = da.from_array(X.astype(np.float32), chunks=(n, 5_000))
    est = fsdask.CPFS(n_features_to_select=10)
    est.fit(Xd)  # compiled and imported: the peak below is the fit's arrays
    with dask.config.set(scheduler="threads"):
        peak = _traced_peak(lambda: est.fit(Xd))
    assert peak <= 8.5 * 8.0 * (n - 1) * p, peak / (8.0 * (n - 1) * p)
