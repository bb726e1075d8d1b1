"""Count the bytes a process's Dask comms receive and send over TCP.

``install()`` wraps the two places ``distributed.comm.tcp`` moves message bytes: every frame
read goes through ``read_bytes_rw(stream, n)`` and every ``TCP.write`` returns the bytes it
wrote.  So ``TOTAL`` holds what this process exchanged with every peer (scheduler, client,
workers) — the 8-byte length prefixes aside — and the largest single frame received (a numpy array
travels as one frame, or shards of ``distributed.comm.shard`` size, 64 MiB by default).  Load it in a scheduler with ``--preload
commcount``; in a client process call ``install()`` first; ``$FSDASK_COMMCOUNT_OUT`` (a path)
gets the totals as JSON at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib

TOTAL = {"received": 0, "sent": 0, "largest_frame": 0}


def install() -> None:
    from distributed.comm import tcp

    if getattr(tcp, "_commcount_installed", False):
        return
    read_rw, write = tcp.read_bytes_rw, tcp.TCP.write

    async def counted_read(stream, n):
        TOTAL["received"] += n
        TOTAL["largest_frame"] = max(TOTAL["largest_frame"], n)
        return await read_rw(stream, n)

    async def counted_write(self, msg, serializers=None, on_error="message"):
        n = await write(self, msg, serializers=serializers, on_error=on_error)
        TOTAL["sent"] += n
        return n

    tcp.read_bytes_rw, tcp.TCP.write = counted_read, counted_write
    tcp._commcount_installed = True
    out = os.environ.get("FSDASK_COMMCOUNT_OUT")
    if out:
        atexit.register(lambda: pathlib.Path(out).write_text(json.dumps(TOTAL)))


def totals() -> dict:
    return dict(TOTAL)


def dask_setup(*_):  # dask scheduler --preload commcount
    install()
