"""``fsdask run --log-json FILE``: one JSON object per line, appended, flushed per event.

Every line has ``time`` (UTC, ISO 8601), ``event`` and ``run`` (an id shared by the lines of
one run).  Events:

==============  ===========================================================================
event           fields
==============  ===========================================================================
run_start       config, state, fsdask_version, pid, host, restart
step_skip       step, index, command, reasons (why it is done already)
step_start      step, index, command, reasons (why it runs)
iteration       step, method, iteration, objective, delta (from the per-iteration log of the
                iterative methods; fields a method does not log are absent)
warning         step, message, category
step_end        step, index, seconds
drift_alert     step, message (the step's top-k fell below its ``alert_on_drift``)
error           step (if any), message, exit_code
run_end         exit_code, seconds, ran, skipped
==============  ===========================================================================

Exit codes (also the process status of ``fsdask run``): 0 ok, 1 unexpected error (a bug),
2 bad input / parameters / storage, 3 a drift alert (every step ran and was recorded), 75 another run holds the lock (try later), 130 interrupted.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import re
import uuid
from typing import Any

from fsdask.errors import StoreError

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_ITER = re.compile(r"iteration\s+(\d+)")
_OBJ = re.compile(r"objective\s*[=:]?\s*" + _NUM)
_DELTA = re.compile(r"(?:‖Δ\w*‖|Δ\w*|change|delta)\s*[=:]?\s*" + _NUM)
_METHOD = re.compile(r"^([\w\-α]+)[\s:]")


def _num(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def parse_iteration(message: str) -> dict | None:
    """``{"iteration", "objective", "delta"}`` from a method's per-iteration log line, or None."""
    m = _ITER.search(message)
    if not m:
        return None
    out: dict[str, Any] = {"iteration": int(m.group(1))}
    method = _METHOD.match(message)
    if method:
        out["method"] = method.group(1)
    obj, delta = _OBJ.search(message), _DELTA.search(message)
    if obj:
        out["objective"] = _num(obj.group(1))
    if delta:
        out["delta"] = _num(delta.group(1))
    return out


class JsonLog:
    """Append JSON lines to ``path``; a no-op when ``path`` is None.

    A log that cannot be opened or written raises :class:`~fsdask.errors.StoreError`
    naming it.
    """

    def __init__(self, path: str | os.PathLike | None):
        self.path = None if path is None else os.path.abspath(os.fspath(path))
        self.run = uuid.uuid4().hex[:12]
        self.step: str | None = None
        self._fh = None
        if self.path:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")
            except OSError as exc:
                raise self._unwritable(exc) from None

    def _unwritable(self, exc: OSError) -> StoreError:
        return StoreError(
            f"--log-json {self.path}: cannot write the JSON log ({exc.strerror or exc}); "
            "give a file in a writable folder"
        )

    def event(self, event: str, **fields: Any) -> None:
        if self._fh is None:
            return
        line = {
            "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds"),
            "event": event,
            "run": self.run,
            **fields,
        }
        from fsdask.io.secrets import redact

        try:
            self._fh.write(redact(json.dumps(line, default=str, ensure_ascii=False)) + "\n")
            self._fh.flush()
        except OSError as exc:
            self._fh = None  # the log stops here; the error says so once
            raise self._unwritable(exc) from None

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class _IterationHandler(logging.Handler):
    """Turns fsdask's per-iteration INFO lines and its warnings into JSON events."""

    def __init__(self, jlog: JsonLog):
        super().__init__(logging.INFO)
        self.jlog = jlog

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed log call must not break the run
            return
        if record.levelno >= logging.WARNING:
            self.jlog.event("warning", step=self.jlog.step, message=message, category=record.name)
            return
        it = parse_iteration(message)
        if it is not None:
            self.jlog.event("iteration", step=self.jlog.step, **it)


class _BelowLevel(logging.Filter):
    """Keep stderr as it was: drop fsdask records below the level the user asked for."""

    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.split(".")[0] == "fsdask" and record.levelno < self.level)


class capture_iterations:
    """``with capture_iterations(jlog):`` — route fsdask's iteration log lines to ``jlog``.

    The ``fsdask`` logger is lowered to INFO for the duration (the methods only format their
    per-iteration lines when INFO is enabled); what stderr shows stays as before.
    """

    def __init__(self, jlog: JsonLog):
        self.jlog = jlog

    def __enter__(self):
        if self.jlog.path is None:
            return self
        self.logger = logging.getLogger("fsdask")
        self.old_level = self.logger.level
        effective = self.logger.getEffectiveLevel()
        self.handler = _IterationHandler(self.jlog)
        self.filter = _BelowLevel(effective)
        self.handlers = [h for h in logging.getLogger().handlers + self.logger.handlers]
        for h in self.handlers:
            h.addFilter(self.filter)
        self.logger.addHandler(self.handler)
        if effective > logging.INFO:
            self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc):
        if self.jlog.path is None:
            return
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.old_level)
        for h in self.handlers:
            h.removeFilter(self.filter)
