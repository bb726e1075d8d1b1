"""One run per state file: ``STATE.lock``.

The lock file is created exclusively (``O_CREAT | O_EXCL``) and holds JSON naming its
holder: pid, host, the pid's start time, when the run started, the config, a random token.
While the run lasts a heartbeat thread touches it every :data:`HEARTBEAT` seconds, so its
mtime says when its holder was last alive — also when the holder ran on another host (a
SLURM node, a Kubernetes pod) and its pid cannot be checked from here.

A lock is *stale*, and taken over with a message, when

* its host is this host and its pid is gone (or the pid now belongs to a process started
  later: a recycled pid), or
* its host is another one and its heartbeat is older than ``FSDASK_LOCK_STALE_SECONDS``
  (default :data:`STALE_AFTER`).

Otherwise the run stops with :class:`Locked` (exit status 75, ``EX_TEMPFAIL``: try again
later) before touching anything.  A file at the lock's path that is not an fsdask run lock is
never removed: that is a :class:`ParameterError` saying what to do.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import threading
import time
import uuid

from fsdask.errors import FsdaskError, ParameterError, StoreError
from fsdask.io.outputs import pid_alive

HEARTBEAT = 30.0
STALE_AFTER = 600.0
MAGIC = "fsdask run lock"
EXIT_LOCKED = 75


class Locked(FsdaskError):
    """Another run holds the lock; ``exit_code`` is 75 (EX_TEMPFAIL)."""

    exit_code = EXIT_LOCKED


def _proc_start(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (Linux), to detect recycled pids."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _stale_after() -> float:
    try:
        return float(os.environ.get("FSDASK_LOCK_STALE_SECONDS", STALE_AFTER))
    except ValueError:
        raise ParameterError("FSDASK_LOCK_STALE_SECONDS must be a number of seconds") from None


class RunLock:
    """``with RunLock(state_path, config) as lock:`` — hold the lock for the run.

    ``lock.took_over`` is a message when a stale lock was taken over, else None.
    """

    def __init__(self, state_path: str, config: str = ""):
        self.path = os.path.abspath(state_path) + ".lock"
        self.config = config
        self.token = uuid.uuid4().hex
        self.took_over: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reading a lock someone else wrote ------------------------------------------------
    def _read(self) -> dict | None:
        """The holder described in the lock file; None when the file vanished meanwhile."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read(65536)
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ParameterError(
                f"{self.path}: cannot read the run lock ({exc.strerror or exc}); "
                "check its permissions"
            ) from None
        try:
            info = json.loads(raw)
            if not isinstance(info, dict) or info.get("what") != MAGIC:
                raise ValueError
            int(info["pid"]), str(info["host"])
        except (ValueError, KeyError, TypeError):
            raise ParameterError(
                f"{self.path}: exists but is not an fsdask run lock; fsdask does not remove "
                "files it did not write — move it away, or set `state:` in the config "
                "to another file"
            ) from None
        info["age"] = age
        return info

    def _why_stale(self, info: dict) -> str | None:
        pid, host = int(info["pid"]), str(info["host"])
        if host == socket.gethostname():
            if not pid_alive(pid):
                return f"pid {pid} on {host} is gone"
            start = _proc_start(pid)
            if info.get("pid_start") and start and start != str(info["pid_start"]):
                return f"pid {pid} on {host} is now another process"
            return None
        if info["age"] > _stale_after():
            return (
                f"it was held by pid {pid} on host {host}, whose last heartbeat was "
                f"{info['age']:.0f} s ago (> FSDASK_LOCK_STALE_SECONDS={_stale_after():.0f})"
            )
        return None

    # -- taking it ------------------------------------------------------------------------
    def _create(self) -> bool:
        info = {
            "what": MAGIC,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "pid_start": _proc_start(os.getpid()),
            "config": self.config,
            "token": self.token,
            "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        }
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            if os.path.isdir(os.path.dirname(self.path)):
                return False
            raise StoreError(
                f"{self.path}: cannot write the pipeline state's run lock (a file is where its "
                "folder should be); set `state:` in the config to a writable path"
            ) from None
        except OSError as exc:
            raise StoreError(
                f"{self.path}: cannot write the pipeline state's run lock ({exc.strerror or exc}); "
                "make the folder writable or set `state:` in the config to a writable path"
            ) from None
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
        return True

    def _remove_stale(self, info: dict) -> None:
        """Move the stale lock aside; only the taker whose rename got *that* lock removes it."""
        aside = f"{self.path}.stale-{self.token}"
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return
        try:
            with open(aside) as fh:
                got = json.load(fh)
        except (OSError, ValueError):
            got = {}
        if got.get("token") != info.get("token"):  # another taker's fresh lock: put it back
            os.replace(aside, self.path)
            return
        os.remove(aside)

    def acquire(self) -> RunLock:
        for _ in range(5):
            if self._create():
                self._start_heartbeat()
                return self
            info = self._read()
            if info is None:
                continue
            why = self._why_stale(info)
            if why is None:
                raise Locked(
                    f"another run of this pipeline holds {self.path}: pid {info['pid']} on "
                    f"{info['host']}, started {info.get('started', '?')} "
                    f"(config {info.get('config') or '?'}); wait for it to finish"
                )
            self._remove_stale(info)
            self.took_over = f"took over a stale lock {self.path}: {why}"
        raise Locked(
            f"{self.path}: could not take the run lock (other runs keep taking it); retry later"
        )

    def _start_heartbeat(self) -> None:
        def beat():
            while not self._stop.wait(HEARTBEAT):
                try:
                    os.utime(self.path)
                except OSError:
                    pass

        self._thread = threading.Thread(target=beat, name="fsdask-lock-heartbeat", daemon=True)
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        try:
            with open(self.path) as fh:
                mine = json.load(fh).get("token") == self.token
        except (OSError, ValueError, AttributeError):
            mine = False
        if mine:
            os.remove(self.path)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
