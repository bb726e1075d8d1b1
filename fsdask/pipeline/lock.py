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

The lock is written whole to a temporary file and then hard-linked into place, so it
appears complete or not at all: a write that fails (a full disk) leaves no lock behind and
ends in a :class:`StoreError` (exit status 2).  An *incomplete* lock — empty, NUL-filled or a
truncated fsdask lock, as an interrupted write by another program or an older fsdask leaves —
is stale once its holder's pid (when it can still be read) is gone, or once it is older than
:data:`INCOMPLETE_AFTER` seconds (a live run writes its lock at once); until then the run
stops with :class:`Locked`.  A lock this user may not read is stale once untouched for
``FSDASK_LOCK_STALE_SECONDS`` (a live holder's heartbeat touches it every
:data:`HEARTBEAT` seconds).

Otherwise the run stops with :class:`Locked` (exit status 75, ``EX_TEMPFAIL``: try again
later) before touching anything.  A file at the lock's path that is not an fsdask run lock is
never removed: that is a :class:`ParameterError` saying what to do.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import re
import socket
import threading
import time
import uuid

from fsdask.errors import Locked, ParameterError, StoreError
from fsdask.io.outputs import pid_alive

HEARTBEAT = 30.0
STALE_AFTER = 600.0
MAGIC = "fsdask run lock"
EXIT_LOCKED = Locked.exit_code
#: seconds after which an incomplete lock (empty, NUL-filled, truncated) is stale
INCOMPLETE_AFTER = 2 * HEARTBEAT
#: how every complete lock starts (``"what"`` is written first)
PREFIX = json.dumps({"what": MAGIC})[:-1].encode()


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
        except PermissionError as exc:
            return self._unreadable(exc)
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
            if incomplete(raw):
                return {**partial_holder(raw), "incomplete": len(raw), "age": age, "raw": raw}
            raise ParameterError(
                f"{self.path}: exists but is not an fsdask run lock; fsdask does not remove "
                "files it did not write — move it away, or set `state:` in the config "
                "to another file"
            ) from None
        info["age"] = age
        info["raw"] = raw
        return info

    def _unreadable(self, exc: OSError) -> dict | None:
        """A lock this user may not read: stale once its heartbeat is as old as a stale lock's."""
        try:
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return None
        except OSError:
            age = 0.0
        if os.path.isfile(self.path) and age > _stale_after():
            return {"unreadable": exc.strerror or str(exc), "age": age, "raw": None}
        raise ParameterError(
            f"{self.path}: cannot read the run lock ({exc.strerror or exc}); check its "
            f"permissions (it is taken over once untouched for FSDASK_LOCK_STALE_SECONDS="
            f"{_stale_after():.0f} s)"
        ) from None

    def _why_stale(self, info: dict) -> str | None:
        if "unreadable" in info:
            return (
                f"an unreadable lock ({info['unreadable']}) untouched for {info['age']:.0f} s "
                f"(> FSDASK_LOCK_STALE_SECONDS={_stale_after():.0f})"
            )
        if "incomplete" in info:
            return self._why_incomplete_stale(info)
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

    def _why_incomplete_stale(self, info: dict) -> str | None:
        what = f"an incomplete lock ({info['incomplete']} bytes)"
        pid, host = info.get("pid"), info.get("host")
        if pid is not None and host == socket.gethostname() and not pid_alive(pid):
            return f"{what} of pid {pid} on {host}, which is gone"
        if info["age"] > INCOMPLETE_AFTER:
            return (
                f"{what} last written {info['age']:.0f} s ago (a live run writes its lock at "
                f"once; > {INCOMPLETE_AFTER:.0f} s)"
            )
        return None

    # -- taking it ------------------------------------------------------------------------
    def _create(self) -> bool:
        """Publish a complete lock; False when a lock is there already."""
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
        except FileExistsError:
            raise StoreError(
                f"{self.path}: cannot write the pipeline state's run lock (a file is where its "
                "folder should be); set `state:` in the config to a writable path"
            ) from None
        except OSError as exc:
            raise self._unwritable(exc) from None
        tmp = f"{self.path}.new-{self.token}"
        try:
            _write_new(tmp, json.dumps(info).encode())
            try:
                os.link(tmp, self.path)  # atomic and exclusive: complete, or not there at all
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise
                return self._create_in_place(json.dumps(info).encode())
            return True
        except OSError as exc:
            raise self._unwritable(exc) from None
        finally:
            with contextlib.suppress(OSError):
                os.remove(tmp)

    def _create_in_place(self, data: bytes) -> bool:
        """Where hard links are not supported: exclusive create; removed if not written whole."""
        try:
            _write_new(self.path, data)
        except FileExistsError:
            return False
        return True

    def _unwritable(self, exc: OSError) -> StoreError:
        hint = (
            "free some space there"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
            else "make the folder writable"
        )
        return StoreError(
            f"{self.path}: cannot write the pipeline state's run lock ({exc.strerror or exc}); "
            f"{hint} or set `state:` in the config to a writable path"
        )

    def _remove_stale(self, info: dict) -> None:
        """Move the stale lock aside; only the taker whose rename got *that* lock removes it."""
        aside = f"{self.path}.stale-{self.token}"
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return
        try:
            with open(aside, "rb") as fh:
                got = fh.read(65536)
        except OSError:
            got = None
        if got != info.get("raw"):  # another taker's fresh lock: put it back
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
            if why is None and "incomplete" in info:
                raise Locked(
                    f"{self.path}: an incomplete run lock ({info['incomplete']} bytes, written "
                    f"{info['age']:.0f} s ago): another run may be starting; retry later (it is "
                    f"taken over once older than {INCOMPLETE_AFTER:.0f} s)"
                )
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


def _write_new(path: str, data: bytes) -> None:
    """Create ``path`` exclusively and write ``data`` to disk; on failure remove it again."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(path)
        raise


def incomplete(raw: bytes) -> bool:
    """Whether ``raw`` is what an interrupted lock write leaves: nothing, NULs, or a truncated
    fsdask lock.

    Parameters
    ----------
    raw : bytes
        The lock file's content.

    Returns
    -------
    bool
    """
    return not raw.strip(b"\0") or raw.startswith(PREFIX) or PREFIX.startswith(raw.rstrip(b"\0"))


def partial_holder(raw: bytes) -> dict:
    """``pid`` and ``host`` of a truncated lock, as far as they were written.

    Parameters
    ----------
    raw : bytes
        The lock file's content.

    Returns
    -------
    dict
        With ``pid`` (int) and ``host`` (str) when both were written whole.
    """
    text = raw.decode("utf-8", "replace")
    pid = re.search(r'"pid": (\d+),', text)
    host = re.search(r'"host": ("(?:[^"\\]|\\.)*"),', text)
    if not (pid and host):
        return {}
    return {"pid": int(pid.group(1)), "host": json.loads(host.group(1))}
