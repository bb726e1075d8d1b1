"""Where data lives: one :class:`Location` type for a local path or an fsspec URL.

zarr-python's ``abc/store.py`` is the model: an abstract type with one implementation per
kind of storage (:class:`LocalLocation`, :class:`FsspecLocation`, and
:class:`IcechunkLocation` for a group in an Icechunk repository), built by
:meth:`Location.of`.  Every question fsdask asks of a place is a method here — is
anything there (:meth:`~Location.exists`), what (:meth:`~Location.what_is_there`), may it be
replaced (:meth:`~Location.check_output`), write it so that a crash never leaves something
that looks finished (:meth:`~Location.publish`), remove what fsdask made
(:meth:`~Location.remove`), how zarr/xarray reach it (:meth:`~Location.zarr_kwargs`), is the
storage answering (:meth:`~Location.check_reachable`), and how it is named in messages
(:attr:`~Location.shown`, never with credentials).  The URL helpers (is it local, strip
``file://``, the fsspec file system of a URL) exist only in this module.

The rule every output follows (dataset, result, evaluation, report, CSV table):

* a place where something exists is refused unless ``overwrite`` is given, and even then
  only an fsdask output *of the same kind* is replaced — never the command's own input, a
  folder with other content, or a file fsdask did not write;
* replacement is publish-then-swap: the new output is written complete under a temporary
  name next to the target and only then takes the target's place, so the old output stays
  whole until the new one is complete.  Locally that is two renames; object storage has no
  rename, so the complete temporary store is copied over the target with its root
  ``zarr.json`` (which holds the completion marker) copied last — that write is the switch.
  A run killed midway leaves only temporaries named by fsdask
  (``.NAME.fsdask-tmp-HOST-PID-HEX``), which the next run on the same target removes (a
  temporary of another host of a shared file system only once it is a day old).
"""

from __future__ import annotations

import abc
import contextlib
import errno
import json
import os
import re
import shutil
import uuid
from typing import Any, Iterator, Mapping, Sequence

from fsdask.errors import StoreError, import_optional
from fsdask.io import icechunk as ic
from fsdask.io.icechunk import is_icechunk_url
from fsdask.io.layout import (
    foreign_keys,
    is_sidecar_name,
    local_keys,
    sidecar_kind,
    sidecar_path,
    write_sidecar,
)
from fsdask.io.secrets import redact, register

COMPLETE_ATTR = "fsdask_complete"
KIND_ATTR = "fsdask_kind"
#: a report folder is recognised by this file (written last)
REPORT_MARKER = "fsdask-report.json"
TMP_TAG = ".fsdask-tmp-"
OLD_TAG = ".fsdask-old-"
#: a temporary of another host (a shared file system) is removed only when older than this
FOREIGN_TEMP_AGE_S = 24 * 3600
#: object stores whose fsspec file systems take no credentials from the URL: a ``KEY:SECRET@``
#: part would only become part of the bucket name and of every error message
CREDENTIAL_FREE_SCHEMES = ("s3", "s3a", "gs", "gcs")
#: errors of writing that say the storage is full or read-only (not a bug of fsdask)
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)
#: first lines of the CSV tables fsdask writes (a description only: a table is recognised as
#: fsdask's by its sidecar, :func:`fsdask.io.layout.sidecar_kind`, never by its header)
CSV_HEADERS = ("rank,feature,weight,selected", "n_features,", "# fsdask")


def is_local_url(url: Any) -> bool:
    """Whether ``url`` names a local path (no scheme, or ``file://``)."""
    url = str(url)
    return "://" not in url or url.startswith("file://")


def safe_url(url: Any) -> str:
    """``url`` with any ``user:password@`` part removed (for logs and provenance)."""
    url = str(url)
    if "://" in url and "@" in url.split("://", 1)[1].split("/", 1)[0]:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://{rest.split('@', 1)[1]}"
    return url


def pid_alive(pid: int) -> bool:
    """Whether a process of this host with this pid exists (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def host_tag() -> str:
    """This host's name as a field of a file name: letters and digits only, at most 32."""
    import socket

    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"


def legacy_kind(attrs: Mapping[str, Any], names: set[str]) -> str | None:
    """The kind of a store written before :data:`KIND_ATTR` existed."""
    if not attrs.get(COMPLETE_ATTR) and "fsdask_format" not in attrs:
        return None
    if "X" in names or "fsdask_format" in attrs:
        return "dataset"
    if "weight" in names and "method" in attrs:
        return "result"
    return None


def stale_pattern(base: str) -> re.Pattern:
    """Names of fsdask's own temporaries next to ``base`` (this release's, with the sidecar
    of a file being published, and the older ``.NAME.tmp-HEX[.old]``)."""
    return re.compile(
        rf"^\.{re.escape(base)}(?:\.fsdask-(?P<what>tmp|old)-(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)"
        rf"-[0-9a-f]{{8}}(?:\.fsdask\.json)?|\.tmp-[0-9a-f]{{8}}(?P<legacy_old>\.old)?)$"
    )


def temp_name(final: str) -> str:
    """The temporary name, next to ``final``, under which a new output of this run is written."""
    head, base = final.rsplit("/", 1) if "/" in final else ("", final)
    return f"{head}/.{base}{TMP_TAG}{host_tag()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def complete_remote(fs: Any, path: str) -> bool:
    """Whether the store at ``path`` of ``fs`` carries the completion marker."""
    try:
        return bool(
            json.loads(fs.cat(path.rstrip("/") + "/zarr.json"))
            .get("attributes", {})
            .get(COMPLETE_ATTR)
        )
    except Exception:
        return False


def copy_over(fs: Any, src: str, dst: str) -> None:
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


class Location(abc.ABC):
    """A place where fsdask reads or writes: a local path or an fsspec URL.

    Parameters
    ----------
    url : str
        As the user gave it (``data.zarr``, ``file:///x``, ``s3://KEY:SECRET@bucket/x``).
    storage_options : mapping, optional
        Passed to fsspec (credentials, ``endpoint_url``, …); never shown.
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None):
        self.url = str(url)
        self.storage_options = dict(storage_options or {})

    @staticmethod
    def of(url: Any, storage_options: Mapping[str, Any] | None = None) -> Location:
        """The :class:`LocalLocation` or :class:`FsspecLocation` of ``url``."""
        url = os.fspath(url) if isinstance(url, os.PathLike) else str(url)
        if is_icechunk_url(url):
            return IcechunkLocation(url, storage_options)
        if is_local_url(url):
            return LocalLocation(url, storage_options)
        if safe_url(url) != url:
            register(None, url)  # masked wherever it might still be printed
        return FsspecLocation(url, storage_options)

    is_local: bool = False
    #: read at a snapshot and written as commits (:class:`IcechunkLocation`)
    versioned: bool = False

    @property
    def shown(self) -> str:
        """The URL without credentials (what messages and provenance show)."""
        return safe_url(self.url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.shown!r})"

    @property
    @abc.abstractmethod
    def target(self) -> str:
        """What zarr/xarray/h5py open: the local path, or the URL."""

    @abc.abstractmethod
    def exists(self) -> bool:
        """Whether anything is stored here."""

    def found(self) -> bool:
        """Whether anything is stored here; False also when the storage cannot be asked."""
        try:
            return self.exists()
        except StoreError:
            return False

    @abc.abstractmethod
    def what_is_there(self) -> tuple[str, str | None]:
        """(description, fsdask kind or None) of what is here; ("", None) when nothing is."""

    @abc.abstractmethod
    def cleanup_stale(self) -> list[str]:
        """Remove the temporaries a killed run left next to this place; return what was removed."""

    @abc.abstractmethod
    def publish(
        self, *, kind: str, overwrite: bool = False, inputs: Sequence[Any] = ()
    ) -> contextlib.AbstractContextManager[str]:
        """Yield a temporary place to write the output; publish it if the block succeeds.

        The caller writes the whole output there, completion marker included (for a store:
        :data:`COMPLETE_ATTR` and ``KIND_ATTR = kind``; for a report folder:
        :data:`REPORT_MARKER`).  :meth:`check_output` is applied before and again at the
        swap.  If the block raises, the temporary output is removed and the target is
        untouched.
        """

    @abc.abstractmethod
    def delete(self) -> None:
        """Delete what is here (called by :meth:`remove` once it is known to be fsdask's)."""

    def fs(self) -> tuple[Any, str]:
        """(fsspec file system, path without the protocol and trailing slash)."""
        import fsspec

        fs, path = fsspec.core.url_to_fs(self.url, **self.storage_options)
        return fs, path.rstrip("/")

    def zarr_kwargs(self) -> dict:
        """Keyword arguments that let xarray/zarr reach this place."""
        return {}

    def check_reachable(self, timeout: float = 3.0) -> None:
        """Fail fast with :class:`StoreError` when the storage does not answer (no-op locally)."""
        return None

    def storage_hint(self) -> str:
        """What to check when this place cannot be read (for the end of an error message)."""
        return "check the path"

    def overlaps(self, other: Location) -> bool:
        """Whether ``other`` is this place, or one contains the other."""
        if self.is_local != other.is_local:
            return False
        pa, pb = self.canonical(), other.canonical()
        sep = os.sep if self.is_local else "/"
        return pa == pb or pa.startswith(pb + sep) or pb.startswith(pa + sep)

    def canonical(self) -> str:
        """A normalised name for comparisons."""
        return redact(self.url).rstrip("/")

    def check_output(
        self, *, kind: str, overwrite: bool = False, inputs: Sequence[Any] = ()
    ) -> None:
        """Refuse an output place that would destroy something; call before any computation.

        Raises
        ------
        StoreError
            Saying what is there and what to do: the place is (inside) an input, holds
            something fsdask did not write, an fsdask output of another kind, or one of
            the same kind without ``overwrite``.
        """
        shown = redact(self.url)
        for source in inputs:
            if source is not None and self.overlaps(Location.of(source)):
                raise StoreError(
                    f"{shown}: this is (or contains, or is inside) the input "
                    f"{redact(os.fspath(source))} of this command; writing there would destroy "
                    "the input — choose another path"
                )
        what, found = self.what_is_there()
        if what:
            if found is None:
                how = (
                    " (a file is fsdask's only while the marker .NAME.fsdask.json written with "
                    "it matches it, not by its header)"
                    if what == "a file"
                    else ""
                )
                raise StoreError(
                    f"{shown}: {what} is there; fsdask replaces only its own outputs{how}, so "
                    "it leaves it alone even with --overwrite — choose another path or move it "
                    "away yourself"
                )
            if found != kind:
                raise StoreError(
                    f"{shown}: an fsdask {found} is there, not a {kind}; fsdask replaces only "
                    "an output of the same kind — choose another path"
                )
            if not overwrite:
                raise StoreError(
                    f"{shown}: an fsdask {kind} already exists there; pass --overwrite "
                    "(API: overwrite=True) to replace it, or choose another path"
                )
        self.check_writable()

    def check_writable(self) -> None:
        """Refuse a place whose folder cannot be written (local only)."""
        return None

    def remove(self, kind: str) -> bool:
        """Remove the fsdask output of ``kind`` here; return whether something was removed.

        Raises
        ------
        StoreError
            When what is here is not an fsdask output of ``kind`` (fsdask never deletes what
            it did not write).
        """
        what, found = self.what_is_there()
        if not what:
            return False
        if found != kind:
            raise StoreError(
                f"{redact(self.url)}: {what} is there, not an fsdask {kind}; fsdask removes "
                "only its own outputs — remove it yourself if it should go"
            )
        self.delete()
        return True


class LocalLocation(Location):
    """A path of this machine's file system (``file://`` accepted)."""

    is_local = True

    @property
    def path(self) -> str:
        """The path without ``file://`` (relative paths stay relative)."""
        return self.url.removeprefix("file://")

    @property
    def abspath(self) -> str:
        """The absolute path."""
        return os.path.abspath(self.path)

    @property
    def target(self) -> str:
        return self.path

    def canonical(self) -> str:
        return os.path.realpath(self.abspath).rstrip(os.sep)

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def is_hdf5(self) -> bool:
        """Whether this is an HDF5 file (by its signature)."""
        if not os.path.isfile(self.path):
            return False
        with open(self.path, "rb") as fh:
            return fh.read(8) == b"\x89HDF\r\n\x1a\n"

    def what_is_there(self) -> tuple[str, str | None]:
        path = self.abspath
        if not os.path.lexists(path):
            return "", None
        if not os.path.isdir(path):
            return "a file", file_kind(path)
        entries = set(os.listdir(path))
        if not entries:
            return "", None
        if "zarr.json" in entries:
            return self._store_kind(path, entries)
        if REPORT_MARKER in entries:
            extra = sorted(
                e
                for e in entries
                if not (
                    e == REPORT_MARKER
                    or e.endswith((".html", ".png", ".csv"))
                    or is_sidecar_name(e)
                )
            )
            if extra:
                return f"an fsdask report with other files added ({', '.join(extra[:3])})", None
            return "an fsdask report", "report"
        return f"a folder with other content ({len(entries)} entries)", None

    @staticmethod
    def _store_kind(path: str, entries: set[str]) -> tuple[str, str | None]:
        def meta(node: str) -> dict:
            with open(os.path.join(path, *node.split("/"), "zarr.json")) as fh:
                return json.load(fh)

        try:
            attrs = meta("").get("attributes", {}) or {}
        except (OSError, ValueError, AttributeError):
            return "a folder with other content", None
        kind = attrs.get(KIND_ATTR) or legacy_kind(attrs, entries)
        if kind is None:
            return "a Zarr store fsdask did not write", None
        extra = foreign_keys(local_keys(path), meta)
        if extra:  # someone put files into the store: replacing it would delete them
            return f"an fsdask {kind} with other files added ({', '.join(extra[:3])})", None
        return f"an fsdask {kind}", kind

    def check_writable(self) -> None:
        parent = os.path.dirname(self.abspath)
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise StoreError(f"{self.url}: {parent} is a file, not a folder; choose another path")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(
                f"{self.url}: the folder {parent} is not writable; choose another path or fix "
                "its permissions"
            )

    def cleanup_stale(self) -> list[str]:
        final = self.abspath
        parent, base = os.path.dirname(final), os.path.basename(final)
        if not os.path.isdir(parent):
            return []
        pattern, removed = stale_pattern(base), []
        for name in sorted(os.listdir(parent)):
            m = pattern.match(name)
            path = os.path.join(parent, name)
            if not m or not _abandoned(m, path):
                continue
            if (m.group("what") == "old" or m.group("legacy_old")) and not os.path.lexists(final):
                os.replace(path, final)
                continue
            discard(path)
            removed.append(path)
        return removed

    @contextlib.contextmanager
    def publish(
        self, *, kind: str, overwrite: bool = False, inputs: Sequence[Any] = ()
    ) -> Iterator[str]:
        self.check_output(kind=kind, overwrite=overwrite, inputs=inputs)
        self.cleanup_stale()
        final = self.abspath
        try:
            os.makedirs(os.path.dirname(final), exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"{self.url}: cannot create the parent folder ({exc}); check the path"
            ) from None
        tmp = temp_name(final)
        try:
            yield tmp
            self._swap(tmp, kind, overwrite)
        except OSError as exc:
            if isinstance(exc, StoreError) or exc.errno not in WRITE_ERRNOS:
                raise
            raise StoreError(
                f"{self.shown}: could not write ({type(exc).__name__}: {exc.strerror or exc}); "
                "free space on that disk or choose another path — nothing was replaced"
            ) from None
        finally:
            for _ in range(2):  # writer threads of a failed compute may still add files
                discard(tmp)

    def _swap(self, tmp: str, kind: str, overwrite: bool) -> None:
        self.check_output(kind=kind, overwrite=overwrite)  # again: it may have changed
        final = self.abspath
        if os.path.isdir(final) and not os.listdir(final):
            os.rmdir(final)
        if not os.path.lexists(final):
            os.replace(tmp, final)
            return
        old = tmp.replace(TMP_TAG, OLD_TAG)
        os.replace(final, old)
        os.replace(tmp, final)
        discard(old)

    @contextlib.contextmanager
    def publish_file(
        self, *, kind: str = "csv", overwrite: bool = False, inputs: Sequence[Any] = ()
    ) -> Iterator[str]:
        """Like :meth:`publish` for a single file (a CSV table, a netCDF evaluation).

        The file is published with its sidecar (:func:`fsdask.io.layout.write_sidecar`),
        the marker by which a later run recognises it as fsdask's.
        """
        self.check_output(kind=kind, overwrite=overwrite, inputs=inputs)
        self.cleanup_stale()
        final = self.abspath
        tmp = temp_name(final)
        marks = ""
        try:
            yield tmp
            self.check_output(kind=kind, overwrite=overwrite)
            marks = write_sidecar(tmp, kind, final)
            os.replace(tmp, final)
            os.replace(marks, sidecar_path(final))
        except OSError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError(
                f"{self.shown}: could not write ({type(exc).__name__}: {exc.strerror or exc}); "
                "check the path, the free space and the permissions"
            ) from None
        finally:
            for leftover in (tmp, marks):
                if leftover and os.path.lexists(leftover):
                    os.remove(leftover)

    def delete(self) -> None:
        discard(self.abspath)
        if os.path.isfile(sidecar_path(self.abspath)):
            os.remove(sidecar_path(self.abspath))


class FsspecLocation(Location):
    """A URL reached through fsspec (``s3://``, ``gs://``, ``memory://``, …)."""

    @property
    def target(self) -> str:
        return self.url

    @property
    def protocol(self) -> str:
        """The URL's scheme (``s3``)."""
        return self.url.split("://", 1)[0]

    def check_url_credentials(self) -> None:
        """Refuse ``KEY:SECRET@`` in the URL of an object store that does not read it there.

        s3fs and gcsfs take no credentials from a URL: the part would only become part of
        the bucket name, and of every error message about it.
        """
        scheme = self.protocol.lower()
        if scheme in CREDENTIAL_FREE_SCHEMES and self.shown != self.url:
            raise StoreError(
                f"{self.shown}: the URL carries credentials (KEY:SECRET@), which {scheme}:// "
                "does not use and fsdask never shows; remove them from the URL and give them "
                "with --storage-option key=... --storage-option secret=... (API: "
                "storage_options) or the environment (e.g. AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY)"
            )

    def fs(self) -> tuple[Any, str]:
        """(fsspec file system, path); a URL with credentials is refused first."""
        self.check_url_credentials()
        return super().fs()

    def exists(self) -> bool:
        try:
            fs, path = self.fs()
            return bool(fs.exists(path + "/zarr.json") or fs.exists(path))
        except FileNotFoundError:
            return False
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"{self.shown}: storage unreachable or unreadable ({type(exc).__name__}: {exc}); "
                f"{self.storage_hint()}"
            ) from None

    def zarr_kwargs(self) -> dict:
        self.check_url_credentials()
        if self.protocol == "s3":
            import_optional("s3fs", "s3", f"{self.shown}: s3://")
        return {"storage_options": dict(self.storage_options)}

    def storage_hint(self) -> str:
        return (
            "check the URL, the endpoint and the credentials (environment variables or "
            "--storage-option key=value), and that the bucket exists"
        )

    def endpoint(self) -> str | None:
        """The explicit ``endpoint_url`` of the storage options, if any."""
        so = self.storage_options
        return so.get("endpoint_url") or (so.get("client_kwargs") or {}).get("endpoint_url")

    def check_reachable(self, timeout: float = 3.0) -> None:
        """Probe an explicit ``endpoint_url`` (a TCP connect, no request).

        Without this, botocore's and s3fs's retries take many seconds before reporting a
        connection error.
        """
        self.check_url_credentials()
        probe_endpoint(self.shown, self.endpoint(), timeout)

    def what_is_there(self) -> tuple[str, str | None]:
        try:
            fs, path = self.fs()
            if fs.exists(path + "/zarr.json"):
                return self._store_kind(fs, path)
            if fs.exists(path):
                what = "other content" if fs.isdir(path) else "an object fsdask did not write"
                return what, None
            return "", None
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"{redact(self.url)}: storage unreachable or unreadable "
                f"({type(exc).__name__}: {exc}); check the URL, the endpoint and the credentials"
            ) from None

    @staticmethod
    def _store_kind(fs: Any, path: str) -> tuple[str, str | None]:
        def meta(node: str) -> dict:
            return json.loads(fs.cat(f"{path}/{node}/zarr.json" if node else f"{path}/zarr.json"))

        attrs = meta("").get("attributes", {}) or {}
        keys = [k[len(path) + 1 :] for k in fs.find(path)]
        names = {k.split("/", 1)[0] for k in keys}
        kind = attrs.get(KIND_ATTR) or legacy_kind(attrs, names)
        if kind is None:
            return "a Zarr store fsdask did not write", None
        extra = foreign_keys(keys, meta)
        if extra:  # someone put objects into the store: replacing it would delete them
            return f"an fsdask {kind} with other objects added ({', '.join(extra[:3])})", None
        return f"an fsdask {kind}", kind

    def cleanup_stale(self) -> list[str]:
        fs, path = self.fs()
        parent, base = path.rsplit("/", 1) if "/" in path else ("", path)
        pattern, removed = stale_pattern(base), []
        try:
            names = fs.ls(parent, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        for full in names:
            name = full.rstrip("/").rsplit("/", 1)[-1]
            if not pattern.match(name):
                continue
            if complete_remote(fs, full) and not complete_remote(fs, path):
                copy_over(fs, full.rstrip("/"), path)  # a swap that was interrupted: finish it
            fs.rm(full, recursive=True)
            removed.append(full)
        return removed

    @contextlib.contextmanager
    def publish(
        self, *, kind: str, overwrite: bool = False, inputs: Sequence[Any] = ()
    ) -> Iterator[str]:
        self.check_output(kind=kind, overwrite=overwrite, inputs=inputs)
        self.cleanup_stale()
        fs, path = self.fs()
        tmp_path = temp_name(path)
        tmp_url = f"{self.protocol}://{tmp_path}"
        keep = False
        try:
            yield tmp_url
            # something may have appeared at the target while this ran: the same rule again
            self.check_output(kind=kind, overwrite=overwrite)
            try:
                copy_over(fs, tmp_path, path)
            except Exception as exc:
                # the old store may already be un-marked: the complete new output is the only
                # whole copy left, so it stays where it is
                keep = True
                raise StoreError(
                    f"{redact(self.url)}: publishing the finished output failed midway "
                    f"({type(exc).__name__}); the complete output is kept at "
                    f"{redact(tmp_url)} — re-run, or copy it to the target"
                ) from None
        finally:
            if not keep:
                with contextlib.suppress(Exception):
                    fs.rm(tmp_path, recursive=True)

    def delete(self) -> None:
        fs, path = self.fs()
        fs.rm(path, recursive=True)
        fs.invalidate_cache()


class IcechunkLocation(Location):
    """A Zarr group in an Icechunk repository (:mod:`fsdask.io.icechunk`): read at one
    snapshot, written as a commit on a branch.

    Nothing is ever deleted from a repository: replacing an output is a new commit, and the
    snapshots before it keep the old one (its history).  The rule of :meth:`check_output`
    still holds on the branch: only an fsdask output of the same kind is replaced, only with
    ``overwrite``, never the command's input.
    """

    versioned = True

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None):
        super().__init__(url, storage_options)
        self.ref = ic.IcechunkRef.parse(self.url)
        self._store: Any = None

    @property
    def shown(self) -> str:
        return self.ref.url

    @property
    def target(self) -> Any:
        """A Zarr ``StorePath`` of the group, read-only at one snapshot (opened once)."""
        from zarr.storage import StorePath

        if self._store is None:
            self._store = ic.read_store(self.ref, self.storage_options)
        return StorePath(self._store, self.ref.group)

    def pin(self) -> IcechunkLocation:
        """This place at the snapshot its branch or tag names now (``at=``)."""
        return IcechunkLocation(ic.pinned(self.ref, self.storage_options).url, self.storage_options)

    def provenance(self) -> dict:
        """Repository, branch or tag, snapshot read and group (for a dataset's attributes)."""
        return self.ref.provenance()

    def version_fingerprint(self) -> dict | None:
        """The snapshot id the URL names now, as a pipeline input's fingerprint (None: no
        repository there)."""
        if not ic.exists(self.ref, self.storage_options):
            return None
        return ic.version_fingerprint(self.ref, self.storage_options)

    def fs(self) -> tuple[Any, str]:
        raise StoreError(
            f"{self.shown}: an Icechunk repository is read through its snapshots, not as files"
        )

    def canonical(self) -> str:
        return f"{self.ref.repository}#{self.ref.group}"

    def overlaps(self, other: Location) -> bool:
        """The same repository and branch, one group in the other (other versions never do)."""
        if not isinstance(other, IcechunkLocation) or other.ref.repository != self.ref.repository:
            return False
        if self.ref.on_branch != other.ref.on_branch or self.ref.on_branch is None:
            return False
        a, b = self.ref.group, other.ref.group
        return a == b or not a or not b or a.startswith(b + "/") or b.startswith(a + "/")

    def check_reachable(self, timeout: float = 3.0) -> None:
        opts = self.storage_options
        ep = opts.get("endpoint_url") or (opts.get("client_kwargs") or {}).get("endpoint_url")
        if self.ref.backend == "s3":
            probe_endpoint(self.shown, ep, timeout)

    def storage_hint(self) -> str:
        return (
            "check the URL (repository, branch=/tag=/snapshot=, group=), the endpoint and the "
            "credentials (--storage-option key=value)"
        )

    def exists(self) -> bool:
        return bool(self.what_is_there()[0])

    def what_is_there(self) -> tuple[str, str | None]:
        import zarr

        if not ic.exists(self.ref, self.storage_options):
            path = self.ref.path
            if self.ref.backend == "local" and os.path.lexists(path):
                if not os.path.isdir(path) or os.listdir(path):  # (opening makes it, empty)
                    return "something that is not an Icechunk repository", None
            return "", None
        try:
            node = zarr.open(self.target, mode="r")
        except (FileNotFoundError, KeyError):
            return "", None
        except StoreError:
            raise
        except Exception as exc:
            if type(exc).__name__.endswith("NotFoundError"):  # zarr's NodeNotFoundError
                return "", None
            raise StoreError(
                f"{self.shown}: cannot read the group ({type(exc).__name__}: "
                f"{ic.first_line(exc)}); {self.storage_hint()}"
            ) from None
        attrs = dict(node.attrs)
        kind = attrs.get(KIND_ATTR)
        names = set(node.keys()) if hasattr(node, "keys") else set()
        kind = kind or legacy_kind(attrs, names)
        if kind is None:
            if not attrs and not names:
                return "", None  # an empty group (a parent Zarr made for another output)
            return "a Zarr node fsdask did not write", None
        return f"an fsdask {kind}", kind

    def check_output(
        self, *, kind: str, overwrite: bool = False, inputs: Sequence[Any] = ()
    ) -> None:
        ic.check_writable(self.ref)
        super().check_output(kind=kind, overwrite=overwrite, inputs=inputs)

    def cleanup_stale(self) -> list[str]:
        return []  # uncommitted writes are never visible: nothing is left behind

    @contextlib.contextmanager
    def publish(
        self, *, kind: str, overwrite: bool = False, inputs: Sequence[Any] = ()
    ) -> Iterator[Any]:
        """Yield a ``StorePath`` of the group in a writable session; commit it if the block
        succeeds (inside a pipeline run: with the run's other outputs, :func:`~fsdask.io.icechunk.batch`).

        The group is written whole (``mode="w"`` replaces its earlier version on the branch;
        the earlier snapshots keep it).
        """
        from zarr.storage import StorePath

        self.check_output(kind=kind, overwrite=overwrite, inputs=inputs)
        with ic.writing(self.ref, self.storage_options, kind=kind, inputs=inputs) as store:
            yield StorePath(store, self.ref.group)
        self._store = None  # a later read sees the new version

    def delete(self) -> None:
        import zarr
        from zarr.storage import StorePath

        with ic.writing(self.ref, self.storage_options, kind="removal") as store:
            root = zarr.open_group(StorePath(store, ""), mode="r+")
            if self.ref.group:
                del root[self.ref.group]
            else:
                for name in list(root.keys()):
                    del root[name]
                root.attrs.clear()
        self._store = None


def probe_endpoint(shown: str, ep: str | None, timeout: float = 3.0) -> None:
    """A TCP connect to an explicit ``endpoint_url`` (no request); StoreError when nothing answers.

    Without this, the S3 clients' retries take many seconds before reporting a connection
    error.
    """
    import socket
    from urllib.parse import urlparse

    if not ep:
        return
    u = urlparse(ep)
    host, port = u.hostname, u.port or (443 if u.scheme == "https" else 80)
    if not host:
        raise StoreError(f"{shown}: endpoint_url {ep!r} is not a URL; use e.g. http://host:9000")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise StoreError(
            f"{shown}: storage unreachable: nothing answers at {ep} "
            f"({type(exc).__name__}: {exc}); check endpoint_url and that the server "
            "is running and reachable from here"
        ) from None


def file_kind(path: str) -> str | None:
    """The kind of a local file fsdask wrote and nobody changed since, else None.

    Its sidecar says so (:func:`fsdask.io.layout.sidecar_kind`); a netCDF evaluation of a
    release without sidecars is also recognised by its recorded ``fsdask_kind`` attribute.
    A CSV is never recognised by its header alone: a user's table may share it.
    """
    kind = sidecar_kind(path)
    if kind is not None or not path.endswith(".nc"):
        return kind
    try:
        import xarray as xr

        with xr.open_dataset(path) as ds:
            return ds.attrs.get(KIND_ATTR)
    except Exception:
        return None


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


def discard(path: str) -> None:
    """Remove a local file or folder that fsdask made (a temporary, a replaced output)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def rename_no_replace(src: str, dst: str) -> None:
    """Give the local file or folder ``src`` the name ``dst`` only if nothing has that name.

    Raises
    ------
    FileExistsError
        When ``dst`` exists, or appeared during the call: it is left as it is.

    Notes
    -----
    There is no check-then-rename window: a file is published by a hard link, which the
    kernel refuses when the name exists (then ``src`` is unlinked); a folder by creating
    ``dst`` as an empty folder first (refused when the name exists) and renaming ``src``
    onto that folder, which the kernel refuses if anything was put into it meanwhile.
    """
    if os.path.isdir(src) and not os.path.islink(src):
        os.mkdir(dst)
        try:
            os.rename(src, dst)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.rmdir(dst)  # ours, and still empty
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):  # something appeared in it
                raise FileExistsError(dst) from None
            raise
        return
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system: reserve the name, then rename onto it
        fd = os.open(dst, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
        os.replace(src, dst)
        return
    os.remove(src)
