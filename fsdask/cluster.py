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
"""

from __future__ import annotations

import contextlib
import logging
import os
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


def _jobqueue_cluster(path: str):
    import yaml
    try:
        with open(path) as fh:
            spec = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ParameterError(f"--scheduler {path}: cannot read the cluster file ({exc})") from exc
    kind = str(spec.pop("jobqueue", spec.pop("kind", ""))).lower()
    jobs = int(spec.pop("jobs", 1))
    try:
        import dask_jobqueue
    except ImportError as exc:
        raise ParameterError(f"{path}: a jobqueue cluster needs dask-jobqueue: pip install 'fsdask[jobqueue]'") from exc
    classes = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster", "lsf": "LSFCluster",
               "htcondor": "HTCondorCluster", "oar": "OARCluster", "moab": "MoabCluster"}
    if kind not in classes:
        raise ParameterError(f"{path}: 'jobqueue' must be one of {', '.join(classes)}; got {kind!r}")
    cluster = getattr(dask_jobqueue, classes[kind])(**spec)
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
        cluster = _jobqueue_cluster(spec)
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


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[None]:
    """Show dask's progress bar for computations on the local schedulers."""
    if not enabled:
        yield
        return
    from dask.diagnostics import ProgressBar
    with ProgressBar(minimum=2.0, dt=0.5):
        yield
