"""One ``fsdask run``: lock, state, skip decisions, JSON log and history around the step loop.

:func:`run_pipeline` checks every step — its options, its method and parameters, where it
writes (:mod:`fsdask.pipeline.validate`), its inputs, the state and history files — before
any step runs, then runs the steps in order through a :class:`Session`, which is what the
step loop talks to::

    with Session(config, restart=…, out=…, log_json=…) as night:
        …check every step (fsdask.pipeline.validate)…
        night.preflight()
        night.check_bookkeeping()
        for i, step in enumerate(night.pipe.steps, 1):
            if night.skip(i, step):
                continue
            night.start(i, step)
            with night.capture():
                …run the step…
            night.done(i, step)

A step is skipped only when its recorded option digest, input fingerprints and fsdask
version (:mod:`fsdask.pipeline.state`) match and its outputs exist; otherwise it and every
later step run.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import socket
import sys
import threading
import time
import warnings
from typing import Any

import fsdask.api.runs as history
import fsdask.pipeline.fingerprint as fpr
from fsdask.errors import (
    DriftAlert,
    FsdaskError,
    Locked,
    ParameterError,
    StepFailed,
    StoreError,
)
from fsdask.io.location import Location
from fsdask.pipeline.config import Step, load_config, step_kwargs
from fsdask.pipeline.lineage import lineage_path
from fsdask.pipeline.lock import RunLock
from fsdask.pipeline.logjson import JsonLog, capture_iterations
from fsdask.pipeline.state import (
    STATE_FORMAT,
    STATE_VERSION,
    check_appendable,
    now,
    read_state,
    version,
    write_state,
)
from fsdask.pipeline.validate import check_locations, check_method


class Session:
    """Lock, state, skip decisions, JSON log and history of one run (see the module docstring)."""

    def __init__(
        self,
        config: str | os.PathLike,
        *,
        restart: bool = False,
        out=None,
        log_json: str | os.PathLike | None = None,
        defaults: dict | None = None,
        as_of: str | None = None,
    ):
        self.config = config
        self.restart = restart
        self.out = out or sys.stdout
        self.jlog = JsonLog(log_json)
        self.overrides = {k: v for k, v in (defaults or {}).items() if v is not None}
        self.summary: dict[str, str] = {}
        self.rerun_rest: str | None = "--restart" if restart else None
        self.lock: RunLock | None = None
        self._t0 = time.perf_counter()
        self._step_t0 = 0.0
        self._inputs: dict[str, dict] = {}
        self._old_sigterm = None
        self.alerts: list[str] = []
        self.as_of = as_of
        self.pins: dict[str, str] = {}  # --as-of: input URL → the URL read
        self.committed: list = []  # (branch's reference, placeholder, snapshot) of the commit
        self.lineage = None
        self._held: list[dict] = []  # history records naming this run's uncommitted outputs

    # -- the run ---------------------------------------------------------------------------
    def open(self) -> Session:
        """Log the start, read the config, take the lock, read the state and history."""
        self._opened = True
        self._trap_sigterm()
        try:
            self.jlog.event(
                "run_start",
                config=os.path.abspath(os.fspath(self.config)),
                fsdask_version=version(),
                pid=os.getpid(),
                host=socket.gethostname(),
                restart=self.restart,
            )
            self.pipe = load_config(self.config)
            self.pipe.defaults.update(self.overrides)
            self.so = self.pipe.defaults.get("storage_options") or None
            self.lock = RunLock(self.pipe.state_path, self.pipe.path).acquire()
            if self.lock.took_over:
                self._say(self.lock.took_over)
                self.jlog.event("warning", message=self.lock.took_over, category="lock")
            self.state = read_state(
                self.pipe.state_path, self.pipe.path, restart=self.restart, out=self.out
            )
            self.history_path = history.history_path(self.pipe.state_path)
            try:
                history.read_history(self.history_path)
            except ParameterError:
                if not self.restart:
                    raise
                self._say(
                    f"--restart: set the damaged history aside as {history.set_aside(self.history_path)}"
                )
        except BaseException as exc:
            self.__exit__(type(exc), exc, None)
            raise
        self.state.update(
            {
                "format": STATE_FORMAT,
                "format_version": STATE_VERSION,
                "fsdask_version": version(),
                "config": self.pipe.path,
            }
        )
        self.state.pop("completed", None)
        return self

    def __enter__(self) -> Session:
        return self if getattr(self, "_opened", False) else self.open()

    def __exit__(self, etype, exc, tb) -> None:
        code = 0 if exc is None else exit_code(exc)
        ran = sum(v == "ran" for v in self.summary.values())
        # a log that fails now must not hide the run's own error nor keep the lock
        with contextlib.suppress(FsdaskError, OSError):
            self._lineage_end(exc)
        with contextlib.suppress(FsdaskError):
            if exc is not None:
                self.jlog.event(
                    "error",
                    step=self.jlog.step,
                    message=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    exit_code=code,
                )
            self.jlog.event(
                "run_end",
                exit_code=code,
                seconds=round(time.perf_counter() - self._t0, 3),
                ran=ran,
                skipped=len(self.summary) - ran,
            )
        self.jlog.close()
        if self.lock is not None and not isinstance(exc, Locked):
            self.lock.release()
            self.lock = None
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None

    def _trap_sigterm(self) -> None:
        """SIGTERM (systemd stop, a SLURM time limit, a Kubernetes deadline) ends the run like
        Ctrl-C: outputs in progress are discarded, the error and exit code are logged, the lock
        is released."""
        if threading.current_thread() is not threading.main_thread():
            return

        def interrupt(signum, frame):
            raise KeyboardInterrupt(f"terminated by signal {signum}")

        self._old_sigterm = signal.signal(signal.SIGTERM, interrupt)

    def complete(self) -> None:
        """Record that the run finished."""
        self.state["completed"] = now()
        write_state(self.pipe.state_path, self.state)

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # -- before any step: inputs whose producing step was removed -------------------------------
    def preflight(self) -> None:
        """Refuse, before anything runs, a step whose local input is missing and that no
        earlier step writes (typically because the step that made it was removed)."""
        produced: set[str] = set()
        recorded = {
            os.path.normpath(o): name
            for name, rec in self.state["steps"].items()
            for o in rec.get("outputs") or []
            if name not in {s.name for s in self.pipe.steps}
        }
        for i, step in enumerate(self.pipe.steps, 1):
            for target in step.inputs():
                norm = os.path.normpath(target)
                if "://" in target or norm in produced or os.path.exists(target):
                    continue
                if norm in recorded:
                    raise ParameterError(
                        f"step {i} ({step.name}): input {target} is missing; it was written "
                        f"by step {recorded[norm]!r}, which is no longer in {self.pipe.path} — "
                        "put that step back or point this step at an existing input"
                    )
                raise ParameterError(
                    f"step {i} ({step.name}): input {target} does not exist and no earlier step "
                    "writes it; fix the path, or add the step that makes it before this one"
                )
            produced.update(os.path.normpath(o) for o in step.outputs())

    def bookkeeping(self) -> list[tuple[str, str]]:
        """``(what, path)`` of the files the run keeps (no step may write there)."""
        return [
            ("state file", self.pipe.state_path),
            ("run history", self.history_path),
            ("run lock", self.lock.path if self.lock else ""),
            ("JSON log", self.jlog.path or ""),
            ("lineage file", lineage_path(self.pipe.state_path)),
        ]

    def check_bookkeeping(self) -> None:
        """Refuse, before the first step, a state or history file that cannot be written (the
        lock is held and the JSON log open by now: both were written already)."""
        check_appendable(
            self.history_path,
            "run history",
            "make it writable, or set `state:` in the config to a writable place "
            "(the history lives next to the state)",
        )
        write_state(self.pipe.state_path, self.state)

    # -- per step ------------------------------------------------------------------------
    def _reasons(self, step) -> list[str]:
        """Why ``step`` has to run (empty: it is really done)."""
        self._inputs = {}
        rec = self.state["steps"].get(step.name)
        prev_inputs = (rec or {}).get("inputs") or {}
        reasons = []
        for target in step.inputs():
            read = self.pins.get(target, target)  # --as-of: the snapshot or tag named
            fp = fpr.fingerprint(read, self.so, prev_inputs.get(target), step.fingerprint)
            self._inputs[target] = fp
            if rec is None or self.rerun_rest:
                continue
            if fp is None:
                reasons.append(f"input {target} missing")
            elif fp.get("kind") == "unavailable":
                reasons.append(f"input {target} unreadable ({fp.get('error')})")
            elif target not in prev_inputs:
                reasons.append(f"input {target} not recorded")
            elif "content" in {(prev_inputs[target] or {}).get("kind"), fp.get("kind")} and (
                (prev_inputs[target] or {}).get("kind") != fp.get("kind")
            ):
                reasons.append(f"input {target}: fingerprint rule changed to {step.fingerprint}")
            elif not fpr.same(prev_inputs[target], fp):
                reasons.append(f"input {target} changed")
        if self.rerun_rest:
            return [self.rerun_rest]
        if rec is None:
            return ["not run before"]
        if rec.get("digest") != step.digest():
            reasons.insert(0, "options changed")
        if rec.get("fsdask_version") != version():
            reasons.append(
                f"fsdask version changed ({rec.get('fsdask_version') or 'unrecorded'} → {version()})"
            )
        for o in step.outputs():
            if not Location.of(o, self.so).found():
                reasons.append(f"output {o} missing")
        return reasons

    def skip(self, i: int, step) -> bool:
        """Decide whether ``step`` is really done; if so print and record the skip."""
        reasons = self._reasons(step)
        if reasons:
            self._why = reasons
            return False
        rec = self.state["steps"][step.name]
        self._say(
            f"[{i}/{len(self.pipe.steps)}] {step.name}: skipped — done in an earlier run "
            f"({rec.get('finished', '?')}); options, inputs and fsdask version unchanged, outputs exist"
        )
        self.jlog.event(
            "step_skip",
            step=step.name,
            index=i,
            command=step.command,
            reasons=["options, inputs and fsdask version unchanged, outputs exist"],
        )
        self.summary[step.name] = "skipped"
        self._history(step, "skipped", 0.0)
        return True

    def start(self, i: int, step, shown: str = "") -> None:
        """Announce and log that step ``i`` runs (and why); forget its earlier record."""
        self.rerun_rest = self.rerun_rest or f"earlier step {step.name!r} ran"
        self.state["steps"].pop(step.name, None)
        write_state(self.pipe.state_path, self.state)
        self._say(
            f"[{i}/{len(self.pipe.steps)}] {step.name}: runs ({'; '.join(self._why)})"
            + (f": {shown}" if shown else "")
        )
        self.jlog.step = step.name
        self.jlog.event(
            "step_start", step=step.name, index=i, command=step.command, reasons=self._why
        )
        self._step_t0 = time.perf_counter()

    @contextlib.contextmanager
    def capture(self):
        """Iteration log lines and warnings of the running step go to the JSON log too."""
        caught: list = []
        try:
            with capture_iterations(self.jlog), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                yield
        finally:  # re-shown once the recording is over (showing inside it would record again)
            for w in caught:
                self.jlog.event(
                    "warning",
                    step=self.jlog.step,
                    message=str(w.message),
                    category=w.category.__name__,
                )
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)

    def done(self, i: int, step) -> None:
        """Record step ``i`` as done: state, log, history."""
        seconds = round(time.perf_counter() - self._step_t0, 3)
        self.state["steps"][step.name] = {
            "digest": step.digest(),
            "command": step.command,
            "outputs": step.outputs(),
            "inputs": self._inputs,
            "fsdask_version": version(),
            "seconds": seconds,
            "finished": now(),
        }
        write_state(self.pipe.state_path, self.state)
        self._say(f"[{i}/{len(self.pipe.steps)}] {step.name}: ran in {seconds:.1f} s")
        self.jlog.event("step_end", step=step.name, index=i, seconds=seconds)
        self.jlog.step = None
        self.summary[step.name] = "ran"
        self._history(step, "ran", seconds)

    # -- versioned data (Icechunk): --as-of, one commit per run, lineage ---------------------
    def pin_inputs(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``--as-of``: every Icechunk input that no step writes, read from a branch, is read
        at that snapshot or tag instead.

        Raises
        ------
        ParameterError
            No step reads an Icechunk repository.
        StoreError
            A repository has no such snapshot or tag.
        """
        if not self.as_of:
            return calls
        produced = {o for step in self.pipe.steps for o in step.outputs()}
        for step, kwargs in zip(self.pipe.steps, calls):
            so = kwargs.get("storage_options") or self.so
            for name in step.spec.inputs:
                value = kwargs.get(name)
                if isinstance(value, (list, tuple)):
                    kwargs[name] = [self._pin(v, produced, so) for v in value]
                elif value is not None:
                    kwargs[name] = self._pin(value, produced, so)
        if not self.pins:
            raise ParameterError(
                f"--as-of {self.as_of}: no step of {self.pipe.path} reads an Icechunk "
                "repository (icechunk://…) that the pipeline does not write itself; --as-of "
                "pins those inputs"
            )
        return calls

    def _pin(self, value: Any, produced: set[str], so: Any) -> Any:
        from fsdask.io import icechunk as ic

        if not ic.is_icechunk_url(value) or str(value) in produced:
            return value
        ref = ic.IcechunkRef.parse(str(value))
        if ref.on_branch is None:  # the config names a tag or snapshot: fixed already
            return value
        ref = ic.as_of(ref, so, str(self.as_of))
        self.pins[str(value)] = ref.url
        return ref.url

    @contextlib.contextmanager
    def transaction(self):
        """Every Icechunk output of the run in one commit per branch after the last step, or
        none: a failed run forgets the steps whose outputs were not committed."""
        from fsdask.io import icechunk as ic

        with ic.batch(f"fsdask run {os.path.basename(self.pipe.path)}") as run:
            try:
                yield
                self.committed = run.commit()
            except BaseException:
                self._forget_uncommitted()
                with contextlib.suppress(FsdaskError):
                    self._release_history()  # what ran is recorded, placeholders and all
                raise
        settled = {placeholder: snapshot for _, placeholder, snapshot in self.committed}
        records = [*self.state["steps"].values(), *self._held]
        for rec in records:  # inputs read before the commit: its snapshot
            for fp in (rec.get("inputs") or {}).values():
                if fp and fp.get("snapshot") in settled:
                    fp["snapshot"] = settled[fp["snapshot"]]
        self._release_history()

    def _append_history(self, rec: dict) -> None:
        """Append ``rec`` to the history; held until the commit while it names an input this
        run wrote to Icechunk (so that the history shows the snapshot, not a placeholder)."""
        from fsdask.io.icechunk import PENDING

        pending = any(
            str((fp or {}).get("snapshot") or "").startswith(PENDING)
            for fp in (rec.get("inputs") or {}).values()
        )
        if pending or self._held:
            self._held.append(rec)
            return
        history.append(self.history_path, rec)

    def _release_history(self) -> None:
        held, self._held = self._held, []
        try:
            for rec in held:
                history.append(self.history_path, rec)
        except OSError as exc:
            raise StoreError(
                f"{self.history_path}: cannot append to the run history ({exc.strerror or exc}); "
                "the outputs and state are recorded — free space or fix the file"
            ) from None

    def _forget_uncommitted(self) -> None:
        from fsdask.io.icechunk import is_icechunk_url

        ran = [n for n, v in self.summary.items() if v == "ran"]
        for name in ran:
            rec = self.state["steps"].get(name) or {}
            if any(is_icechunk_url(o) for o in rec.get("outputs") or []):
                self.state["steps"].pop(name, None)  # its output was never committed
        with contextlib.suppress(FsdaskError):
            write_state(self.pipe.state_path, self.state)

    def lineage_start(self) -> None:
        """Append the run's START lineage event (:mod:`fsdask.pipeline.lineage`)."""
        from fsdask.pipeline.lineage import Lineage

        path = lineage_path(self.pipe.state_path)
        check_appendable(
            path,
            "lineage events",
            "make it writable, or set `state:` in the config to a writable place (the lineage "
            "file lives next to the state)",
        )
        self.lineage = Lineage(path, self.pipe.path, self.jlog.run)
        self._lineage_event("START")

    def _lineage_end(self, exc: BaseException | None) -> None:
        if self.lineage is None:
            return
        message = None if exc is None else (str(exc).splitlines() or [type(exc).__name__])[0]
        with _cwd(os.path.dirname(self.pipe.path)):  # relative paths: as the steps saw them
            self._lineage_event("COMPLETE" if exc is None else "FAIL", message)

    def _lineage_event(self, kind: str, error: str | None = None) -> None:
        from fsdask.io.icechunk import IcechunkRef, is_icechunk_url
        from fsdask.pipeline.lineage import dataset, version_of

        written = {(ref.repository, ref.on_branch): snap for ref, _, snap in self.committed}
        inputs: dict[str, Any] = {}
        outputs: dict[str, Any] = {}
        steps = {}
        for step in self.pipe.steps:
            rec = self.state["steps"].get(step.name) or {}
            for t in step.inputs():
                inputs.setdefault(self.pins.get(t, t), version_of((rec.get("inputs") or {}).get(t)))
            for o in step.outputs():
                ref = IcechunkRef.parse(o) if is_icechunk_url(o) else None
                outputs[o] = written.get((ref.repository, ref.on_branch)) if ref else None
            steps[step.name] = {"command": step.command, "options": step.options}
        self.lineage.event(
            kind,
            inputs=[dataset(u, v) for u, v in inputs.items()],
            outputs=[dataset(u, v) for u, v in outputs.items()],
            facets={"steps": steps, "as_of": self.as_of, "state": self.pipe.state_path},
            error=error,
        )

    def _history(self, step, status: str, seconds: float) -> None:
        rec: dict[str, Any] = {
            "date": now(),
            "run": self.jlog.run,
            "step": step.name,
            "command": step.command,
            "status": status,
            "seconds": seconds,
            "fsdask_version": version(),
            "inputs": {k: v for k, v in self._inputs.items()},
        }
        result = step.named().get(step.spec.result) if step.spec.result else None
        if result:  # a selecting step: its selection goes into the history
            rec.update(
                history.selection_summary(
                    str(result),
                    self.so,
                    int(self.pipe.defaults.get("history_top_k", history.TOP_K)),
                )
            )
        try:
            self._append_history(rec)
        except OSError as exc:  # e.g. the disk filled up during the step
            raise StoreError(
                f"{self.history_path}: cannot append to the run history ({exc.strerror or exc}); "
                "the step's output and state are recorded — free space or fix the file, then "
                "run again"
            ) from None


def check_drift(night: Session, step) -> None:
    """After ``step`` ran: note a drift alert when its top-k Jaccard against the previous
    run fell below the step's ``alert_on_drift`` (raised by :func:`raise_alerts`)."""
    if step.alert_on_drift is None:
        return
    rows = history.with_stability(history.read_history(night.history_path))
    line = history.drift_alert(step.name, rows, step.alert_on_drift)
    if line:
        night.alerts.append(line)
        night.jlog.event("drift_alert", step=step.name, message=line)


def raise_alerts(night: Session) -> None:
    """End a run whose steps all ran and were recorded with its drift alerts (exit 3)."""
    if night.alerts:
        raise DriftAlert(" | ".join(night.alerts))


def exit_code(exc: BaseException) -> int:
    """The documented exit status for an exception ending a run (see :mod:`.logjson`)."""
    if isinstance(exc, Locked):
        return 75
    if isinstance(exc, KeyboardInterrupt):
        return 130
    code = getattr(exc, "exit_code", None)
    if isinstance(code, int):
        return code
    return 2 if isinstance(exc, FsdaskError) else 1


@contextlib.contextmanager
def _cwd(path: str):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _describe(step: Step, kwargs: dict[str, Any]) -> str:
    """The step as a redacted one-liner for the log."""
    from fsdask.io.secrets import redact, redact_options

    shown = {
        k: (redact_options(v) if k == "storage_options" else v)
        for k, v in kwargs.items()
        if not (k == "storage_options" and not v) and k != "read"
    }
    shown.update(kwargs["read"].as_dict() if kwargs.get("read") else {})  # as the file gave them
    return redact(f"fsdask {step.command} " + " ".join(f"{k}={v}" for k, v in shown.items()))


def run_pipeline(
    config: str | os.PathLike,
    *,
    restart: bool = False,
    out=None,
    log_json: str | os.PathLike | None = None,
    defaults: dict | None = None,
    as_of: str | None = None,
) -> dict[str, str]:
    """Run (or resume) the pipeline in ``config``.

    Parameters
    ----------
    config : str or path-like
        The pipeline file (:mod:`fsdask.pipeline`).
    restart : bool
        Ignore the recorded state (and every select step's fit checkpoint): run every step.
    out : file, optional
        Where steps print (default: ``sys.stdout``).
    log_json : str or path-like, optional
        Append JSON-lines events to this file.
    defaults : dict, optional
        Override the config's ``scheduler`` / ``memory_limit`` (e.g. sized from a batch
        allocation).
    as_of : str, optional
        Read every Icechunk input that no step writes at this snapshot id or tag of its
        repository (repeat a past night); the outputs are written as on any night.

    Returns
    -------
    dict
        ``{step name: "ran" | "skipped"}``.

    Raises
    ------
    StepFailed
        One line naming the step that failed; ``exit_code`` 75 when another run holds the lock.
    """
    out = out or sys.stdout
    night = Session(
        config, restart=restart, out=out, log_json=log_json, defaults=defaults, as_of=as_of
    )
    try:
        night.open()
    except Locked as exc:
        raise StepFailed(str(exc), exit_code=exc.exit_code) from None
    with night, _cwd(os.path.dirname(night.pipe.path)):
        calls = _calls(night.pipe, restart)
        for i, (step, kwargs) in enumerate(zip(night.pipe.steps, calls), 1):
            night.jlog.step = step.name  # an error event names the step it is about
            check_method(i, step, kwargs)
        night.jlog.step = None
        check_locations(night.pipe.steps, night.so, night.bookkeeping())
        night.preflight()
        night.check_bookkeeping()
        calls = night.pin_inputs(calls)
        night.lineage_start()
        with night.transaction():  # Icechunk outputs: one commit per branch, or none
            for i, (step, kwargs) in enumerate(zip(night.pipe.steps, calls), 1):
                if night.skip(i, step):
                    continue
                night.start(i, step, shown=_describe(step, kwargs))
                _run_step(night, i, step, kwargs, out)
                night.done(i, step)
                check_drift(night, step)
        night.complete()
        raise_alerts(night)
    return night.summary


def _calls(pipe, restart: bool) -> list[dict[str, Any]]:
    """Every step's keyword arguments, checked before any step runs; secrets registered."""
    from fsdask.io.secrets import register

    register(pipe.defaults.get("storage_options"))
    for step in pipe.steps:
        register(
            step.options.get("storage_options") or step.options.get("storage_option"),
            *(str(v) for v in step.options.values() if isinstance(v, str)),
        )
    calls = []
    for step in pipe.steps:
        func = step.spec.function
        kwargs = step_kwargs(step, func, pipe.defaults)
        if restart and "resume" in inspect.signature(func).parameters and "resume" not in kwargs:
            kwargs["resume"] = False  # --restart: a step's fit checkpoint is ignored too
        calls.append(kwargs)
    return calls


def _run_step(night: Session, i: int, step: Step, kwargs: dict[str, Any], out) -> None:
    """Call the step's function; a failure becomes a :class:`StepFailed` naming the step."""
    from fsdask.io.secrets import redact

    try:
        with night.capture():
            step.spec.function(**kwargs, stdout=out)
    except FsdaskError as exc:
        raise StepFailed(redact(f"step {i} ({step.name}) failed: {exc}")) from None
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        msg = str(exc).splitlines()[0] if str(exc) else ""
        raise StepFailed(
            redact(f"step {i} ({step.name}) failed unexpectedly: {type(exc).__name__}: {msg}"),
            exit_code=1,
        ) from exc
