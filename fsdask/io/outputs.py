"""Where fsdask writes: outputs that never destroy what fsdask did not make.

The rule, for every output (dataset, result, evaluation, report, CSV table):

* a path where something exists is refused unless ``overwrite`` is given, and even then
  only an fsdask output *of the same kind* is replaced — never the command's own input, a
  folder with other content, or a file fsdask did not write;
* the location is checked (exists? writable? an input?) by :func:`check_output` *before*
  any computation starts;
* replacement is publish-then-swap (:func:`publish`): the new output is written complete
  under a temporary name next to the target and only then takes the target's place, so the
  old output stays whole until the new one is complete.  Locally that is two renames; object
  storage has no rename, so the complete temporary store is copied over the target with its
  root ``zarr.json`` (which holds the completion marker) copied last — that write is the
  switch.  A run killed midway leaves only temporaries named by fsdask
  (``.NAME.fsdask-tmp-HOST-PID-HEX``), which the next run on the same target removes (a
  temporary of another host of a shared file system only once it is a day old).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from typing import Any, Iterator, Mapping, Sequence

from fsdask.errors import StoreError

COMPLETE_ATTR = "fsdask_complete"
KIND_ATTR = "fsdask_kind"
#: a report folder is recognised by this file (written last)
REPORT_MARKER = "fsdask-report.json"
TMP_TAG = ".fsdask-tmp-"
OLD_TAG = ".fsdask-old-"


def _is_local(url: str) -> bool:
    return "://" not in str(url) or str(url).startswith("file://")


def _local(url: str) -> str:
    return os.path.abspath(str(url).removeprefix("file://"))


def _shown(url: str) -> str:
    from fsdask.io.secrets import redact

    return redact(url)


def _fs(url: str, storage_options: Mapping[str, Any] | None):
    import fsspec

    return fsspec.core.url_to_fs(url, **dict(storage_options or {}))


def same_location(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are the same place, or one contains the other."""
    if _is_local(a) != _is_local(b):
        return False
    if _is_local(a):
        pa, pb = os.path.realpath(_local(a)), os.path.realpath(_local(b))
        return (
            pa == pb
            or pa.startswith(pb.rstrip(os.sep) + os.sep)
            or pb.startswith(pa.rstrip(os.sep) + os.sep)
        )
    from fsdask.io.secrets import redact

    pa, pb = redact(a).rstrip("/"), redact(b).rstrip("/")
    return pa == pb or pa.startswith(pb + "/") or pb.startswith(pa + "/")


def _legacy_kind(attrs: Mapping[str, Any], names: set[str]) -> str | None:
    """The kind of a store written before :data:`KIND_ATTR` existed."""
    if not attrs.get(COMPLETE_ATTR) and "fsdask_format" not in attrs:
        return None
    if "X" in names or "fsdask_format" in attrs:
        return "dataset"
    if "weight" in names and "method" in attrs:
        return "result"
    return None


def what_is_there(
    url: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[str, str | None]:
    """(description, fsdask kind or None) of what is at ``url``; ("", None) when nothing is."""
    if _is_local(url):
        path = _local(url)
        if not os.path.lexists(path):
            return "", None
        if not os.path.isdir(path):
            return "a file", _file_kind(path)
        entries = set(os.listdir(path))
        if not entries:
            return "", None
        if "zarr.json" in entries:
            try:
                with open(os.path.join(path, "zarr.json")) as fh:
                    attrs = json.load(fh).get("attributes", {}) or {}
            except (OSError, ValueError):
                return "a folder with other content", None
            kind = attrs.get(KIND_ATTR) or _legacy_kind(attrs, entries)
            if kind is None:
                return "a Zarr store fsdask did not write", None
            extra = sorted(
                e
                for e in entries
                if e != "zarr.json" and not os.path.exists(os.path.join(path, e, "zarr.json"))
            )
            if extra:  # someone put files into the store: replacing it would delete them
                return f"an fsdask {kind} with other files added ({', '.join(extra[:3])})", None
            return f"an fsdask {kind}", kind
        if REPORT_MARKER in entries:
            extra = sorted(
                e
                for e in entries
                if not (e == REPORT_MARKER or e.endswith((".html", ".png", ".csv")))
            )
            if extra:
                return f"an fsdask report with other files added ({', '.join(extra[:3])})", None
            return "an fsdask report", "report"
        return f"a folder with other content ({len(entries)} entries)", None
    try:
        fs, path = _fs(url, storage_options)
        path = path.rstrip("/")
        if fs.exists(path + "/zarr.json"):
            attrs = json.loads(fs.cat(path + "/zarr.json")).get("attributes", {}) or {}
            names = {p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)}
            kind = attrs.get(KIND_ATTR) or _legacy_kind(attrs, names)
            return (
                "a Zarr store fsdask did not write" if kind is None else f"an fsdask {kind}"
            ), kind
        if fs.exists(path):
            return ("other content" if fs.isdir(path) else "an object fsdask did not write"), None
        return "", None
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(
            f"{_shown(url)}: storage unreachable or unreadable ({type(exc).__name__}: {exc}); "
            "check the URL, the endpoint and the credentials"
        ) from None


#: first lines of the CSV tables fsdask writes (how an existing table is recognised as ours)
CSV_HEADERS = ("rank,feature,weight,selected", "n_features,", "# fsdask")


def _file_kind(path: str) -> str | None:
    """``csv`` / ``evaluation`` for files fsdask writes, else None."""
    try:
        if path.endswith(".nc"):
            import xarray as xr

            with xr.open_dataset(path) as ds:
                return ds.attrs.get(KIND_ATTR)
        with open(path, "rb") as fh:
            first = fh.readline(200).decode("utf-8", "replace")
        return "csv" if first.startswith(CSV_HEADERS) else None
    except Exception:
        return None


def _check_writable(url: str) -> None:
    if not _is_local(url):
        return
    path = _local(url)
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise StoreError(f"{url}: {parent} is a file, not a folder; choose another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(
            f"{url}: the folder {parent} is not writable; choose another path or fix its permissions"
        )


def check_output(
    url: str | os.PathLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    kind: str,
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike] = (),
) -> None:
    """Refuse an output location that would destroy something; call before any computation.

    Raises :class:`StoreError` saying what is there and what to do.
    """
    url = os.fspath(url)
    shown = _shown(url)
    for source in inputs:
        if source is not None and same_location(url, os.fspath(source)):
            raise StoreError(
                f"{shown}: this is (or contains, or is inside) the input {_shown(os.fspath(source))} "
                "of this command; writing there would destroy the input — choose another path"
            )
    what, found = what_is_there(url, storage_options)
    if what:
        if found is None:
            raise StoreError(
                f"{shown}: {what} is there; fsdask replaces only its own outputs, so it leaves "
                "it alone even with --overwrite — choose another path or move it away yourself"
            )
        if found != kind:
            raise StoreError(
                f"{shown}: an fsdask {found} is there, not a {kind}; fsdask replaces only an "
                f"output of the same kind — choose another path"
            )
        if not overwrite:
            raise StoreError(
                f"{shown}: an fsdask {kind} already exists there; pass --overwrite "
                "(API: overwrite=True) to replace it, or choose another path"
            )
    _check_writable(url)


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with this pid exists (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: a temporary of another host (a shared file system) is removed only when older than this
FOREIGN_TEMP_AGE_S = 24 * 3600


def host_tag() -> str:
    """This host's name as a field of a file name: letters and digits only, at most 32."""
    import socket

    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"


def _stale_pattern(base: str) -> re.Pattern:
    # fsdask's own temporaries only: this release's names and the older ".NAME.tmp-HEX[.old]"
    return re.compile(
        rf"^\.{re.escape(base)}(?:\.fsdask-(?P<what>tmp|old)-(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)"
        rf"-[0-9a-f]{{8}}|\.tmp-[0-9a-f]{{8}}(?P<legacy_old>\.old)?)$"
    )


def _abandoned(m: re.Match, path: str) -> bool:
    """Whether the run that made this temporary is gone (its process, or a day for another host)."""
    if not m.group("pid"):
        return True
    if m.group("host") == host_tag():
        return not pid_alive(int(m.group("pid")))
    import time

    try:
        return time.time() - os.lstat(path).st_mtime > FOREIGN_TEMP_AGE_S
    except OSError:
        return False


def cleanup_stale(url: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Remove the temporaries a killed run left next to ``url``; return what was removed.

    Only names fsdask gives its temporaries are touched, and locally only those whose
    process is gone.  A run killed between the two renames of a swap left the old output
    under its ``-old-`` name and nothing at ``url``: it is put back.
    """
    url = os.fspath(url)
    if not _is_local(url):
        return _cleanup_remote(url, storage_options)
    final = _local(url)
    parent, base = os.path.dirname(final), os.path.basename(final)
    if not os.path.isdir(parent):
        return []
    pattern, removed = _stale_pattern(base), []
    for name in sorted(os.listdir(parent)):
        m = pattern.match(name)
        path = os.path.join(parent, name)
        if not m or not _abandoned(m, path):
            continue
        if (m.group("what") == "old" or m.group("legacy_old")) and not os.path.lexists(final):
            os.replace(path, final)
            continue
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
        removed.append(path)
    return removed


def _cleanup_remote(url: str, storage_options: Mapping[str, Any] | None) -> list[str]:
    fs, path = _fs(url, storage_options)
    path = path.rstrip("/")
    parent, base = path.rsplit("/", 1) if "/" in path else ("", path)
    pattern, removed = _stale_pattern(base), []
    try:
        names = fs.ls(parent, detail=False, refresh=True)
    except FileNotFoundError:
        return []
    for full in names:
        name = full.rstrip("/").rsplit("/", 1)[-1]
        if not pattern.match(name):
            continue
        if _complete_remote(fs, full) and not _complete_remote(fs, path):
            _copy_over(fs, full.rstrip("/"), path)  # a swap that was interrupted: finish it
        fs.rm(full, recursive=True)
        removed.append(full)
    return removed


def _complete_remote(fs, path: str) -> bool:
    try:
        return bool(
            json.loads(fs.cat(path.rstrip("/") + "/zarr.json"))
            .get("attributes", {})
            .get(COMPLETE_ATTR)
        )
    except Exception:
        return False


def _copy_over(fs, src: str, dst: str) -> None:
    """Replace the store at ``dst`` by the complete store at ``src``; the root ``zarr.json`` last."""
    root = dst + "/zarr.json"
    if fs.exists(root):  # first un-mark the old store: from here on readers refuse it
        meta = json.loads(fs.cat(root))
        meta.get("attributes", {}).pop(COMPLETE_ATTR, None)
        fs.pipe(root, json.dumps(meta).encode())
    new = {f[len(src) + 1 :] for f in fs.find(src)}
    old = {f[len(dst) + 1 :] for f in fs.find(dst)} if fs.exists(dst) else set()
    stale = [dst + "/" + k for k in sorted(old - new) if k != "zarr.json"]
    if stale:
        fs.rm(stale)
    for key in sorted(new - {"zarr.json"}):
        fs.copy(src + "/" + key, dst + "/" + key)
    fs.copy(src + "/zarr.json", root)
    fs.invalidate_cache()


def _temp_name(final: str) -> str:
    head, base = final.rsplit("/", 1) if "/" in final else ("", final)
    return f"{head}/.{base}{TMP_TAG}{host_tag()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def publish(
    url: str | os.PathLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    kind: str,
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike] = (),
) -> Iterator[str]:
    """Yield a temporary place to write the output for ``url``; publish it if the block succeeds.

    The caller writes the whole output there, completion marker included (for a store:
    :data:`COMPLETE_ATTR` and ``KIND_ATTR = kind``; for a report folder: :data:`REPORT_MARKER`).
    If the block raises, the temporary output is removed and the target is untouched.
    """
    url = os.fspath(url)
    check_output(url, storage_options, kind=kind, overwrite=overwrite, inputs=inputs)
    cleanup_stale(url, storage_options)
    if _is_local(url):
        final = _local(url)
        try:
            os.makedirs(os.path.dirname(final), exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"{url}: cannot create the parent folder ({exc}); check the path"
            ) from None
        tmp = _temp_name(final)
        try:
            yield tmp
            _swap_local(url, tmp, final, storage_options, kind, overwrite)
        finally:
            _discard(tmp)
        return
    fs, path = _fs(url, storage_options)
    path = path.rstrip("/")
    tmp_path = _temp_name(path)
    protocol = url.split("://", 1)[0]
    keep = False
    try:
        yield f"{protocol}://{tmp_path}"
        # something may have appeared at the target while this ran: the same rule again
        check_output(url, storage_options, kind=kind, overwrite=overwrite)
        try:
            _copy_over(fs, tmp_path, path)
        except Exception as exc:
            # the old store may already be un-marked: the complete new output is the only
            # whole copy left, so it stays where it is
            keep = True
            raise StoreError(
                f"{_shown(url)}: publishing the finished output failed midway "
                f"({type(exc).__name__}); the complete output is kept at "
                f"{_shown(f'{protocol}://{tmp_path}')} — re-run, or copy it to the target"
            ) from None
    finally:
        if not keep:
            with contextlib.suppress(Exception):
                fs.rm(tmp_path, recursive=True)


def _discard(tmp: str) -> None:
    """Remove a temporary output of this run (writer threads of a failed compute may still be
    adding files to it: a second pass catches those; anything left is removed by the next run)."""
    for _ in range(2):
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.lexists(tmp):
            os.remove(tmp)


def _swap_local(
    url: str, tmp: str, final: str, storage_options, kind: str, overwrite: bool
) -> None:
    check_output(url, storage_options, kind=kind, overwrite=overwrite)  # again: it may have changed
    if os.path.isdir(final) and not os.listdir(final):
        os.rmdir(final)
    if not os.path.lexists(final):
        os.replace(tmp, final)
        return
    old = tmp.replace(TMP_TAG, OLD_TAG)
    os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old) if os.path.isdir(old) else os.remove(old)


@contextlib.contextmanager
def publish_file(
    path: str | os.PathLike,
    *,
    kind: str = "csv",
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike] = (),
) -> Iterator[str]:
    """Like :func:`publish` for a single local file (a CSV table, a netCDF evaluation)."""
    path = os.fspath(path)
    check_output(path, kind=kind, overwrite=overwrite, inputs=inputs)
    cleanup_stale(path)
    final = _local(path)
    tmp = _temp_name(final)
    try:
        yield tmp
        check_output(path, kind=kind, overwrite=overwrite)
        os.replace(tmp, final)
    except OSError as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreError(
            f"{path}: could not write ({type(exc).__name__}: {exc.strerror or exc}); "
            "check the path, the free space and the permissions"
        ) from None
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)
