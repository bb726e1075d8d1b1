"""Fingerprints of a step's inputs, cheap enough to take every night.

==========================  ===================================================================
input                       fingerprint
==========================  ===================================================================
fsdask dataset store        the content fingerprint fsdask recorded when it wrote the store
                            (attribute ``fingerprint`` of a complete store): no data is read
any other store/directory   a digest of its file listing — every key with its size and its
                            ETag (object storage) or mtime (local) — so a foreign Zarr store
                            is fingerprinted from chunk metadata without reading its chunks
plain file                  size, mtime and a BLAKE2b hash of the content; when size and mtime
                            equal the recorded ones the recorded hash is reused (no re-read)
==========================  ===================================================================

This ``stat`` rule (the default) trusts a plain file's size and mtime, and a foreign store's
per-file sizes and mtimes (locally) or ETags: a file changed in place whose size stays the
same and whose mtime is set back is taken as unchanged, and an fsdask store's recorded
fingerprint does not see a chunk edited behind fsdask's back.  A step with
``fingerprint: content`` (or the pipeline's top-level ``fingerprint: content``) digests the
content instead, every run (BLAKE2b, streamed in 1 MiB blocks: every byte of every input is
read, locally or downloaded, each time the pipeline runs — time and I/O of one full read):

==========================  ===================================================================
input (``content``)         fingerprint
==========================  ===================================================================
plain file                  size, mtime and a BLAKE2b hash of the content, re-read every run
store / directory           a BLAKE2b digest over every file's name, size and content
==========================  ===================================================================

An input in an Icechunk repository (``icechunk://…``, :mod:`fsdask.io.icechunk`) has the
snapshot id its branch, tag or snapshot names as its fingerprint, whatever the rule: a
snapshot is immutable, so its id stands for the content exactly, and finding it reads one
reference — no listing, no data.  Two such fingerprints are the same when repository, group
and snapshot are.

A missing input has the fingerprint ``None``; one that cannot be read (unreachable storage,
an invalid URL) ``{"kind": "unavailable"}``, which never matches: the step runs and its
command reports the problem.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Mapping

from fsdask.io.location import Location


def _hash_file(path: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsdask_fingerprint(meta: bytes) -> str | None:
    """The recorded content fingerprint of a complete fsdask store, from its zarr.json."""
    try:
        attrs = json.loads(meta).get("attributes", {})
    except (ValueError, AttributeError):
        return None
    if attrs.get("fsdask_complete") and isinstance(attrs.get("fingerprint"), str):
        return attrs["fingerprint"]
    return None


def _listing_digest(entries: list[tuple[str, Any, Any]]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name, size, stamp in sorted(entries, key=lambda e: e[0]):
        h.update(f"{name}\0{size}\0{stamp}\n".encode())
    return h.hexdigest()


def _local_fingerprint(path: str, previous: Mapping[str, Any] | None) -> dict | None:
    if os.path.isfile(path):
        st = os.stat(path)
        fp = {"kind": "file", "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if (
            previous
            and previous.get("kind") == "file"
            and previous.get("size") == st.st_size
            and previous.get("mtime_ns") == st.st_mtime_ns
            and previous.get("hash")
        ):
            fp["hash"] = previous["hash"]
        else:
            fp["hash"] = _hash_file(path)
        return fp
    if not os.path.isdir(path):
        return None
    meta = os.path.join(path, "zarr.json")
    if os.path.isfile(meta):
        with open(meta, "rb") as fh:
            recorded = _fsdask_fingerprint(fh.read())
        if recorded:
            return {"kind": "fsdask-store", "fingerprint": recorded}
    entries = []
    for root, _dirs, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            st = os.stat(full)
            entries.append((os.path.relpath(full, path), st.st_size, st.st_mtime_ns))
    return {"kind": "listing", "files": len(entries), "digest": _listing_digest(entries)}


def _remote_fingerprint(url: str, storage_options: Mapping[str, Any] | None) -> dict | None:
    fs, path = Location.of(url, storage_options).fs()
    try:
        if fs.isfile(path):
            info = fs.info(path)
            return {
                "kind": "object",
                "size": info.get("size"),
                "etag": info.get("ETag")
                or info.get("etag")
                or info.get("LastModified")
                and str(info["LastModified"]),
            }
        try:
            recorded = _fsdask_fingerprint(fs.cat_file(f"{path}/zarr.json"))
        except FileNotFoundError:
            recorded = None
        if recorded:
            return {"kind": "fsdask-store", "fingerprint": recorded}
        found = fs.find(path, detail=True)
    except FileNotFoundError:
        return None
    if not found:
        return None
    entries = [
        (
            name[len(path) :],
            info.get("size"),
            info.get("ETag")
            or info.get("etag")
            or str(info.get("LastModified") or info.get("mtime")),
        )
        for name, info in found.items()
    ]
    return {"kind": "listing", "files": len(entries), "digest": _listing_digest(entries)}


def _content_fingerprint(fs: Any, path: str) -> dict | None:
    """A digest of every byte of the file or the files under ``path`` (``fingerprint: content``)."""
    if fs.isfile(path):
        files = [path]
    else:
        files = sorted(fs.find(path))
        if not files:
            return None
    h = hashlib.blake2b(digest_size=16)
    size = 0
    for name in files:
        h.update(f"{name[len(path) :]}\0".encode())
        with fs.open(name, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
                size += len(block)
        h.update(b"\0")
    return {"kind": "content", "files": len(files), "size": size, "digest": h.hexdigest()}


def fingerprint(
    target: str,
    storage_options: Mapping[str, Any] | None = None,
    previous: Mapping[str, Any] | None = None,
    mode: str = "stat",
) -> dict | None:
    """Fingerprint of ``target`` (see the module docstring), or None when it does not exist.

    Parameters
    ----------
    target : str
        A local path or URL.
    storage_options : mapping, optional
        fsspec storage options.
    previous : mapping, optional
        The fingerprint recorded last time; with ``mode="stat"`` a plain file whose size and
        mtime match it is not re-hashed.
    mode : {"stat", "content"}
        ``"content"`` reads every byte (a plain local file keeps the ``file`` form, re-hashed).

    Returns
    -------
    dict or None
    """
    target = str(target)
    try:
        loc = Location.of(target, storage_options)
        if loc.versioned:  # Icechunk: the snapshot id, whatever the mode
            return loc.version_fingerprint()
        if mode == "content":
            if loc.is_local and os.path.isfile(loc.target):
                return _local_fingerprint(loc.target, None)  # re-hashed: the file form
            if loc.is_local and not os.path.exists(loc.target):
                return None
            fs, path = loc.fs()
            return _content_fingerprint(fs, path)
        if loc.is_local:
            return _local_fingerprint(loc.target, previous)
        return _remote_fingerprint(target, storage_options)
    except (
        Exception
    ) as exc:  # unreachable / invalid: the step runs and its command says what is wrong
        return {"kind": "unavailable", "error": type(exc).__name__}


def same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two fingerprints describe the same content (a file's mtime alone does not count)."""
    if a is None or b is None or "unavailable" in (a.get("kind"), b.get("kind")):
        return False
    if a.get("kind") == "icechunk" and b.get("kind") == "icechunk":
        return all(a.get(k) == b.get(k) for k in ("repository", "group", "snapshot"))
    if a.get("kind") == "file" and b.get("kind") == "file":
        return a.get("size") == b.get("size") and a.get("hash") == b.get("hash")
    return dict(a) == dict(b)
