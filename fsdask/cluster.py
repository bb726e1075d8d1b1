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

None of them can hang silently: a ``tcp://`` address must answer the Dask handshake within
``timeout``; a cluster made here whose worker processes keep dying (killed for exceeding
their memory limit, crashing at start) is stopped after :data:`MAX_WORKER_DEATHS` deaths
per worker within :data:`DEATH_WINDOW` seconds (and a ``--memory-limit`` no worker can start
under is refused before any starts); a jobqueue cluster must get its first worker within ``worker_timeout``,
and a batch system refusing the job is reported with its own message.

The example cluster files ship with the package (:func:`shipped_configs`); copy one and
edit its queue/account before use.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import os
import threading
import time
from typing import Any, Iterator

import dask

from fsdask.errors import ClusterError, ParameterError, import_optional
from fsdask.linalg.threads import cores
from fsdask.linalg.worker_memory import WorkerMemory

log = logging.getLogger("fsdask")


def quiet_distributed(level: int = logging.WARNING) -> None:
    """Silence distributed's INFO chatter (scheduler/nanny start and stop) unless -vv."""
    import distributed  # noqa: F401  (configures its loggers on import)

    if logging.getLogger("fsdask").getEffectiveLevel() <= logging.DEBUG:
        return
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in ("distributed", "tornado", "bokeh"):
            logging.getLogger(name).setLevel(level)


MAX_WORKER_DEATHS = 3  # per worker slot, within DEATH_WINDOW seconds: a crash loop, not bad luck
DEATH_WINDOW = 120.0  # a busy machine restarts workers slowly: a shorter window can miss the loop
# a LocalCluster made here that has had no live worker this long, after deaths, is not coming
# back: a worker that dies while its nanny is still starting it is not restarted, silently
NO_WORKER_TIMEOUT = 60.0
WORKER_TIMEOUT = 300.0  # seconds a jobqueue cluster may take to start its first worker
MIN_WORKER_MEMORY = (
    256 * 2**20
)  # a worker holds ~210 MiB once it has imported fsdask's stack, before any data


def _check_memory_limit(memory_limit: str | None) -> None:
    """Refuse a per-worker limit no worker can run under.

    The nanny would kill every worker as soon as it imports fsdask and restart it, a crash
    loop in place of an answer; refusing before any process starts is instant and certain.
    """
    if memory_limit is None:
        return
    from distributed.worker_memory import parse_memory_limit

    try:
        limit = parse_memory_limit(memory_limit, 1, logger=log)
    except (ValueError, TypeError) as exc:
        raise ParameterError(
            f"--memory-limit {memory_limit!r} not understood; give bytes per worker "
            "such as 2GB, a fraction of the machine's memory such as 0.25, or auto"
        ) from exc
    if limit is not None and limit < MIN_WORKER_MEMORY:
        raise ParameterError(
            f"--memory-limit {memory_limit} is below what one worker process needs to run "
            f"fsdask (~210 MiB after its imports); give at least 256MiB per worker or leave it unset"
        )


def _local_cluster(n_workers: int | None, memory_limit: str | None, threads_per_worker: int = 1):
    from distributed import LocalCluster

    n = n_workers or cores()  # affinity and a cgroup quota count, as for the threaded scheduler
    return LocalCluster(
        n_workers=n,
        threads_per_worker=threads_per_worker,
        processes=True,
        memory_limit=memory_limit or "auto",
        dashboard_address=":0",
        silence_logs=logging.CRITICAL,
    )  # task errors reach the client as one line


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


JOBQUEUE_CLASSES = {
    "slurm": "SLURMCluster",
    "pbs": "PBSCluster",
    "sge": "SGECluster",
    "lsf": "LSFCluster",
    "htcondor": "HTCondorCluster",
    "oar": "OARCluster",
    "moab": "MoabCluster",
}


def read_cluster_yaml(path: str) -> tuple[str, int, dict]:
    """Parse a cluster YAML file → (dask-jobqueue class name, number of jobs, keyword arguments).

    The file holds ``jobqueue: slurm|pbs|…``, ``jobs: N`` (batch jobs to submit) and any
    keyword argument of the dask-jobqueue class (``cores``, ``memory``, ``processes``,
    ``walltime``, ``queue``, ``account``, ``job_extra_directives``, …).  See ``cluster/``.
    """
    spec = _load_cluster_yaml(path)
    spec = dict(spec)
    kind = str(spec.pop("jobqueue", spec.pop("kind", ""))).lower()
    if kind not in JOBQUEUE_CLASSES:
        raise ParameterError(
            f"{path}: 'jobqueue' must be one of {', '.join(JOBQUEUE_CLASSES)}; got {kind!r}"
        )
    try:
        jobs = int(spec.pop("jobs", 1))
    except (TypeError, ValueError):
        raise ParameterError(f"{path}: 'jobs' must be a whole number of batch jobs") from None
    if jobs < 1:
        raise ParameterError(f"{path}: 'jobs' must be ≥ 1; got {jobs}")
    spec.pop("worker_timeout", None)  # fsdask's own key, read by scheduler()
    return JOBQUEUE_CLASSES[kind], jobs, spec


def _load_cluster_yaml(path: str) -> dict:
    """The mapping in the cluster file ``path``; a ParameterError naming the file otherwise."""
    import yaml

    try:
        with open(path) as fh:
            spec = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ParameterError(f"--scheduler {path}: cannot read the cluster file ({exc})") from None
    except yaml.YAMLError as exc:
        raise ParameterError(
            f"--scheduler {path}: not valid YAML ({str(exc).splitlines()[0]})"
        ) from None
    if not isinstance(spec, dict):
        raise ParameterError(
            f"--scheduler {path}: expected a mapping of options (jobqueue: slurm, cores: …), "
            f"got a YAML {type(spec).__name__}"
        )
    return spec


def _yaml_worker_timeout(path: str) -> float | None:
    value = _load_cluster_yaml(path).get("worker_timeout")
    return None if value is None else _positive_seconds(value, f"{path}: worker_timeout")


def _positive_seconds(value: Any, what: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a number of seconds; got {value!r}") from None
    if not 0 < seconds < float("inf"):
        raise ParameterError(f"{what} must be a positive number of seconds; got {value!r}")
    return seconds


def jobqueue_cluster(path: str, *, scale: bool = True):
    """Make the dask-jobqueue cluster described by the YAML file ``path``.

    With ``scale=False`` nothing is submitted (used to inspect ``cluster.job_script()``).
    """
    cls_name, jobs, kwargs = read_cluster_yaml(path)
    dask_jobqueue = import_optional("dask_jobqueue", "jobqueue", f"{path}: a jobqueue cluster")
    kwargs.setdefault("scheduler_options", {}).setdefault("dashboard_address", ":0")
    try:
        cluster = getattr(dask_jobqueue, cls_name)(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{path}: bad option for dask_jobqueue.{cls_name} ({exc})") from None
    if scale:
        _submit(cluster, jobs, path)
    return cluster


class _DropFailedSubmissions(logging.Filter):
    """Drop the tracebacks of a failed job submission (tornado's, asyncio's 'never retrieved'):
    :func:`_submit` reports the failure once."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not ("_correct_state" in msg or "Command exited with non-zero exit code" in msg)


_DROP_SUBMISSIONS = _DropFailedSubmissions()


def _submit(cluster, jobs: int, path: str) -> None:
    """Submit ``jobs`` batch jobs and wait for the submission (not the jobs) to finish.

    dask-jobqueue submits in a background task whose failure is only logged (a traceback per
    attempt) while the client waits for workers forever; awaiting the same task here turns
    the batch system's refusal into one error.
    """
    for name in ("tornado.application", "asyncio"):
        logging.getLogger(name).addFilter(_DROP_SUBMISSIONS)

    async def scale_and_wait() -> (
        None
    ):  # on the cluster's loop, so the task awaited is the submitting one
        cluster.scale(jobs=jobs)
        await cluster._correct_state()

    try:
        cluster.sync(scale_and_wait)
    except RuntimeError as exc:
        _close_after_failed_submission(cluster)
        raise ClusterError(
            f"{path}: the batch system refused the worker job: {_batch_error(exc)}"
        ) from None


def _close_after_failed_submission(cluster) -> None:
    """Cancel the jobs that were submitted and close; jobs never submitted are forgotten first
    (closing a cluster asserts that each of its jobs started)."""
    cluster.worker_spec.clear()
    for name, job in list(cluster.workers.items()):
        if getattr(job, "job_id", None) is None:
            del cluster.workers[name]
    for job in list(getattr(cluster, "_created", ())):
        if getattr(job, "job_id", None) is None:
            cluster._created.discard(job)
    try:
        cluster.close()
    except Exception as exc:  # noqa: BLE001  (the submission error is the one to report)
        log.debug("closing the jobqueue cluster after a failed submission: %s", exc)


def _batch_error(exc: BaseException) -> str:
    """The batch system's own message out of dask-jobqueue's 'Command exited …' error."""
    text = str(exc)
    if "stderr:" in text:
        text = text.split("stderr:", 1)[1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return "; ".join(lines[-2:]) or type(exc).__name__


def _job_ids(cluster) -> list[str]:
    return [
        str(job.job_id)
        for job in getattr(cluster, "workers", {}).values()
        if getattr(job, "job_id", None)
    ]


def _job_report(cluster, path: str) -> str:
    """Job ids, the batch system's view of them (SLURM) and where their logs are."""
    import glob
    import shutil
    import subprocess

    ids = _job_ids(cluster)
    parts = [f"job(s) {', '.join(ids) or '(none submitted)'}"]
    if ids and shutil.which("squeue"):
        try:
            out = subprocess.run(
                ["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T %r"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.split()
            if out:
                parts.append("squeue: " + " ".join(out))
        except (OSError, subprocess.SubprocessError):
            pass
    logdir = getattr(cluster, "_dummy_job", None) and cluster._dummy_job.log_directory
    if logdir:
        parts.append(f"logs in {os.path.abspath(logdir)}")
        for job_id in ids[:1]:
            for log_file in sorted(glob.glob(os.path.join(logdir, f"*{job_id}*")))[:2]:
                with open(log_file, errors="replace") as fh:
                    tail = [ln.strip() for ln in fh if ln.strip()][-1:]
                if tail:
                    parts.append(f"{os.path.basename(log_file)}: {tail[0][:200]}")
    else:
        parts.append("no log_directory set in the cluster file (add one to keep the jobs' logs)")
    return "; ".join(parts)


class _Watchdog:
    """Counts worker deaths of a cluster made here; trips on a crash loop.

    Deaths are seen by the nannies of a LocalCluster (running in this process; a worker
    killed at start-up never reaches the scheduler, so only their log says it) or by the
    scheduler (jobqueue workers).  Tripping cancels everything the clients asked for, with
    the reason as message, so a computation waiting for results returns instead of waiting
    for workers forever.
    """

    name = "fsdask-watchdog"

    def __init__(self, n_slots: int, what: Any, scheduler: Any, on_removal: bool):
        self.limit, self.what, self.scheduler, self.on_removal = (
            MAX_WORKER_DEATHS * max(n_slots, 1),
            what,
            scheduler,
            on_removal,
        )
        self.deaths: list[float] = []
        self.removed = 0  # workers the scheduler lost while running
        self.memory_kills = 0
        self.reason: str | None = None

    def nanny_said(self, msg: str, level: int = logging.WARNING) -> None:
        if "memory budget" in msg:
            self.memory_kills += 1
        elif msg.startswith("Restarting worker") or level >= logging.ERROR:
            # an ERROR of a nanny is a worker that died while starting (it is not restarted
            # with the usual message): on a busy machine a crash loop shows only these
            self.death()

    def death(self) -> None:
        now = time.monotonic()
        self.deaths = [t for t in self.deaths if now - t < DEATH_WINDOW] + [now]
        if len(self.deaths) > self.limit and self.reason is None:
            self.reason = (
                f"worker processes died {len(self.deaths)} times within {DEATH_WINDOW:.0f} s "
                f"{self._why()}"
            )
            self.cancel(self.scheduler)

    def stalled(self) -> None:
        """No worker has been alive for :data:`NO_WORKER_TIMEOUT` s after deaths."""
        if self.reason is None:
            self.reason = (
                f"worker processes died {max(self.removed, len(self.deaths))} times and none has "
                f"been alive for {NO_WORKER_TIMEOUT:.0f} s {self._why()}"
            )
            self.cancel(self.scheduler)

    def _why(self) -> str:
        cause = (
            f"{self.memory_kills} of them killed by their nanny for exceeding the memory limit"
            if self.memory_kills
            else "they crashed or were killed"
        )
        what = self.what() if callable(self.what) else self.what
        return f"({cause}); {what}"

    # SchedulerPlugin hooks
    def remove_worker(self, scheduler, worker: str, **kwargs: Any) -> None:
        if scheduler.status.name == "running":
            self.removed += 1
            if self.on_removal:
                self.death()

    def update_graph(self, scheduler, *, client: str, keys, **kwargs: Any) -> None:
        if self.reason is not None:
            self.cancel(scheduler)

    def cancel(self, scheduler) -> None:
        for client, cs in list(scheduler.clients.items()):
            keys = [ts.key for ts in cs.wants_what]
            if keys:
                scheduler.stimulus_cancel(
                    keys, client, force=True, reason="fsdask", msg=self.reason
                )


@contextlib.contextmanager
def _watchdog(cluster, n_slots: int, what: str, *, local: bool) -> Iterator[_Watchdog]:
    """A :class:`_Watchdog` on the scheduler (and, for a LocalCluster, the nannies) of ``cluster``."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class Watchdog(_Watchdog, SchedulerPlugin):
        pass

    class NannyLog(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            dog.nanny_said(record.getMessage(), record.levelno)

    dog = Watchdog(n_slots, what, cluster.scheduler, on_removal=not local)
    nanny_log, handler = logging.getLogger("distributed.nanny"), NannyLog(logging.WARNING)
    cluster.scheduler.add_plugin(dog, name=dog.name)
    # the nannies and the scheduler of a LocalCluster made here live in this process: their
    # restart tracebacks and lost-task notes go to the watchdog only (it, or the KilledWorker
    # they end in, ends the run with a one-line reason), not to stderr
    hide = local and log.getEffectiveLevel() > logging.DEBUG  # -vv shows them
    names = ("distributed.nanny", "distributed.utils", "distributed.scheduler")
    quiet = [logging.getLogger(n) for n in names] if hide else []
    propagate = [lg.propagate for lg in quiet]
    if local:
        nanny_log.addHandler(handler)
    for lg in quiet:
        lg.propagate = False
    stop = threading.Event()
    if local:
        threading.Thread(
            target=_watch_for_no_workers,
            args=(cluster, dog, stop),
            name="fsdask-no-workers",
            daemon=True,
        ).start()
    try:
        yield dog
    finally:
        stop.set()
        nanny_log.removeHandler(handler)
        for lg, p in zip(quiet, propagate):
            lg.propagate = p


def _watch_for_no_workers(cluster, dog: _Watchdog, stop: threading.Event) -> None:
    """Trip ``dog`` when the LocalCluster has had no worker for :data:`NO_WORKER_TIMEOUT` s
    after losing some (its nannies stopped restarting them; the run would wait forever)."""
    empty_since = None
    while not stop.wait(1.0):
        if cluster.scheduler.workers or not dog.removed:
            empty_since = None
            continue
        empty_since = empty_since or time.monotonic()
        if time.monotonic() - empty_since > NO_WORKER_TIMEOUT:
            cluster.loop.add_callback(dog.stalled)
            return


def _wait_for_first_worker(client, cluster, timeout: float, path: str) -> None:
    deadline = time.monotonic() + timeout
    while not client.scheduler_info(n_workers=1)["workers"]:
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{path}: no worker connected within {timeout:.0f} s (--worker-timeout); "
                f"{_job_report(cluster, path)}"
            )
        time.sleep(0.5)


@dataclasses.dataclass
class _Target:
    """Where :func:`scheduler` sends the graphs: the address a Client connects to, and, for a
    cluster made here, the cluster, its worker slots and what to tell the user when its
    workers die (a string, or a callable for the jobqueue's job report at that time)."""

    spec: str
    address: Any
    cluster: Any = None
    slots: int = 0
    what: Any = ""
    local: bool = False
    worker_timeout: float | None = None
    memory_limit: str | None = None


def _worker_timeout(value: Any) -> float | None:
    """``--worker-timeout`` (or ``$FSDASK_WORKER_TIMEOUT``) in seconds, None when unset."""
    if value is None and os.environ.get("FSDASK_WORKER_TIMEOUT"):
        value = os.environ["FSDASK_WORKER_TIMEOUT"]
    return None if value is None else _positive_seconds(value, "--worker-timeout")


def _local_workers(spec: str) -> int | None:
    """N of ``local:N`` (None for ``local``: one per core)."""
    if ":" not in spec:
        return None
    try:
        n = int(spec.split(":", 1)[1])
    except ValueError as exc:
        raise ParameterError(
            f"--scheduler {spec!r}: use local:N with N a number of worker processes"
        ) from exc
    if n < 1:
        raise ParameterError(f"--scheduler {spec!r}: N must be ≥ 1")
    return n


def memory_remedy(memory_limit: str | None) -> str:
    """What to do when local workers die of their memory limit: one wording for the
    watchdog that stops a run and for a task whose workers all died (KilledWorker)."""
    limit = f"--memory-limit {memory_limit}" if memory_limit else "the default memory limit"
    return (
        f"each worker runs under {limit}; raise it (e.g. --memory-limit 2GB) or use "
        "fewer workers (local:N) so each gets more"
    )


def _local_target(spec: str, memory_limit: str | None) -> _Target:
    """A LocalCluster made here; a worker that dies while it starts is a ClusterError."""
    n = _local_workers(spec)
    _check_memory_limit(memory_limit)
    what = (
        memory_remedy(memory_limit)
        if memory_limit
        else "run again with -vv to see the workers' own messages"
    )
    try:
        cluster = _local_cluster(n, memory_limit)
    except (RuntimeError, TimeoutError, OSError) as exc:  # distributed: "Nanny failed to start."
        limit = f" under --memory-limit {memory_limit}" if memory_limit else ""
        raise ClusterError(
            f"--scheduler {spec}: a worker process died while the local cluster was starting"
            f"{limit} ({_one_line(exc)}); {what}"
        ) from None
    return _Target(
        spec, cluster, cluster, len(cluster.workers), what, local=True, memory_limit=memory_limit
    )


def _yaml_target(spec: str, worker_timeout: float | None) -> _Target:
    """A dask-jobqueue cluster made here from the cluster file ``spec``."""
    if not os.path.exists(spec):
        hint = shipped_configs().get(os.path.basename(spec))
        hint = (
            f"; fsdask ships an example at {hint} — copy it and edit queue/account" if hint else ""
        )
        raise ParameterError(
            f"--scheduler {spec}: no such cluster file{hint}; see cluster/README.md"
        )
    if worker_timeout is None:
        worker_timeout = _yaml_worker_timeout(spec) or WORKER_TIMEOUT
    cluster = jobqueue_cluster(spec)
    slots = (
        len(cluster.worker_spec) * max(1, int(cluster._dummy_job.worker_processes or 1))
        if hasattr(cluster, "_dummy_job")
        else len(cluster.worker_spec)
    )
    what = lambda: _job_report(cluster, spec)  # noqa: E731  (job ids at the time of the failure)
    return _Target(spec, cluster, cluster, slots, what, worker_timeout=worker_timeout)


def _target(spec: str, memory_limit: str | None, timeout: float, worker_timeout: Any) -> _Target:
    """The :class:`_Target` of a distributed ``spec``, the cluster started if it is made here."""
    worker_timeout = _worker_timeout(worker_timeout)
    if spec == "local" or spec.startswith("local:"):
        return _local_target(spec, memory_limit)
    if spec.startswith(("tcp://", "tls://", "ucx://", "ws://", "inproc://")):
        _probe_scheduler(spec, timeout)
        return _Target(spec, spec)
    if spec.endswith((".yaml", ".yml")):
        return _yaml_target(spec, worker_timeout)
    raise ParameterError(
        f"--scheduler {spec!r} not understood; use threads, sync, local, local:N, "
        "tcp://host:port or a cluster YAML file"
    )


def _connect(t: _Target, timeout: float) -> Any:
    """A Client of ``t`` (set as dask's default); a ClusterError if it cannot reach it."""
    from distributed import Client

    try:
        return Client(t.address, timeout=timeout, set_as_default=True)
    except (OSError, TimeoutError) as exc:
        if t.cluster is not None:
            t.cluster.close()
        raise ClusterError(
            f"could not reach the Dask scheduler at {t.spec} ({exc}); check that it is running "
            "and reachable from here"
        ) from exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _lost_workers(exc: BaseException, t: _Target, dog: _Watchdog | None) -> ClusterError | None:
    """The ClusterError for ``exc`` when the workers, not the computation, failed: the
    watchdog tripped, or distributed gave up on a task whose workers all died (KilledWorker:
    a memory limit too small for the task, or workers killed from outside)."""
    if isinstance(exc, ClusterError):
        return None
    if dog is not None and dog.reason is not None:
        return ClusterError(f"--scheduler {t.spec}: stopped: {dog.reason}")
    from distributed.scheduler import KilledWorker

    if not isinstance(exc, KilledWorker):
        return None
    kills = dog.memory_kills if dog is not None else 0
    cause = (
        f"their nannies killed {kills} workers for exceeding the memory limit"
        if kills
        else "they crashed, were killed, or exceeded their memory limit"
    )
    if t.local:
        what = memory_remedy(t.memory_limit)
    elif t.cluster is not None:
        what = t.what() if callable(t.what) else t.what
    else:
        what = "check the workers' memory limit and their logs"
    return ClusterError(
        f"--scheduler {t.spec}: the worker processes running one task died "
        f"{dask.config.get('distributed.scheduler.allowed-failures') + 1} times ({cause}); {what}"
    )


@contextlib.contextmanager
def _supervised(t: _Target, client: Any) -> Iterator[None]:
    """Watch the workers of a cluster made here, wait for a jobqueue cluster's first worker,
    and turn a failure of the workers into one ClusterError."""
    with contextlib.ExitStack() as stack:
        dog = (
            stack.enter_context(_watchdog(t.cluster, t.slots, t.what, local=t.local))
            if t.cluster is not None
            else None
        )
        try:
            if t.worker_timeout is not None and t.cluster is not None:
                _wait_for_first_worker(client, t.cluster, t.worker_timeout, t.spec)
            yield
        except BaseException as exc:
            err = _lost_workers(exc, t, dog)
            if err is None:
                raise
            raise err from None


@contextlib.contextmanager
def scheduler(
    spec: str | None = "threads",
    *,
    memory_limit: str | None = None,
    timeout: float = 30.0,
    worker_timeout: float | None = None,
) -> Iterator[Any]:
    """Context manager that makes ``spec`` the scheduler for everything computed inside.

    Yields the ``distributed.Client`` (or None for ``threads``/``sync``); clusters made here
    are closed on exit, an existing one (``tcp://``) is left running.  ``timeout`` bounds
    reaching a scheduler; ``worker_timeout`` (default: ``$FSDASK_WORKER_TIMEOUT``, the cluster
    file's ``worker_timeout``, else :data:`WORKER_TIMEOUT`) bounds the wait for a jobqueue cluster's first worker.
    Raises :class:`~fsdask.errors.ClusterError` instead of waiting forever, and when workers
    die: at start-up, in a crash loop, or every time they run the same task (``KilledWorker``,
    e.g. a ``memory_limit`` too small for the task).

    Parameters
    ----------
    spec : str or None, default "threads"
        ``threads``, ``sync``, ``local`` / ``local:N`` (a ``LocalCluster`` of N worker
        processes made for the block), ``tcp://host:port`` (an existing scheduler) or the
        path of a dask-jobqueue cluster file (SLURM, PBS…).
    memory_limit : str, optional
        Memory limit per worker of a cluster made here (``"2GB"``).
    timeout : float, default 30
        Seconds to reach the scheduler.
    worker_timeout : float, optional
        Seconds a jobqueue cluster's jobs have to start a first worker.

    Yields
    ------
    distributed.Client or None
        The client, or None for the in-process schedulers.

    Examples
    --------
    >>> import numpy as np
    >>> import fsdask
    >>> from fsdask.cluster import scheduler
    >>> X = np.random.default_rng(0).normal(size=(20, 50))
    >>> with scheduler("threads") as client:
    ...     sel = fsdask.Filter(statistic="variance", n_features_to_select=5).fit(X)
    >>> client is None, int(sel.get_support().sum())
    (True, 5)
    """
    spec = (spec or "threads").strip()
    in_process = {"threads": "threads", "threaded": "threads", "sync": "synchronous"}
    in_process["synchronous"] = "synchronous"
    if spec in in_process:
        with dask.config.set(scheduler=in_process[spec]):
            yield None
        return
    quiet_distributed()
    t = _target(spec, memory_limit, timeout, worker_timeout)
    client = _connect(t, timeout)
    log.info("running on %s", client)
    failed = True
    plan = _PLAN.set(_worker_plan(t))
    try:
        with _supervised(t, client):
            yield client
        failed = False
    finally:
        _PLAN.reset(plan)
        # closing after a failed task: the nanny's "still alive, killing" is not the user's news
        with _quiet(
            "distributed", "distributed.nanny", "distributed.scheduler", "distributed.core"
        ):
            _close(client, t.cluster, failed=failed)


#: seconds closing a cluster made here may take: a nanny caught mid-restart by a crash loop
#: can leave ``close()`` waiting forever, and the run's error is printed only after it
CLOSE_TIMEOUT = 30.0


def _close(client, cluster, failed: bool = False) -> None:
    """Close the client and a cluster made here, bounded by :data:`CLOSE_TIMEOUT` each; what
    does not close in time is left to the interpreter's exit (worker processes are daemonic).
    After a failure (``failed``) that is logged at debug level only: the failure's one line
    is the news, and nannies caught restarting dead workers are slow to close."""
    for thing in (client, cluster):
        if thing is None:
            continue
        try:
            thing.close(timeout=CLOSE_TIMEOUT)
        except (TimeoutError, OSError, RuntimeError) as exc:
            log.log(
                logging.DEBUG if failed else logging.WARNING,
                "%s did not close within %.0f s (%s); its processes end with this one",
                type(thing).__name__,
                CLOSE_TIMEOUT,
                type(exc).__name__,
            )


@contextlib.contextmanager
def _quiet(*names: str, level: int = logging.ERROR):
    """Raise these loggers to ``level`` for the block (distributed sets some child levels itself)."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _probe_scheduler(address: str, timeout: float) -> None:
    """Ask ``address`` who it is, bounded by ``timeout``; a Client would wait forever on a
    service that accepts the connection but never speaks the Dask protocol."""
    import asyncio

    from distributed.core import rpc

    async def identity() -> Any:
        async with rpc(address, timeout=timeout) as remote:
            return await asyncio.wait_for(remote.identity(), timeout)

    _tcp_reachable(address, timeout)
    outcome: dict = {}

    def ask() -> None:  # own thread and loop: the caller may already run an event loop
        try:
            outcome["identity"] = asyncio.run(asyncio.wait_for(identity(), timeout + 1))
        except BaseException as exc:  # noqa: BLE001  (anything a non-Dask peer provokes)
            outcome["error"] = exc

    thread = threading.Thread(target=ask, name="fsdask-probe", daemon=True)
    thread.start()
    thread.join(timeout + 5)
    exc = outcome.get("error")
    ident = outcome.get("identity")
    if isinstance(ident, dict) and ident.get("type") == "Scheduler":
        return
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
        raise ClusterError(
            f"could not reach the Dask scheduler at {address} ({exc}); check that it is "
            "running and reachable from here"
        ) from None
    if exc is None and not outcome:
        exc = TimeoutError()
    what = (
        f"did not answer the Dask handshake within {timeout:.0f} s"
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError))
        else "answered, but not in the Dask protocol"
    )
    raise ClusterError(
        f"--scheduler {address}: {what}; is this the scheduler's address "
        "(usually port 8786) and not another service?"
    )


def _tcp_reachable(address: str, timeout: float) -> None:
    """A refused or unroutable address is "could not reach", told apart from a peer that
    accepts the connection but does not speak Dask (distributed's own connect retries a
    refused port until its timeout, which a busy machine can make look like silence)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "") or not parts.hostname or not parts.port:
        return  # tls://, ucx://, …: leave it to distributed
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(
            f"could not reach the Dask scheduler at {address} ({exc}); check that it "
            "is running and reachable from here"
        ) from None


def _interval(interval: float | None) -> float:
    if interval is not None:
        return float(interval)
    try:
        return float(os.environ.get("FSDASK_PROGRESS_INTERVAL", "10"))
    except ValueError:
        return 10.0


def _scheduler_counts(dask_scheduler=None) -> dict:
    """Task counts by state and the number of workers (runs on the distributed scheduler).

    Summed over the task prefixes (``sum``, ``getitem``…), whose ``states`` the scheduler
    keeps current on every transition: a handful of dicts, where a walk over the tasks
    would hold the scheduler's event loop for a pass over every task of the graph at each
    poll."""
    counts: dict = {}
    for prefix in dask_scheduler.task_prefixes.values():
        for state, k in prefix.states.items():
            if k:
                counts[state] = counts.get(state, 0) + k
    counts["workers"] = len(dask_scheduler.workers)
    return counts


def _cluster_line(c: dict, elapsed: float) -> str:
    """The progress line of a ``distributed`` run from the scheduler's task counts; with no
    task running or waiting, it says the cluster is idle rather than "0 tasks done" (the
    results already fetched are released): between passes the client works alone."""
    running = c.get("processing", 0)
    waiting = c.get("waiting", 0) + c.get("no-worker", 0) + c.get("queued", 0)
    workers = c.get("workers", 0)
    if running + waiting == 0:
        return (
            f"fsdask: no task on the {workers} worker(s) after {elapsed:.0f} s; the client is "
            "working between passes"
        )
    return (
        f"fsdask: {c.get('memory', 0)} tasks done, {running} running, {waiting} waiting on "
        f"{workers} worker(s) after {elapsed:.0f} s"
    )


class _LogProgress:
    """A dask callback printing the running computation's ``done/total tasks`` every
    ``interval`` seconds (no tty).

    A fit is a sequence of computations (one per pass; a refit one after another on the
    client is a pass or more each), so the counts are those of the running one, numbered:
    summed over the run, the total grows with each computation and the share stays near
    100 % for the rest of the fit.  (dask runs no callback for a computation started
    inside a task.)
    """

    def __init__(self, interval: float, stream: Any):
        from dask.callbacks import Callback

        outer = self

        class _CB(Callback):
            def _start_state(self, dsk, state):
                outer.runs, outer.done = outer.runs + 1, 0
                outer.total = sum(len(state[k]) for k in ("ready", "waiting", "finished"))

            def _posttask(self, key, result, dsk, state, worker_id):
                outer.done += 1
                outer.maybe_print()

        self.cb = _CB()
        self.interval, self.stream = interval, stream
        self.done = self.total = self.runs = 0
        self.t0 = self.last = time.perf_counter()

    def maybe_print(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self.last >= self.interval:
            self.last = now
            pct = 100.0 * self.done / max(self.total, 1)
            print(
                f"fsdask: {self.done}/{self.total} tasks ({pct:.0f}%) of computation "
                f"{self.runs} after {now - self.t0:.0f} s",
                file=self.stream,
                flush=True,
            )


@contextlib.contextmanager
def progress(
    client: Any = None, enabled: bool = True, *, interval: float | None = None, stream: Any = None
) -> Iterator[None]:
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
            print(_cluster_line(c, time.perf_counter() - t0), file=stream, flush=True)

    thread = threading.Thread(target=poll, name="fsdask-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


# --------------------------------------------------------------------------- worker memory
#: what :func:`scheduler` knows of the workers it runs on before asking them: where their
#: limit comes from, how to raise it, and (a jobqueue cluster file) the limit itself
_PLAN: contextvars.ContextVar[WorkerMemory | None] = contextvars.ContextVar(
    "fsdask_worker_plan", default=None
)


def _worker_plan(t: _Target) -> WorkerMemory:
    """The :class:`WorkerMemory` template of a :func:`scheduler` target (limit 0: ask them)."""
    if t.local:
        if t.memory_limit:
            source = f"each under --memory-limit {t.memory_limit},"
            remedy = "raise it (--memory-limit {limit} or more)"
        else:
            source = "each under the default memory limit (the machine's memory / workers),"
            remedy = "give each --memory-limit {limit} or more, or use fewer workers (local:N)"
        return WorkerMemory(
            0, source=f"the workers of --scheduler {t.spec}, {source}", remedy=remedy
        )
    if t.spec.endswith((".yaml", ".yml")):
        return yaml_worker_memory(t.spec) or WorkerMemory(0, source=f"the workers of {t.spec}")
    return WorkerMemory(
        0,
        source=f"the workers of {t.spec}",
        remedy="start the workers with `dask worker --memory-limit {limit}` or more",
    )


def yaml_worker_memory(path: str) -> WorkerMemory | None:
    """The memory of one worker process of the jobqueue cluster file ``path``, without
    starting any job: its ``memory`` (per job) shared by its ``processes``.

    Parameters
    ----------
    path : str
        A cluster file (see :func:`read_cluster_yaml`).

    Returns
    -------
    WorkerMemory or None
        None when the file gives no ``memory`` (dask-jobqueue's config then decides).
    """
    from dask.utils import parse_bytes

    _, _, kwargs = read_cluster_yaml(path)
    memory = kwargs.get("memory")
    if memory is None:
        return None
    try:
        total = parse_bytes(memory)
        cores_per_job = int(kwargs.get("cores") or 1)
        processes = kwargs.get("processes")
        processes = int(processes) if processes else _default_processes(cores_per_job)
    except (TypeError, ValueError):
        raise ParameterError(
            f"{path}: 'memory' must be a size such as 32GB and 'cores'/'processes' whole "
            f"numbers; got memory={memory!r}"
        ) from None
    processes = max(1, processes)
    return WorkerMemory(
        int(total // processes),
        threads=max(1, cores_per_job // processes),
        source=f"the workers of {path} (memory: {memory} over {processes} processes)",
        remedy=f"raise `memory:` in {path} to {{limit}} or more per worker process "
        "(× processes per job), or lower `processes:`",
    )


def _default_processes(cores_per_job: int) -> int:
    """dask-jobqueue's default worker processes per job: distributed's split of the cores."""
    from distributed.deploy.utils import nprocesses_nthreads

    return int(nprocesses_nthreads(cores_per_job)[0])


def client_worker_memory(client: Any, plan: WorkerMemory | None = None) -> WorkerMemory | None:
    """The memory of the workers connected to ``client``'s scheduler.

    Parameters
    ----------
    client : distributed.Client
    plan : WorkerMemory, optional
        Where the limit comes from and how to raise it (from :func:`scheduler`); its limit
        stands for workers not yet connected (a jobqueue cluster whose jobs are queued).

    Returns
    -------
    WorkerMemory or None
        The smallest worker's ``memory_limit`` and the largest ``nthreads``; None when no
        worker has a limit (or none is known).
    """
    info = client.scheduler_info(n_workers=-1)
    plan = plan or WorkerMemory(0, source=f"the workers of {info.get('address', 'the scheduler')}")
    workers = list(info.get("workers", {}).values())
    if not workers:
        return plan if plan.limit else None
    limits = [int(w.get("memory_limit") or 0) for w in workers]
    if not any(limits):
        return None
    threads = max(int(w.get("nthreads") or 1) for w in workers)
    return dataclasses.replace(plan, limit=min(x for x in limits if x), threads=threads)


def current_workers() -> WorkerMemory | None:
    """The memory of the workers dask computes on now, or None.

    None on the threaded and synchronous schedulers (``dask.base.get_scheduler()`` is not a
    ``distributed`` client's) and for workers without a memory limit.  Inside
    :func:`scheduler` the answer names the ``--scheduler`` and its remedy.

    Returns
    -------
    WorkerMemory or None.  Memory: none; one round trip to the scheduler.
    """
    import sys

    if "distributed" not in sys.modules:  # nothing can run on distributed: spare the import
        return None
    from distributed import Client

    client = getattr(dask.base.get_scheduler(), "__self__", None)
    if not isinstance(client, Client):
        return None
    try:
        return client_worker_memory(client, _PLAN.get())
    except (OSError, TimeoutError) as exc:  # the compute itself will say what is wrong
        log.debug("the workers' memory limit could not be read: %s", exc)
        return None
