"""What a finished fsdask output holds, and nothing else: the positive test of "fsdask's own".

fsdask replaces an existing output only when it can tell the output is entirely its own
(:meth:`fsdask.io.location.Location.check_output`).  A header or an attribute that *looks*
like fsdask's is not enough: a user's table may share the header, and a user may have put
an object into a result store.  Two markers answer instead:

* a **Zarr store** carries ``fsdask_kind`` in its root attributes *and* holds only the keys
  the Zarr v3 format writes for its own nodes — each node's ``zarr.json`` and, under each
  array, chunk keys of that array's grid and key encoding (:func:`foreign_keys`).  Any
  other key is someone else's, and the store is not replaced;
* a **file** (a CSV table, a netCDF evaluation) has a sidecar ``.NAME.fsdask.json`` next to
  it, written when fsdask published the file, recording its kind, size and SHA-256
  (:func:`write_sidecar`).  The file is fsdask's only while the sidecar exists and the file
  still has that size and digest (:func:`sidecar_kind`): a file the user wrote, or edited,
  is left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Callable, Iterable

#: suffix of the sidecar that marks a file fsdask wrote (``.ranked.csv`` + this)
SIDECAR_SUFFIX = ".fsdask.json"


def sidecar_path(path: str) -> str:
    """The sidecar of the file ``path``: ``DIR/.NAME.fsdask.json``."""
    head, base = os.path.split(path)
    return os.path.join(head, f".{base}{SIDECAR_SUFFIX}")


def is_sidecar_name(name: str) -> bool:
    """Whether a file name is that of an fsdask sidecar."""
    return name.startswith(".") and name.endswith(SIDECAR_SUFFIX)


def digest(path: str) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex digest) of the file ``path`` (read in 1 MiB pieces)."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            h.update(piece)
            size += len(piece)
    return size, h.hexdigest()


def write_sidecar(path: str, kind: str, final: str) -> str:
    """Write the sidecar that marks the file at ``path`` (to be published at ``final``).

    Returns
    -------
    str
        The sidecar's path for ``final``; it is written under a temporary name next to it
        and renamed into place by the caller after the file itself.
    """
    size, sha = digest(path)
    tmp = path + SIDECAR_SUFFIX
    with open(tmp, "w") as fh:
        json.dump({"fsdask_kind": kind, "size": size, "sha256": sha}, fh)
    return tmp


def sidecar_kind(path: str) -> str | None:
    """The kind recorded by the sidecar of ``path`` if the file is still what fsdask wrote."""
    try:
        with open(sidecar_path(path)) as fh:
            meta = json.load(fh)
        if os.path.getsize(path) != meta.get("size"):
            return None
        if digest(path)[1] != meta.get("sha256"):
            return None
        kind = meta.get("fsdask_kind")
        return kind if isinstance(kind, str) else None
    except (OSError, ValueError, AttributeError):
        return None


def chunk_key_pattern(meta: dict) -> Callable[[str], bool] | None:
    """A test of the chunk keys (relative to the array) that a Zarr v3 array's grid writes."""
    try:
        enc = meta.get("chunk_key_encoding") or {"name": "default"}
        sep = (enc.get("configuration") or {}).get("separator")
    except AttributeError:
        return None
    try:
        shape = [int(s) for s in meta["shape"]]
        grid = meta["chunk_grid"]["configuration"]["chunk_shape"]
        counts: list[int] | None = [max(1, -(-s // int(c))) for s, c in zip(shape, grid)]
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        counts = None  # no grid recorded: keys of the encoding's form, of any number and index
    if enc.get("name") == "v2":
        sep, prefix = sep or ".", ""
    else:
        sep, prefix = sep or "/", "c"
    if counts == []:  # a 0-d array: one chunk
        only = prefix or "0"
        return lambda key: key == only
    number = re.compile(r"\d+")

    def ok(key: str) -> bool:
        if prefix:
            if not key.startswith(prefix + sep):
                return False
            key = key[len(prefix) + len(sep) :]
        parts = key.split(sep)
        if not all(number.fullmatch(p) for p in parts):
            return False
        return counts is None or (
            len(parts) == len(counts) and all(int(p) < n for p, n in zip(parts, counts))
        )

    return ok


def foreign_keys(keys: Iterable[str], read_meta: Callable[[str], dict]) -> list[str]:
    """The keys of a Zarr v3 store that its format did not write (sorted).

    Parameters
    ----------
    keys : iterable of str
        Every key (file) of the store, relative to its root, ``/``-separated.
    read_meta : callable
        ``read_meta(node)`` → the parsed ``zarr.json`` of the node at that relative path
        (``""`` for the root).

    Returns
    -------
    list of str
        Keys that are neither a node's ``zarr.json`` nor a chunk of an array's grid.
    """
    keys = sorted(set(keys))
    nodes = {
        k[: -len("zarr.json")].rstrip("/") for k in keys if k.rsplit("/", 1)[-1] == "zarr.json"
    }
    arrays: dict[str, Callable[[str], bool] | None] = {}
    for node in nodes:
        try:
            meta = read_meta(node)
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("node_type") == "array":
            arrays[node] = chunk_key_pattern(meta)
    out = []
    for key in keys:
        if key.rsplit("/", 1)[-1] == "zarr.json":
            continue
        owner = _owner(key, arrays)
        if owner is None or arrays[owner] is None:
            out.append(key)
            continue
        rest = key[len(owner) + 1 :] if owner else key
        if not arrays[owner](rest):
            out.append(key)
    return out


def _owner(key: str, arrays: dict[str, Any]) -> str | None:
    """The deepest array node whose folder holds ``key``."""
    parts = key.split("/")
    for i in range(len(parts) - 1, -1, -1):
        node = "/".join(parts[:i])
        if node in arrays:
            return node
    return None


def local_keys(path: str) -> list[str]:
    """Every file under the local folder ``path``, relative and ``/``-separated."""
    out = []
    for dirpath, _dirs, files in os.walk(path):
        rel = os.path.relpath(dirpath, path)
        for f in files:
            out.append(f if rel == "." else f"{rel}/{f}".replace(os.sep, "/"))
    return out
