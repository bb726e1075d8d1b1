"""A measured scaling model: what each method's fit costs on W workers, checked here and projected.

Measure, on this machine, each method's fit on a store of ``--n`` samples × ``--p`` features
(float32, ``--blocks`` feature blocks) through a real ``dask scheduler`` process and real
``dask worker`` processes (one thread each), counting on the scheduler every graph it
receives and every task it runs (a scheduler plugin, installed by this file as a
``--preload``): the graphs, the tasks, the tasks that read X, the seconds they computed
and the bytes of their results, and the seconds during which some task waited or ran; the bytes
the client and the scheduler receive and send (every frame of ``distributed.comm.tcp``), the
workers' CPU seconds and the bytes they send (``transfer_outgoing_bytes_total``).  The
cluster's overhead per task and per graph comes from graphs of no-op tasks; the client's own
time is the fit's wall time while no task waited or ran, less each graph's way to the
scheduler and back (as a no-op graph takes it); the I/O time of a block is the task time of
an ``X.sum()`` pass per block.

The model (:func:`predict`), per fit::

    wall ≈ max(worker, storage) + tasks × o_s + graphs × L + client + transfer
    worker   = (κ · task seconds + tasks × o_w) / min(workers, cores, blocks) × waves,
               at least the workers' CPU seconds / cores (and the scheduler's, on one machine)
    storage  = reads of X × X's bytes / min(object-storage bandwidth, nodes × NIC)
    transfer = result bytes × (1 − 1/workers) / (nodes × NIC) + client bytes / NIC

(``o``: per-task overhead, of which ``o_s`` is the scheduler's CPU time, one task at a time,
and ``o_w`` the workers' — the rest is a round trip's latency, hidden while a worker holds its
next task; ``κ``: the slow-down of a task's I/O and compute when every core is busy,
measured by passes with no fsdask code on 2 processes against 1; ``L``: per-graph latency;
``waves``: ⌈blocks / workers⌉ rounds against blocks / workers).  It is validated against the measured wall time on 1 and 2 local
worker processes and on 4 worker processes on simulated hosts (scheduler on 127.0.0.2,
workers on 127.0.0.3 …, as tests/test_infra_hosts.py does), all alternating, best of
``--repeat``; the calibration is the 1-process run, a second store of half the features
gives each quantity's per-block slope.  Target: within 25 %.

Then it projects 10⁷ features × 10⁴ samples (float32, 64 MiB blocks) on 8, 16 and 64 nodes
of 32 cores for each ``--bandwidth`` (object storage, GB/s aggregate): predicted wall time,
the client's time and bytes, the scheduler's busy share, and which resource saturates first.
Assumptions (docs/user_guide/performance.md, "Scaling model"): a block's compute and I/O
CPU time grow with its elements; tasks, task results and scheduler bytes with the number
of blocks; the client's time and bytes with the number of features; graphs per fit as
measured (the routes a fit takes at 10⁴ samples may differ); reads overlap compute on a node.

X is never held in memory on the client here (``fsdask.hold-x-below: 0``, as for a store
of 400 GB) and Logo runs its chunked route.

Run:  python benchmarks/scaling_model.py [--quick] [--methods filter hsic ...]
      [--bandwidth 1 10 100] [--nic 25] [--target-block-mb 64] [--no-hosts] [--results PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # commcount: the comm byte counter the tests use
import commcount  # noqa: E402
from _harness import Bench, add_args  # noqa: E402
from workers_speedup import make_store  # noqa: E402

PLUGIN = "fsdask-scaling"
#: the scheduler's task states in which the cluster has work to do
ACTIVE = frozenset({"waiting", "queued", "processing", "no-worker"})
METHODS = ("filter", "hsic", "qalpha", "logo_chunked", "cpfs_gram", "pca")
#: the projected run: 10⁷ features × 10⁴ samples, float32, the ingest default of 64 MiB blocks
TARGET = {"n": 10_000, "p": 10_000_000, "itemsize": 4, "block_bytes": 64 * 2**20}
NODES = (8, 16, 64)
CORES_PER_NODE = 32
GB = 1e9


# ------------------------------------------------------------------ the model (pure arithmetic)


@dataclasses.dataclass(frozen=True)
class Profile:
    """What one fit of a method cost on one worker process (one thread), and its store.

    Attributes
    ----------
    n, p, blocks, itemsize : the store: samples, features, feature blocks, bytes per value
    graphs : graphs the scheduler received (each ``compute`` or ``persist``)
    tasks : tasks run
    reads : tasks that read a block of X (X read ``reads / blocks`` times)
    task_seconds : the tasks' compute time, summed
    worker_cpu : CPU seconds of the worker processes (all threads) during the fit
    io_seconds : the part of ``task_seconds`` that reads and decompresses X
    client_seconds : the client's own time: graphs built, results joined, algebra between passes
    client_bytes : bytes the client received
    scheduler_bytes : bytes the scheduler received and sent
    result_bytes : bytes of the results of every task but the reads of X (what may travel
        between workers: a block read stays on the worker that computes on it)
    """

    n: int
    p: int
    blocks: int
    graphs: float
    tasks: float
    reads: float
    task_seconds: float
    worker_cpu: float
    io_seconds: float
    client_seconds: float
    client_bytes: float
    scheduler_bytes: float
    result_bytes: float
    itemsize: int = 4

    @property
    def x_bytes(self) -> float:
        return float(self.n) * self.p * self.itemsize

    @property
    def x_reads(self) -> float:
        """How many times the fit reads X."""
        return self.reads / self.blocks


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Where a fit runs.

    Attributes
    ----------
    workers : worker threads (one per worker process here)
    cores : CPU cores they share (a 2-core machine running 4 workers has 2)
    per_task, per_graph : the overhead ``o`` of a task and the latency ``L`` of a graph (s)
    scheduler_per_task : the part ``o_s`` of ``o`` the scheduler spends, one task at a time
        (None: all of it); the rest is the workers', shared among them
    worker_per_task : the workers' CPU seconds per task ``o_w`` (None: ``o − o_s``).  Given,
        the workers pay only it: the rest of ``o`` is a round trip's latency, which a worker
        holding its next task overlaps with the current one
    contention : how much slower a task's I/O and its compute run when every core is busy
        (``κ_io``, ``κ_c``; memory bandwidth and caches are shared), against one busy core
    nodes : hosts; their NICs add up for reads and transfers
    nic : bytes/s of one host's network link (also the client's)
    storage : bytes/s the object store delivers to all hosts together (inf: page cache,
        its cost is then the CPU time already in ``io_seconds``)
    shared : the scheduler runs on the workers' cores (one machine): its CPU time counts
        against them
    """

    workers: int
    cores: int
    per_task: float
    per_graph: float
    scheduler_per_task: float | None = None
    worker_per_task: float | None = None
    contention: tuple[float, float] = (1.0, 1.0)
    nodes: int = 1
    nic: float = math.inf
    storage: float = math.inf
    shared: bool = False


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A fit's predicted wall time and what each resource contributes (seconds)."""

    wall: float
    worker: float
    storage: float
    scheduler: float
    client: float
    transfer: float

    @property
    def bottleneck(self) -> str:
        """The resource with the largest share: the one that saturates first as nodes grow."""
        shares = {
            "worker cores": self.worker,
            "object storage": self.storage,
            "scheduler": self.scheduler,
            "client": self.client,
            "network": self.transfer,
        }
        return max(shares, key=shares.__getitem__)


def waves(blocks: float, workers: int) -> float:
    """Rounds of ``workers`` parallel block tasks a pass takes, against the fluid ``blocks /
    workers``: ⌈b/w⌉ / (b/w) ≥ 1 (1 when the blocks do not fill the workers)."""
    if blocks <= workers:
        return 1.0
    return math.ceil(blocks / workers) / (blocks / workers)


def predict(prof: Profile, cl: Cluster) -> Prediction:
    """The model's wall time of the fit ``prof`` on the cluster ``cl`` (see the module docstring).

    Examples
    --------
    >>> prof = Profile(n=100, p=1000, blocks=4, graphs=1, tasks=10, reads=4, task_seconds=4.0,
    ...                worker_cpu=4.0, io_seconds=2.0, client_seconds=0.5, client_bytes=0,
    ...                scheduler_bytes=0, result_bytes=0)
    >>> predict(prof, Cluster(workers=2, cores=2, per_task=0.01, per_graph=0.1)).wall
    2.7
    """
    running = min(cl.workers, cl.cores)  # tasks that run at once: a core runs one thread
    spread = min(running, prof.blocks)
    o_s = cl.per_task if cl.scheduler_per_task is None else min(cl.scheduler_per_task, cl.per_task)
    o_w = cl.per_task - o_s if cl.worker_per_task is None else cl.worker_per_task
    on_workers = contended(prof, cl) + prof.tasks * o_w
    cpu = prof.worker_cpu + (prof.tasks * o_s if cl.shared else 0.0)
    worker = max(on_workers / spread * waves(prof.blocks, running), cpu / cl.cores)
    storage = prof.x_reads * prof.x_bytes / min(cl.storage, cl.nodes * cl.nic)
    scheduler = prof.tasks * o_s + prof.graphs * cl.per_graph
    transfer = (
        prof.result_bytes * (1 - 1 / cl.workers) / (cl.nodes * cl.nic) + prof.client_bytes / cl.nic
    )
    wall = max(worker, storage) + scheduler + prof.client_seconds + transfer
    return Prediction(round(wall, 12), worker, storage, scheduler, prof.client_seconds, transfer)


def contended(prof: Profile, cl: Cluster) -> float:
    """The fit's task seconds on ``cl``: its I/O and its compute each slowed by the
    cluster's contention when the blocks keep every core busy (measured on one busy core)."""
    if min(cl.workers, prof.blocks) < cl.cores:
        return prof.task_seconds
    io = min(prof.io_seconds, prof.task_seconds)
    k_io, k_c = cl.contention
    return io * k_io + (prof.task_seconds - io) * k_c


def line_through(x1: float, y1: float, x2: float, y2: float) -> tuple[float, float]:
    """Intercept and slope of the line through (x1, y1) and (x2, y2); slope clipped at 0 and
    the intercept at 0, so a noisy pair never extrapolates to a negative cost."""
    slope = max((y2 - y1) / (x2 - x1), 0.0) if x2 != x1 else 0.0
    return max(y2 - slope * x2, 0.0), slope


#: quantities that grow with the number of blocks, and with each block's elements
PER_BLOCK_WORK = ("task_seconds", "worker_cpu", "io_seconds")
#: quantities that grow with the number of blocks only
PER_BLOCK_COUNT = ("tasks", "reads", "scheduler_bytes", "result_bytes")
#: quantities that grow with the number of features
PER_FEATURE = ("client_seconds", "client_bytes")


def extrapolate(
    small: Profile, big: Profile, n: int, p: int, block_bytes: int, itemsize: int = 4
) -> Profile:
    """The profile of a fit on an n × p store of ``block_bytes`` feature blocks, from two
    measured fits on stores of the same n and block width and different p (``small``, ``big``).

    Every quantity is a line through the two measurements — in the number of blocks (work,
    tasks, bytes between processes) or in p (the client's time and bytes) — and a block's
    work is scaled by its elements (n × width) against the measured blocks'.  When the
    client receives n/2 or more values per feature (:func:`rows_per_feature`: a
    factor with one row per sample, as CPFS's and the PCA baselines' B), its bytes and time
    per feature grow with n as well.
    """
    width = max(1, block_bytes // (n * itemsize))
    blocks = math.ceil(p / width)
    measured_width = big.p / big.blocks
    elements = (n * width) / (big.n * measured_width)
    fields: dict[str, Any] = {}
    for name in PER_BLOCK_WORK + PER_BLOCK_COUNT:
        a, b = line_through(small.blocks, getattr(small, name), big.blocks, getattr(big, name))
        fields[name] = a + b * blocks * (elements if name in PER_BLOCK_WORK else 1.0)
    per_sample = n / big.n if rows_per_feature(big) >= big.n / 2 else 1.0
    for name in PER_FEATURE:
        a, b = line_through(small.p, getattr(small, name), big.p, getattr(big, name))
        fields[name] = a + b * p * per_sample
    return Profile(n=n, p=p, blocks=blocks, graphs=big.graphs, itemsize=itemsize, **fields)


def rows_per_feature(prof: Profile) -> float:
    """Float64 values the client received per feature over the fit: a few for per-feature
    statistics, about n or more for a factor with one row per sample."""
    return prof.client_bytes / (8.0 * prof.p)


def error(predicted: float, measured: float) -> float:
    """Relative error of a prediction (0.1: 10 % too slow)."""
    return predicted / measured - 1.0


# ------------------------------------------------------------------ counting (in each process)

#: bytes this process's Dask comms received and sent (every frame of distributed.comm.tcp),
#: counted by tests/commcount.py once ``commcount.install()`` has run in the process
COMM = commcount.TOTAL


def task_counter():
    """A scheduler plugin counting graphs and, per key prefix, finished tasks, their compute
    seconds and the bytes of their results (cumulative; read before and after a fit)."""
    from collections import Counter

    from dask.utils import key_split
    from distributed.diagnostics.plugin import SchedulerPlugin

    class TaskCounter(SchedulerPlugin):
        name = PLUGIN

        def __init__(self) -> None:
            self.graphs, self.tasks, self.seconds = 0, Counter(), Counter()
            self.nbytes = Counter()
            self.comm = COMM  # this process's comm counts (the preloaded module's)
            # seconds during which some task was waiting, queued or running: the cluster busy
            self.active: set = set()
            self.busy, self.since = 0.0, 0.0

        def busy_seconds(self) -> float:
            return self.busy + (time.perf_counter() - self.since if self.active else 0.0)

        def update_graph(self, scheduler, **kwargs) -> None:
            self.graphs += 1

        def transition(self, key, start, finish, *args, **kwargs) -> None:
            if finish in ACTIVE and key not in self.active:
                if not self.active:
                    self.since = time.perf_counter()
                self.active.add(key)
            elif finish not in ACTIVE and key in self.active:
                self.active.discard(key)
                if not self.active:
                    self.busy += time.perf_counter() - self.since
            if finish != "memory" or "startstops" not in kwargs:
                return  # only a task a worker computed reports its startstops
            prefix = key_split(key)
            self.tasks[prefix] += 1
            self.nbytes[prefix] += kwargs.get("nbytes") or 0
            for ss in kwargs["startstops"]:
                if ss["action"] == "compute":
                    self.seconds[prefix] += ss["stop"] - ss["start"]

    return TaskCounter()


def dask_setup(scheduler) -> None:
    """``dask scheduler --preload benchmarks/scaling_model.py``: count comms and tasks."""
    commcount.install()
    scheduler.add_plugin(task_counter())


def scheduler_totals(dask_scheduler) -> dict:
    """The scheduler's counts so far (run there by ``client.run_on_scheduler``)."""
    import psutil

    c = dask_scheduler.plugins[PLUGIN]
    return {
        "graphs": c.graphs,
        "tasks": dict(c.tasks),
        "seconds": dict(c.seconds),
        "nbytes": dict(c.nbytes),
        "comm": dict(c.comm),
        "busy": c.busy_seconds(),
        "cpu": sum(psutil.Process().cpu_times()[:2]),
    }


def worker_totals(dask_worker) -> dict:
    """A worker process's CPU seconds (all threads) and the bytes it has sent to others."""
    import psutil

    t = psutil.Process().cpu_times()
    return {"cpu": t.user + t.system, "sent": dask_worker.transfer_outgoing_bytes_total}


# ------------------------------------------------------------------ clusters on loopback hosts


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def can_bind(host: str) -> bool:
    """Whether this machine answers on ``host`` (Linux routes all of 127/8 to loopback)."""
    try:
        _free_port(host)
        return True
    except OSError:
        return False


@contextlib.contextmanager
def hosts_cluster(scheduler_host: str, worker_hosts: list[str], workdir: str) -> Iterator[Any]:
    """A ``dask scheduler`` process on ``scheduler_host`` (this file preloaded) and one
    ``dask worker`` process of one thread per entry of ``worker_hosts``; yields a Client."""
    from distributed import Client

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
        "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error",
    }
    port = _free_port(scheduler_host)
    address = f"tcp://{scheduler_host}:{port}"
    py = [sys.executable, "-m"]
    quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [
        subprocess.Popen(
            [*py, "distributed.cli.dask_scheduler", "--host", scheduler_host, "--port", str(port)]
            + ["--no-dashboard", "--preload", os.path.abspath(__file__)],
            **quiet,
        )
    ]
    client = None
    try:
        deadline = time.monotonic() + 60
        while not _listening(scheduler_host, port):
            if procs[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the dask scheduler on {address} did not come up")
            time.sleep(0.2)
        for host in worker_hosts:
            procs.append(
                subprocess.Popen(
                    [*py, "distributed.cli.dask_worker", address, "--host", host]
                    + ["--nworkers", "1", "--nthreads", "1", "--no-dashboard"]
                    + ["--memory-limit", "2GB", "--local-directory", workdir],
                    **quiet,
                )
            )
        client = Client(address, timeout=30, set_as_default=False)
        client.wait_for_workers(len(worker_hosts), timeout=120)
        yield client
    finally:
        if client is not None:
            client.close()
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


# ------------------------------------------------------------------ measuring a fit


def measure(client, run: Callable[[], Any], read_prefix: str) -> dict:
    """Run ``run()`` on ``client`` once; its wall time and what it cost each process."""
    import cloudpickle
    import dask

    if __name__ != "__main__":  # imported (tests, a notebook): ship this module's functions
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    s0, w0 = client.run_on_scheduler(scheduler_totals), client.run(worker_totals)
    c0 = dict(COMM)
    with dask.config.set(scheduler=client), client.as_current():
        t0 = time.perf_counter()
        run()
        wall = time.perf_counter() - t0
    c1 = dict(COMM)
    s1, w1 = client.run_on_scheduler(scheduler_totals), client.run(worker_totals)

    def grew(key: str) -> dict:
        return {k: v - s0[key].get(k, 0) for k, v in s1[key].items()}

    def read(prefix: str) -> bool:
        return bool(read_prefix) and prefix.startswith(read_prefix)

    tasks, seconds = grew("tasks"), grew("seconds")
    return {
        "time": wall,
        "graphs": s1["graphs"] - s0["graphs"],
        "tasks": sum(tasks.values()),
        "prefixes": {k: v for k, v in tasks.items() if v},
        "reads": sum(v for k, v in tasks.items() if read(k)),
        "task_seconds": sum(seconds.values()),
        "scheduler_cpu": s1["cpu"] - s0["cpu"],
        "worker_cpu": sum(w1[a]["cpu"] - w0[a]["cpu"] for a in w1 if a in w0),
        "worker_sent": sum(w1[a]["sent"] - w0[a]["sent"] for a in w1 if a in w0),
        # the wall time while no task was waiting or running: the client's own work, and
        # each graph's way to the scheduler and its results' way back
        "outside_seconds": max(wall - (s1["busy"] - s0["busy"]), 0.0),
        "client_bytes": c1["received"] - c0["received"],
        "scheduler_bytes": sum(s1["comm"][k] - s0["comm"][k] for k in ("received", "sent")),
        # what may travel between workers: a block read stays where its task computes on it
        "result_bytes": sum(v for k, v in grew("nbytes").items() if not read(k)),
    }


def _noop(i: int) -> int:
    return i


@dataclasses.dataclass(frozen=True)
class Overheads:
    """The cluster's fixed costs, from graphs of no-op tasks (seconds).

    Attributes
    ----------
    per_task : ``o``, what one more task adds to a graph's wall time
    scheduler_per_task : ``o_s``, what it adds to the scheduler's CPU time
    worker_per_task : ``o_w``, what it adds to the workers' CPU time
    contention : ``(κ_io, κ_c)`` of :func:`contention` (the machine's, not the no-op graphs')
    per_graph : ``L``, a one-task graph's wall time less ``o``
    outside : the part of ``L`` while no task waits or runs (the graph's way to the
        scheduler, its result's way back); a fit's time outside the cluster's busy time
        less this per graph is the client's own
    """

    per_task: float
    per_graph: float
    outside: float
    scheduler_per_task: float
    worker_per_task: float
    contention: tuple[float, float] = (1.0, 1.0)

    def cluster(self, workers: int, cores: int, **fields: Any) -> Cluster:
        """A :class:`Cluster` of ``workers`` and ``cores`` that pays these overheads
        (``fields``: its other fields, e.g. ``nodes``, ``storage``, ``shared``)."""
        return Cluster(
            workers,
            cores,
            per_task=self.per_task,
            per_graph=self.per_graph,
            scheduler_per_task=self.scheduler_per_task,
            worker_per_task=self.worker_per_task,
            contention=self.contention,
            **fields,
        )


def overheads(client, tasks: int = 400, repeat: int = 3) -> Overheads:
    """The cluster's :class:`Overheads`: graphs of 1 and of ``tasks`` independent no-op tasks,
    best of ``repeat`` after one warm run, as ``L + k·o``."""
    import dask

    def best(k: int) -> dict:
        def run() -> None:
            dask.compute(*[dask.delayed(_noop, pure=False)(i) for i in range(k)])

        runs = [measure(client, run, "") for _ in range(repeat + 1)][1:]
        return min(runs, key=lambda r: r["time"])

    one, many = best(1), best(tasks)
    per_task = max((many["time"] - one["time"]) / (tasks - 1), 0.0)
    o_s = max((many["scheduler_cpu"] - one["scheduler_cpu"]) / (tasks - 1), 0.0)
    o_w = max((many["worker_cpu"] - one["worker_cpu"]) / (tasks - 1), 0.0)
    return Overheads(
        per_task,
        max(one["time"] - per_task, 0.0),
        one["outside_seconds"],
        min(o_s, per_task),
        min(o_w, per_task - min(o_s, per_task)),
    )


def _block_gram(xb):
    x = xb.astype("float64")
    return (x @ x.T)[None, :1]


def contention(clients: dict, store: str) -> tuple[float, float]:
    """``(κ_io, κ_c)``: the task seconds of a pass with both cores busy (2 processes) over
    the same with one (1 process) — the I/O of an ``X.sum()`` pass and the compute of a
    per-block Gram ``X_b X_bᵀ`` in float64 (its pass less the I/O one) — no fsdask code,
    best of 3 each; (1, 1) without a 2-process cluster."""
    if "2 processes" not in clients:
        return 1.0, 1.0
    X, _ = _open(store)
    gram = X.map_blocks(_block_gram, chunks=(1, 1), dtype="float64")
    runs = {"io": lambda: X.sum().compute(), "gram": lambda: gram.sum().compute()}

    def seconds(client, name: str) -> float:
        measure(client, runs[name], "")
        return min(measure(client, runs[name], "")["task_seconds"] for _ in range(3))

    t = {c: {k: seconds(clients[c], k) for k in runs} for c in ("1 process", "2 processes")}
    one, two = t["1 process"], t["2 processes"]
    k_io = max(two["io"] / one["io"], 1.0)
    k_c = max((two["gram"] - two["io"]) / max(one["gram"] - one["io"], 1e-9), 1.0)
    return k_io, k_c


def fit_of(method: str, X, y) -> Callable[[], Any]:
    """One fit of ``method`` on the dask array X (labels y), as a callable."""
    import warnings

    import fsdask

    warnings.simplefilter("ignore")  # max_iter-limited fits warn that they did not converge
    if method == "floor":
        return lambda: X.sum().compute()
    if method == "filter":
        return lambda: fsdask.Filter("ttest").fit(X, y)
    if method == "hsic":
        return lambda: fsdask.SparseHSIC(n_features_to_select=5).fit(X, y)
    if method == "qalpha":
        return lambda: fsdask.QAlpha(variant="power", k=2, max_iter=2).fit(X)
    if method == "logo_chunked":  # the route of an X larger than the client's budget
        return lambda: fsdask.Logo(max_iter=1, certify=False, memory_budget="64MiB").fit(X, y)
    if method == "cpfs_gram":
        from fsdask.linalg import gram_factor

        Xf = X.astype("float64")
        return lambda: gram_factor(Xf - Xf.mean(axis=0))
    if method == "pca":
        return lambda: fsdask.JolliffeNI(n_features_to_select=10).fit(X)
    raise ValueError(method)


def profile_of(run: dict, n: int, p: int, blocks: int, io_block: float, over: Overheads):
    """A :class:`Profile` from a measured 1-process run, the I/O time of one block and the
    cluster's overheads (the client's own time is what is left outside the cluster's busy
    time once each graph's way there and back is taken off)."""
    fields = {f.name for f in dataclasses.fields(Profile)} - {"n", "p", "blocks", "itemsize"}
    values = {k: float(run[k]) for k in fields - {"io_seconds", "client_seconds"}}
    io = min(run["reads"] * io_block, run["task_seconds"])
    client = max(run["outside_seconds"] - run["graphs"] * over.outside, 0.0)
    return Profile(n=n, p=p, blocks=blocks, io_seconds=io, client_seconds=client, **values)


# ------------------------------------------------------------------ the run

#: the validation clusters: name → (scheduler host, worker hosts)
CLUSTERS = {
    "1 process": ("127.0.0.1", ["127.0.0.1"]),
    "2 processes": ("127.0.0.1", ["127.0.0.1"] * 2),
    "4 hosts": ("127.0.0.2", [f"127.0.0.{i}" for i in range(3, 7)]),
}


def _open(path: str):
    import fsdask

    ds = fsdask.open_dataset(path)
    return ds["X"].data, ds["y"].values


def _mb(b: float) -> str:
    return f"{b / 2**20:.1f} MiB"


def describe(method: str, prof: Profile, io_block: float, sent: float) -> str:
    """One line: what a 1-process fit of ``method`` cost, per block and per process
    (``sent``: the bytes the worker sent, to the client or the scheduler)."""
    compute = (prof.task_seconds - prof.io_seconds) / prof.blocks
    return (
        f"{method:12s} {prof.graphs:3.0f} graphs, {prof.tasks / prof.graphs:6.1f} tasks/graph, "
        f"X read {prof.x_reads:.0f}×; per block io {io_block:.3f} s, compute {compute:.3f} s; "
        f"worker CPU / task time {prof.worker_cpu / max(prof.task_seconds, 1e-9):.2f}; client "
        f"{prof.client_seconds:.2f} s, received {_mb(prof.client_bytes)}; scheduler "
        f"{_mb(prof.scheduler_bytes)}; task results {_mb(prof.result_bytes)}, of which the "
        f"workers sent {_mb(sent)}"
    )


def validate(bench, clients: dict, method: str, store: str, repeat: int):
    """Time ``method`` on every cluster, alternating; return the timings and each cluster's
    runs (dicts of :func:`measure`)."""
    runs: dict[str, list[dict]] = {name: [] for name in clients}

    def timed(name: str) -> Callable[[], dict]:
        X, y = _open(store)
        run = fit_of(method, X, y)
        prefix = X.name.rsplit("-", 1)[0]

        def fn() -> dict:
            out = measure(clients[name], run, prefix)
            runs[name].append(out)
            return out

        return fn

    t = bench.alternate({name: timed(name) for name in clients}, repeat=repeat)
    return t, runs


@dataclasses.dataclass(frozen=True)
class Store:
    """A benchmark store: its path and shape."""

    path: str
    n: int
    p: int
    blocks: int


def best_profile(runs: list[dict], store: Store, io_block: float, over: Overheads) -> Profile:
    """The :class:`Profile` of the fastest of ``runs`` (1 process) on ``store``."""
    best = min(runs, key=lambda r: r["time"])
    return profile_of(best, store.n, store.p, store.blocks, io_block, over)


def half_runs(client, method: str, store: Store) -> list[dict]:
    """Two 1-process runs of ``method`` on ``store`` (the method's code is warm: the first
    may still read the store from disk, the faster one is kept)."""
    X, y = _open(store.path)
    run, prefix = fit_of(method, X, y), X.name.rsplit("-", 1)[0]
    return [measure(client, run, prefix) for _ in range(2)]


def io_per_block(client, store: str, blocks: int) -> float:
    """Task seconds of one ``X.sum()`` pass per block: read and decompress (warm, best of 3)."""
    X, _ = _open(store)
    run = fit_of("floor", X, None)
    measure(client, run, "")
    return min(measure(client, run, "")["task_seconds"] for _ in range(3)) / blocks


def validation_line(method: str, timings: dict, prof: Profile, over: Overheads) -> str:
    """Measured (best of the rounds) against predicted wall time, per cluster."""
    import dask

    parts = []
    for name, (_, hosts) in CLUSTERS.items():
        if name not in timings:
            continue
        cl = over.cluster(len(hosts), dask.system.CPU_COUNT, shared=True)
        pred, measured = predict(prof, cl).wall, timings[name]
        parts.append(
            f"{name} {measured} predicted {pred:.3f} s ({error(pred, measured.seconds):+.0%})"
        )
    return f"{method:12s} " + "; ".join(parts)


def projection_lines(
    profiles: dict, over: Overheads, bandwidths, nic: float, block_bytes: int
) -> list[str]:
    """The projected table: every method × nodes × object-storage bandwidth."""
    t = {**TARGET, "block_bytes": block_bytes}
    width = t["block_bytes"] // (t["n"] * t["itemsize"])
    lines = [
        f"projection: {t['p']:.0e} features × {t['n']:.0e} samples float32 "
        f"({t['n'] * t['p'] * t['itemsize'] / GB:.0f} GB), {t['block_bytes'] // 2**20} MiB blocks "
        f"({math.ceil(t['p'] / width)} blocks of {width} features); {CORES_PER_NODE} cores and "
        f"a {nic * 8 / GB:.0f} Gbit/s link per node, one worker thread per core; o = "
        f"{over.per_task * 1e3:.2f} ms/task (scheduler o_s = {over.scheduler_per_task * 1e3:.2f}, "
        f"workers o_w = {over.worker_per_task * 1e3:.2f}), κ_io = {over.contention[0]:.2f}, "
        f"κ_c = {over.contention[1]:.2f} (a node's busy cores contend as this machine's do), "
        f"L = {over.per_graph * 1e3:.1f} ms/graph as measured here",
        f"{'method':12s} {'nodes':>5s} {'storage':>9s} {'wall':>9s} {'workers':>9s} "
        f"{'reads':>9s} {'scheduler':>9s} {'sched busy':>10s} {'client':>9s} {'client recv':>11s}"
        "  saturates first",
    ]
    for method, (small, big) in profiles.items():
        target = extrapolate(small, big, t["n"], t["p"], t["block_bytes"], t["itemsize"])
        for nodes in NODES:
            for bw in bandwidths:
                cores = nodes * CORES_PER_NODE
                cl = over.cluster(cores, cores, nodes=nodes, nic=nic, storage=bw * GB)
                r = predict(target, cl)
                lines.append(
                    f"{method:12s} {nodes:5d} {bw:5g} GB/s {r.wall:7.1f} s {r.worker:7.1f} s "
                    f"{r.storage:7.1f} s {r.scheduler:7.1f} s {r.scheduler / r.wall:9.0%} "
                    f"{r.client:7.1f} s {target.client_bytes / GB:8.2f} GB  {r.bottleneck}"
                )
    return lines


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small store, for a smoke run")
    ap.add_argument("--n", type=int, default=None, help="samples (default 200; 40 with --quick)")
    ap.add_argument(
        "--p", type=int, default=None, help="features (default 100 000; 8 000 with --quick)"
    )
    ap.add_argument("--blocks", type=int, default=8, help="feature blocks (even)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument(
        "--bandwidth",
        nargs="+",
        type=float,
        default=[1.0, 10.0, 100.0],
        help="object-storage bandwidth to all nodes together, GB/s (default 1 10 100)",
    )
    ap.add_argument("--nic", type=float, default=25.0, help="each node's link, Gbit/s")
    ap.add_argument(
        "--target-block-mb",
        type=float,
        default=64.0,
        help="the projected store's feature blocks, MiB (default 64, the ingest default)",
    )
    ap.add_argument(
        "--no-hosts", action="store_true", help="skip the 4 simulated hosts (127.0.0.2 …)"
    )
    add_args(ap, "scaling_model")
    return ap.parse_args(argv)


def calibrate(bench, clients: dict, big: Store, small: Store, methods) -> tuple:
    """Validate every method on every cluster; return its (half, full) profiles, the
    validation lines and the overheads."""
    one = clients["1 process"]
    over = overheads(one)
    over = dataclasses.replace(over, contention=contention(clients, big.path))
    io_block = io_per_block(one, big.path, big.blocks)
    bench.line(
        f"store: {big.n} × {big.p} float32 in {big.blocks} feature blocks "
        f"({_mb(big.n * big.p * 4 / big.blocks)} each), and {small.n} × {small.p} in "
        f"{small.blocks} for the per-block slopes; a dask scheduler process and worker "
        f"processes of one thread ({', '.join(clients)}); o = {over.per_task * 1e3:.2f} ms/task, "
        f"of which the scheduler's CPU o_s = {over.scheduler_per_task * 1e3:.2f} ms and the "
        f"workers' o_w = {over.worker_per_task * 1e3:.2f} ms; "
        f"L = {over.per_graph * 1e3:.1f} ms/graph (no-op graphs on 1 process); with both cores "
        f"busy a task's I/O runs κ_io = {over.contention[0]:.2f}× and its compute "
        f"κ_c = {over.contention[1]:.2f}× slower (X.sum() and per-block Gram passes, 2 processes "
        "against 1)"
    )
    profiles, validation = {}, []
    for method in methods:
        t, runs = validate(bench, clients, method, big.path, bench.repeat)
        prof = best_profile(runs["1 process"], big, io_block, over)
        sent = min(runs["1 process"], key=lambda r: r["time"])["worker_sent"]
        half = best_profile(half_runs(one, method, small), small, io_block, over)
        profiles[method] = (half, prof)
        bench.line(describe(method, prof, io_block, sent))
        validation.append(validation_line(method, t, prof, over))
    return profiles, validation, over


def main(argv=None) -> int:
    import dask

    args = parse(argv)
    n = args.n or (40 if args.quick else 200)
    p = args.p or (8_000 if args.quick else 100_000)
    blocks = args.blocks - args.blocks % 2
    names = [
        c for c in CLUSTERS if not (c == "4 hosts" and (args.no_hosts or not can_bind("127.0.0.2")))
    ]
    bench = Bench("scaling_model", args.results)
    bench.repeat = args.repeat
    commcount.install()
    with (
        tempfile.TemporaryDirectory(prefix="fsdask-scaling-") as tmp,
        contextlib.ExitStack() as stack,
        dask.config.set({"fsdask.hold-x-below": 0}),
    ):
        big = Store(os.path.join(tmp, "big.zarr"), n, p, blocks)
        small = Store(os.path.join(tmp, "small.zarr"), n, p // 2, blocks // 2)
        for store in (big, small):
            make_store(store.path, store.n, store.p, store.blocks)
        clients = {name: stack.enter_context(hosts_cluster(*CLUSTERS[name], tmp)) for name in names}
        profiles, validation, over = calibrate(bench, clients, big, small, args.methods)
    bench.line("")
    bench.line(
        "measured wall time (best of the rounds) against the model's from the 1-process profile:"
    )
    for line in validation:
        bench.line(line)
    bench.line("")
    for line in projection_lines(
        profiles, over, args.bandwidth, args.nic * GB / 8, int(args.target_block_mb * 2**20)
    ):
        bench.line(line)
    bench.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
