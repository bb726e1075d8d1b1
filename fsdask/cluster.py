"""Where Dask graphs run: one function, one CLI option (``--scheduler``).

==================  ==========================================================================
spec                meaning
==================  ==========================================================================
``threads``         dask's threaded scheduler in this process (default)
``sync``            single-threaded, for debugging
``local``           a ``distributed.LocalCluster`` with one worker process per core, made and
                    closed for the run
``local:N``         the same with N worker processes
``tcp://host:port`` join an existing scheduler (the cluster outlives the run)
``path.yaml``       a dask-jobqueue cluster (SLURM, PBS, …) described in YAML; see ``cluster/``
==================  ==========================================================================

The example cluster files ship with the package (:func:`shipped_configs`); copy one and
edit its queue/account before use.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Iterator

import dask

from fsdask.errors import ParameterError, StoreError

log = logging.getLogger("fsdask")


def quiet_distributed(level: int = logging.WARNING) -> None:
    """Silence distributed's INFO chatter (scheduler/nanny start and stop) unless -vv."""
    import distributed  # noqa: F401  (configures its loggers on import)
    if logging.getLogger("fsdask").getEffectiveLevel() <= logging.DEBUG:
        return
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in ("distributed", "tornado", "bokeh"):
            logging.getLogger(name).setLevel(level)


def _local_cluster(n_workers: int | None, memory_limit: str | None, threads_per_worker: int = 1):
    from distributed import LocalCluster
    n = n_workers or os.cpu_count() or 1
    return LocalCluster(n_workers=n, threads_per_worker=threads_per_worker, processes=True,
                        memory_limit=memory_limit or "auto", dashboard_address=":0",
                        silence_logs=logging.WARNING)


def shipped_configs() -> dict[str, str]:
    """The example cluster files installed with fsdask: {relative name: absolute path}.

    ``slurm.yaml``, ``pbs.yaml`` (dask-jobqueue) and ``kubernetes/daskcluster.yaml``; the
    same files as ``cluster/`` in the source tree.
    """
    from importlib import resources
    root = resources.files("fsdask") / "cluster_configs"
    out: dict[str, str] = {}
    stack = [(root, "")]
    while stack:
        d, prefix = stack.pop()
        for entry in d.iterdir():
            if entry.is_dir():
                stack.append((entry, f"{prefix}{entry.name}/"))
            elif entry.name.endswith((".yaml", ".yml")):
                out[prefix + entry.name] = str(entry)
    return dict(sorted(out.items()))


JOBQUEUE_CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster", "lsf": "LSFCluster",
                    "htcondor": "HTCondorCluster", "oar": "OARCluster", "moab": "MoabCluster"}


def read_cluster_yaml(path: str) -> tuple[str, int, dict]:
    """Parse a cluster YAML file → (dask-jobqueue class name, number of jobs, keyword arguments).

    The file holds ``jobqueue: slurm|pbs|…``, ``jobs: N`` (batch jobs to submit) and any
    keyword argument of the dask-jobqueue class (``cores``, ``memory``, ``processes``,
    ``walltime``, ``queue``, ``account``, ``job_extra_directives``, …).  See ``cluster/``.
    """
    import yaml
    try:
        with open(path) as fh:
            spec = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ParameterError(f"--scheduler {path}: cannot read the cluster file ({exc})") from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"--scheduler {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict):
        raise ParameterError(f"{path}: expected a mapping of options (jobqueue: slurm, cores: …)")
    spec = dict(spec)
    kind = str(spec.pop("jobqueue", spec.pop("kind", ""))).lower()
    if kind not in JOBQUEUE_CLASSES:
        raise ParameterError(f"{path}: 'jobqueue' must be one of {', '.join(JOBQUEUE_CLASSES)}; got {kind!r}")
    try:
        jobs = int(spec.pop("jobs", 1))
    except (TypeError, ValueError):
        raise ParameterError(f"{path}: 'jobs' must be a whole number of batch jobs") from None
    if jobs < 1:
        raise ParameterError(f"{path}: 'jobs' must be ≥ 1; got {jobs}")
    return JOBQUEUE_CLASSES[kind], jobs, spec


def jobqueue_cluster(path: str, *, scale: bool = True):
    """Make the dask-jobqueue cluster described by the YAML file ``path``.

    With ``scale=False`` nothing is submitted (used to inspect ``cluster.job_script()``).
    """
    cls_name, jobs, kwargs = read_cluster_yaml(path)
    try:
        import dask_jobqueue
    except ImportError as exc:
        raise ParameterError(f"{path}: a jobqueue cluster needs dask-jobqueue: pip install 'fsdask[jobqueue]'") from exc
    kwargs.setdefault("scheduler_options", {}).setdefault("dashboard_address", ":0")
    try:
        cluster = getattr(dask_jobqueue, cls_name)(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{path}: bad option for dask_jobqueue.{cls_name} ({exc})") from None
    if scale:
        cluster.scale(jobs=jobs)
    return cluster


@contextlib.contextmanager
def scheduler(spec: str | None = "threads", *, memory_limit: str | None = None,
              timeout: float = 30.0) -> Iterator[Any]:
    """Context manager that makes ``spec`` the scheduler for everything computed inside.

    Yields the ``distributed.Client`` (or None for ``threads``/``sync``); clusters made here
    are closed on exit, an existing one (``tcp://``) is left running.
    """
    spec = (spec or "threads").strip()
    if spec in ("threads", "threaded"):
        with dask.config.set(scheduler="threads"):
            yield None
        return
    if spec in ("sync", "synchronous"):
        with dask.config.set(scheduler="synchronous"):
            yield None
        return
    from distributed import Client
    quiet_distributed()
    cluster = None
    if spec == "local" or spec.startswith("local:"):
        n = None
        if ":" in spec:
            try:
                n = int(spec.split(":", 1)[1])
            except ValueError as exc:
                raise ParameterError(f"--scheduler {spec!r}: use local:N with N a number of worker processes") from exc
            if n < 1:
                raise ParameterError(f"--scheduler {spec!r}: N must be ≥ 1")
        cluster = _local_cluster(n, memory_limit)
        address: Any = cluster
    elif spec.startswith(("tcp://", "tls://", "ucx://", "ws://", "inproc://")):
        address = spec
    elif spec.endswith((".yaml", ".yml")):
        if not os.path.exists(spec):
            shipped = shipped_configs()
            hint = shipped.get(os.path.basename(spec))
            hint = f"; fsdask ships an example at {hint} — copy it and edit queue/account" if hint else ""
            raise ParameterError(f"--scheduler {spec}: no such cluster file{hint}; see cluster/README.md")
        cluster = jobqueue_cluster(spec)
        address = cluster
    else:
        raise ParameterError(f"--scheduler {spec!r} not understood; use threads, sync, local, local:N, "
                             "tcp://host:port or a cluster YAML file")
    try:
        client = Client(address, timeout=timeout, set_as_default=True)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise StoreError(f"could not reach the Dask scheduler at {spec} ({exc}); check that it is running "
                         "and reachable from here") from exc
    log.info("running on %s", client)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _interval(interval: float | None) -> float:
    if interval is not None:
        return float(interval)
    try:
        return float(os.environ.get("FSDASK_PROGRESS_INTERVAL", "10"))
    except ValueError:
        return 10.0


def _scheduler_counts(dask_scheduler=None) -> dict:
    """Task counts by state and the number of workers (runs on the distributed scheduler)."""
    counts: dict = {}
    for ts in dask_scheduler.tasks.values():
        counts[ts.state] = counts.get(ts.state, 0) + 1
    counts["workers"] = len(dask_scheduler.workers)
    return counts


class _LogProgress:
    """A dask callback printing ``done/total tasks`` every ``interval`` seconds (no tty)."""

    def __init__(self, interval: float, stream: Any):
        from dask.callbacks import Callback

        outer = self

        class _CB(Callback):
            def _start_state(self, dsk, state):
                outer.total += len(state["ready"]) + len(state["waiting"]) + len(state["finished"])

            def _posttask(self, key, result, dsk, state, worker_id):
                outer.done += 1
                outer.maybe_print()

        self.cb = _CB()
        self.interval, self.stream = interval, stream
        self.done = self.total = 0
        self.t0 = self.last = time.perf_counter()

    def maybe_print(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self.last >= self.interval:
            self.last = now
            pct = 100.0 * self.done / max(self.total, 1)
            print(f"fsdask: {self.done}/{self.total} tasks ({pct:.0f}%) after {now - self.t0:.0f} s",
                  file=self.stream, flush=True)


@contextlib.contextmanager
def progress(client: Any = None, enabled: bool = True, *, interval: float | None = None,
             stream: Any = None) -> Iterator[None]:
    """Show progress of the computations run inside the block.

    * local schedulers (``client`` is None): dask's progress bar on a terminal; otherwise a
      line ``fsdask: done/total tasks`` every ``interval`` seconds;
    * distributed (``client`` given): a line every ``interval`` seconds with the scheduler's
      task counts (in memory / processing / waiting) and the number of workers.

    ``interval`` defaults to the environment variable ``FSDASK_PROGRESS_INTERVAL`` or 10 s.
    Lines go to ``stream`` (stderr by default), so stdout stays clean for results.
    """
    import sys
    stream = stream or sys.stderr
    if not enabled:
        yield
        return
    every = _interval(interval)
    if client is None:
        if getattr(stream, "isatty", lambda: False)():
            from dask.diagnostics import ProgressBar
            with ProgressBar(minimum=2.0, dt=0.5, out=stream):
                yield
            return
        lp = _LogProgress(every, stream)
        with lp.cb:
            yield
        return
    stop = threading.Event()

    def poll() -> None:
        t0 = time.perf_counter()
        while not stop.wait(every):
            try:
                c = client.run_on_scheduler(_scheduler_counts)
            except Exception:  # the cluster is going away; progress is best effort
                return
            print(f"fsdask: {c.get('memory', 0)} tasks done, {c.get('processing', 0)} running, "
                  f"{c.get('waiting', 0) + c.get('no-worker', 0) + c.get('queued', 0)} waiting on "
                  f"{c.get('workers', 0)} worker(s) after {time.perf_counter() - t0:.0f} s",
                  file=stream, flush=True)

    thread = threading.Thread(target=poll, name="fsdask-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
