"""Local scratch folders: temporary copies fsdask makes (a re-chunked store, a CSR matrix
filed by feature block), removed when the process exits.

A process killed with SIGKILL (the kernel's OOM killer, ``scancel``, a batch system's time
limit) never runs its exit handlers, so its copy — as big as the data — would stay behind,
and a nightly job killed every night would fill ``/tmp``.  Each folder is therefore named
after the host and the process that made it, and a new one first removes the folders of its
kind whose process is gone.  Only folders of this host (hence of this process namespace) and
of this user are touched: anything else, or anything whose process may still run, is kept.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile

from fsdask.errors import StoreError
from fsdask.io.location import host_tag, pid_alive

PREFIX = "fsdask-"


def stale(kind: str) -> list[str]:
    """Scratch folders of ``kind`` in the temporary directory left by processes of this host
    and user that no longer run."""
    pattern = re.compile(rf"{re.escape(PREFIX + kind)}-{re.escape(host_tag())}-(\d+)-\w+")
    found = []
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return []
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or not entry.is_dir(follow_symlinks=False):
            continue
        if entry.stat(follow_symlinks=False).st_uid != os.getuid() or pid_alive(int(m.group(1))):
            continue
        found.append(entry.path)
    return found


def scratch_dir(kind: str) -> str:
    """A new local folder ``fsdask-<kind>-<host>-<pid>-<random>`` removed at exit, after
    removing the folders of ``kind`` that killed fsdask processes of this host left."""
    for path in stale(kind):
        shutil.rmtree(path, ignore_errors=True)
    try:
        folder = tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-{host_tag()}-{os.getpid()}-")
    except OSError as exc:
        raise StoreError(
            f"{tempfile.gettempdir()}: cannot create a temporary folder for a {kind} copy "
            f"({type(exc).__name__}: {exc.strerror or exc}); free space there or point TMPDIR "
            "at a folder with room (or give --rechunk-to)"
        ) from None
    atexit.register(shutil.rmtree, folder, True)  # a folder fsdask made, removed at exit
    return folder
