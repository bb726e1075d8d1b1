"""One ``fsdask run``: lock, state, skip decisions, JSON log and history around the step loop.

:class:`Session` is what the pipeline's step loop talks to::

    with Session(config, restart=…, out=…, log_json=…) as night:
        night.preflight()
        for i, step in enumerate(night.pipe.steps, 1):
            if night.skip(i, step):
                continue
            night.start(i, step)
            with night.capture():
                …run the step…
            night.done(i, step)

State file (JSON, written atomically): ``format``, ``format_version``, ``fsdask_version``,
``config`` and per completed step its option digest, input fingerprints, fsdask version,
outputs, runtime and finish time.  A step is skipped only when all of these match and its
outputs exist; otherwise it and every later step run.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import signal
import socket
import sys
import threading
import time
import warnings
from typing import Any

from fsdask.errors import FsdaskError, ParameterError
from fsdask.io.location import Location
from fsdask.pipeline import fingerprint as fpr
from fsdask.pipeline import history
from fsdask.pipeline.lock import Locked, RunLock
from fsdask.pipeline.logjson import JsonLog, capture_iterations

STATE_FORMAT = "fsdask-pipeline-state"
STATE_VERSION = 2


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _version() -> str:
    import fsdask

    return fsdask.__version__


def _newer(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) > Version(b)
    except InvalidVersion:
        return False


def write_state(path: str, state: dict) -> None:
    """Atomically, secrets redacted (:func:`fsdask.pipeline._write_state`)."""
    from fsdask.pipeline import _write_state

    _write_state(path, state)


def _set_aside(path: str, why: str) -> str:
    aside = f"{path}.{why}-{_dt.datetime.now(_dt.UTC).strftime('%Y%m%dT%H%M%S')}"
    os.replace(path, aside)
    return aside


def read_state(path: str, config: str, *, restart: bool = False, out=None) -> dict:
    """The recorded state of the pipeline ``config``; a fresh one when there is none.

    A damaged state file, one of another pipeline or of a newer fsdask is refused with a
    :class:`ParameterError`; with ``restart`` it is renamed aside (never deleted) instead.
    """
    fresh = {"format": STATE_FORMAT, "format_version": STATE_VERSION, "steps": {}}
    if not os.path.exists(path):
        return fresh
    problem = None
    try:
        with open(path, encoding="utf-8") as fh:
            state = json.load(fh)
        if (
            not isinstance(state, dict)
            or not isinstance(state.get("steps"), dict)
            or not all(isinstance(v, dict) for v in state["steps"].values())
        ):
            raise ValueError("not a pipeline state")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        problem = (
            "corrupt",
            f"{path}: the pipeline state is damaged or truncated ({exc}); "
            "`fsdask run --restart` sets it aside and runs every step (outputs are kept)",
        )
        state = None
    if state is not None:
        theirs = str(state.get("fsdask_version") or "")
        if (
            state.get("format", STATE_FORMAT) != STATE_FORMAT
            or int(state.get("format_version", 1)) > STATE_VERSION
            or (theirs and _newer(theirs, _version()))
        ):
            problem = (
                "newer",
                f"{path}: written by fsdask {theirs or '?'} (state format "
                f"{state.get('format_version', '?')}), newer than this fsdask {_version()}; upgrade "
                "fsdask, or `fsdask run --restart` to set the state aside and run every step",
            )
        elif state.get("config") and os.path.realpath(str(state["config"])) != os.path.realpath(
            config
        ):
            problem = (
                "other",
                f"{path}: the state of another pipeline ({state['config']}); give this "
                "pipeline its own file with `state:` in its config, or `fsdask run --restart` "
                "to set that state aside",
            )
    if problem is None:
        return state if not restart else fresh
    if not restart:
        raise ParameterError(problem[1])
    aside = _set_aside(path, problem[0])
    print(f"--restart: set the state file aside as {aside}", file=out or sys.stdout, flush=True)
    return fresh


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

    # -- the run ---------------------------------------------------------------------------
    def open(self) -> Session:
        """Log the start, read the config, take the lock, read the state and history."""
        from fsdask.pipeline import load_config

        self._opened = True
        self._trap_sigterm()
        try:
            self.jlog.event(
                "run_start",
                config=os.path.abspath(os.fspath(self.config)),
                fsdask_version=_version(),
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
                "fsdask_version": _version(),
                "config": self.pipe.path,
            }
        )
        self.state.pop("completed", None)
        return self

    def __enter__(self) -> Session:
        return self if getattr(self, "_opened", False) else self.open()

    def __exit__(self, etype, exc, tb) -> None:
        code = 0 if exc is None else exit_code(exc)
        if exc is not None:
            self.jlog.event(
                "error",
                step=self.jlog.step,
                message=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                exit_code=code,
            )
        ran = sum(v == "ran" for v in self.summary.values())
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
        self.state["completed"] = _now()
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
            for target in fpr.step_inputs(step.command, step.options):
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

    # -- per step ------------------------------------------------------------------------
    def _reasons(self, step) -> list[str]:
        """Why ``step`` has to run (empty: it is really done)."""
        self._inputs = {}
        rec = self.state["steps"].get(step.name)
        prev_inputs = (rec or {}).get("inputs") or {}
        reasons = []
        for target in fpr.step_inputs(step.command, step.options):
            fp = fpr.fingerprint(target, self.so, prev_inputs.get(target))
            self._inputs[target] = fp
            if rec is None or self.rerun_rest:
                continue
            if fp is None:
                reasons.append(f"input {target} missing")
            elif fp.get("kind") == "unavailable":
                reasons.append(f"input {target} unreadable ({fp.get('error')})")
            elif target not in prev_inputs:
                reasons.append(f"input {target} not recorded")
            elif not fpr.same(prev_inputs[target], fp):
                reasons.append(f"input {target} changed")
        if self.rerun_rest:
            return [self.rerun_rest]
        if rec is None:
            return ["not run before"]
        if rec.get("digest") != step.digest():
            reasons.insert(0, "options changed")
        if rec.get("fsdask_version") != _version():
            reasons.append(
                f"fsdask version changed ({rec.get('fsdask_version') or 'unrecorded'} → {_version()})"
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
        seconds = round(time.perf_counter() - self._step_t0, 3)
        self.state["steps"][step.name] = {
            "digest": step.digest(),
            "command": step.command,
            "outputs": step.outputs(),
            "inputs": self._inputs,
            "fsdask_version": _version(),
            "seconds": seconds,
            "finished": _now(),
        }
        write_state(self.pipe.state_path, self.state)
        self._say(f"[{i}/{len(self.pipe.steps)}] {step.name}: ran in {seconds:.1f} s")
        self.jlog.event("step_end", step=step.name, index=i, seconds=seconds)
        self.jlog.step = None
        self.summary[step.name] = "ran"
        self._history(step, "ran", seconds)

    def _history(self, step, status: str, seconds: float) -> None:
        rec: dict[str, Any] = {
            "date": _now(),
            "run": self.jlog.run,
            "step": step.name,
            "command": step.command,
            "status": status,
            "seconds": seconds,
            "fsdask_version": _version(),
            "inputs": {k: v for k, v in self._inputs.items()},
        }
        if step.command == "select" and step.options.get("output"):
            rec.update(
                history.selection_summary(
                    str(step.options["output"]),
                    self.so,
                    int(self.pipe.defaults.get("history_top_k", history.TOP_K)),
                )
            )
        history.append(self.history_path, rec)


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
