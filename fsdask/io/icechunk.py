"""Icechunk repositories: versioned, transactional Zarr, read at one snapshot, written as commits.

An Icechunk repository holds Zarr groups and arrays under branches, tags and immutable
snapshots; a commit changes a branch atomically, and a commit whose branch moved since its
session began fails (:class:`icechunk.ConflictError`) instead of being rebased over.  fsdask
names a repository by a URL (:class:`IcechunkRef`)::

    icechunk:///abs/path/repo            a local repository (absolute path)
    icechunk://rel/path/repo             a local repository (relative to the working folder)
    icechunk+s3://bucket/prefix          on S3 or an S3-compatible server (storage_options)

with an optional query: ``branch=`` / ``tag=`` / ``snapshot=`` (default: branch ``main``),
``group=`` (the Zarr group inside the repository; default its root).  ``at=`` is what fsdask
adds when it resolves a branch or tag: the snapshot that was read, as the provenance shows it.

Reads go through a read-only session at one snapshot (:func:`read_store`), so a command
sees one version of the data however long it runs; writes go through a writable session on
a branch and end in one commit whose message names the command and the input snapshots
(:func:`writing`).  Inside :func:`batch` (a pipeline run) the writes of every step to one
branch share a session and are committed together by :meth:`Batch.commit`, or not at all;
the steps read each other's outputs from that session.  Every failure of the storage or of
a commit becomes a one-line :class:`~fsdask.errors.StoreError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import math
import os
import re
import time
import uuid
from typing import Any, Iterator, Mapping
from urllib.parse import parse_qsl, quote, urlsplit

from zarr.storage import WrapperStore

from fsdask.errors import FsdaskError, ParameterError, StoreError, import_optional

SCHEMES = {"icechunk": "local", "icechunk+s3": "s3"}
DEFAULT_BRANCH = "main"
QUERY_KEYS = ("branch", "tag", "snapshot", "group", "at")
#: the command that writes each kind of output (for commit messages)
WRITERS = {"dataset": "ingest", "result": "select", "evaluation": "evaluate", "removal": "remove"}
#: the snapshot id standing for a branch's uncommitted changes in a pipeline run (replaced by
#: the id of the run's commit once it is made, :meth:`Batch.commit`)
PENDING = "uncommitted-"
#: snapshot read per repository and version in this process (for commit messages)
READS: dict[tuple[str, str], str] = {}


def is_icechunk_url(url: Any) -> bool:
    """Whether ``url`` names an Icechunk repository (``icechunk://`` or ``icechunk+s3://``)."""
    return str(url).split("://", 1)[0].lower() in SCHEMES if "://" in str(url) else False


def module():
    """The ``icechunk`` package, or a one-line :class:`~fsdask.errors.MissingDependencyError`."""
    ic = import_optional("icechunk", "icechunk", "reading or writing Icechunk repositories")
    with contextlib.suppress(Exception):  # its storage warnings would break one-line stderr
        ic.set_logs_filter(os.environ.get("ICECHUNK_LOG", "error"))
    return ic


@dataclasses.dataclass(frozen=True)
class IcechunkRef:
    """A parsed Icechunk URL: repository, version (branch, tag or snapshot) and group.

    Parameters
    ----------
    backend : {"local", "s3"}
        Where the repository is.
    path : str
        The absolute local path, or ``bucket/prefix``.
    branch, tag, snapshot : str, optional
        The version named (at most one; none: branch ``main``).
    group : str
        The Zarr group inside the repository ("" for its root).
    at : str, optional
        The snapshot a branch or tag was resolved to (what was read).
    """

    backend: str
    path: str
    branch: str | None = None
    tag: str | None = None
    snapshot: str | None = None
    group: str = ""
    at: str | None = None

    @classmethod
    def parse(cls, url: str) -> IcechunkRef:
        """The reference named by ``url``; a ParameterError says what is wrong with it."""
        scheme, rest = str(url).split("://", 1)
        parts = urlsplit("x://" + rest)
        if "@" in parts.netloc:
            raise ParameterError(
                f"{scheme}://…: the URL carries credentials, which fsdask never shows; give "
                "them with --storage-option key=... --storage-option secret=... or the "
                "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
            )
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        shown = f"{scheme}://{rest.split('?', 1)[0]}"
        unknown = sorted(set(query) - set(QUERY_KEYS))
        if unknown:
            raise ParameterError(
                f"{shown}: unknown URL option(s) {', '.join(unknown)}; valid: "
                "branch=, tag=, snapshot=, group="
            )
        named = [k for k in ("branch", "tag", "snapshot") if query.get(k)]
        if len(named) > 1:
            raise ParameterError(
                f"{shown}: give one of branch=, tag= or snapshot=, not {' and '.join(named)}"
            )
        backend = SCHEMES[scheme.lower()]
        if backend == "local":
            path = os.path.abspath(parts.netloc + parts.path) if parts.netloc else parts.path
        else:
            path = (parts.netloc + parts.path).rstrip("/")
        if not path or (backend == "s3" and not parts.netloc):
            raise ParameterError(f"{shown}: no repository path; e.g. {scheme}://bucket/prefix")
        return cls(
            backend,
            path.rstrip("/") or "/",
            branch=query.get("branch") or None,
            tag=query.get("tag") or None,
            snapshot=query.get("snapshot") or None,
            group=(query.get("group") or "").strip("/"),
            at=query.get("at") or None,
        )

    @property
    def repository(self) -> str:
        """The repository's URL without a version or group."""
        return (
            f"icechunk://{self.path}" if self.backend == "local" else f"icechunk+s3://{self.path}"
        )

    @property
    def on_branch(self) -> str | None:
        """The branch read or written (``main`` when no version is named), else None."""
        if self.tag or self.snapshot:
            return None
        return self.branch or DEFAULT_BRANCH

    @property
    def version(self) -> str:
        """The version as words (``branch main``, ``tag night-1``, ``snapshot 1CE…``)."""
        if self.tag:
            return f"tag {self.tag}"
        if self.snapshot:
            return f"snapshot {self.snapshot}"
        return f"branch {self.on_branch}"

    @property
    def url(self) -> str:
        """The URL naming this reference (what :meth:`parse` reads back)."""
        query = [
            (k, getattr(self, k))
            for k in ("branch", "tag", "snapshot", "group", "at")
            if getattr(self, k)
        ]
        tail = "&".join(f"{k}={quote(str(v), safe='/')}" for k, v in query)
        return self.repository + (f"?{tail}" if tail else "")

    def replace(self, **changes: Any) -> IcechunkRef:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def provenance(self) -> dict:
        """``repository``, ``branch`` / ``tag`` and ``snapshot`` (the one read), for attributes."""
        out = {"repository": self.repository, "branch": self.branch or self.on_branch}
        out.update({"tag": self.tag, "snapshot": self.at or self.snapshot, "group": self.group})
        return {k: v for k, v in out.items() if v}


# ------------------------------------------------------------------------------ retries
#: failures of one transfer that a second try may not meet: Icechunk's S3 client retries a
#: request that fails (503, a reset connection) but not a body that breaks off midway
TRANSIENT = re.compile(r"stream|broken pipe|unexpected eof|incomplete", re.IGNORECASE)


def tries_of(so: Mapping[str, Any] | None) -> int:
    """How often an idempotent read is tried: ``config_kwargs.retries.max_attempts`` (else 5)."""
    retries = ((so or {}).get("config_kwargs") or {}).get("retries") or {}
    return max(1, int(retries.get("max_attempts") or 5))


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed transfer (worth another try), not an answer."""
    return not isinstance(exc, FsdaskError) and bool(TRANSIENT.search(str(exc)))


def retried(call: Any, tries: int) -> Any:
    """``call()``, tried again (up to ``tries`` times) after a transient failure; reads only."""
    for attempt in range(tries):
        try:
            return call()
        except Exception as exc:
            if attempt + 1 >= tries or not transient(exc):
                raise
            time.sleep(min(0.05 * 2**attempt, 1.0))
    return None  # (not reached)


async def _again(call: Any, tries: int) -> Any:
    for attempt in range(tries):
        try:
            return await call()
        except Exception as exc:
            if attempt + 1 >= tries or not transient(exc):
                raise
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
    return None  # (not reached)


class RetryingStore(WrapperStore):
    """A read-only Zarr store over ``store`` whose reads are tried again after a transient
    failure (a chunk whose body broke off), so a flaky connection gives the same data.

    Parameters
    ----------
    store : zarr.abc.store.Store
        An Icechunk session's store.
    tries : int
        How often a read is tried.
    """

    def __init__(self, store: Any, tries: int = 5):
        super().__init__(store)
        self.tries = tries

    def _with_store(self, store: Any) -> RetryingStore:
        return type(self)(store, self.tries)

    async def get(self, key, prototype, byte_range=None):
        return await _again(lambda: self._store.get(key, prototype, byte_range), self.tries)

    async def get_partial_values(self, prototype, key_ranges):
        key_ranges = list(key_ranges)
        return await _again(
            lambda: self._store.get_partial_values(prototype, key_ranges), self.tries
        )

    async def exists(self, key):
        return await _again(lambda: self._store.exists(key), self.tries)


def finite(value: Any) -> Any:
    """``value`` with NaN and ±Infinity floats (nested in dicts and lists) as Zarr's strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


class JsonSafeStore(WrapperStore):
    """A Zarr store over a writable Icechunk store whose metadata is strict JSON.

    Icechunk refuses a ``zarr.json`` whose attributes hold NaN or ±Infinity (not JSON; Zarr
    writes them anyway); such a value is written as the string Zarr v3 uses for a fill value
    (``"NaN"``, ``"Infinity"``, ``"-Infinity"``), which ``float()`` reads back.
    """

    async def set(self, key, value):
        if key.rsplit("/", 1)[-1] == "zarr.json":
            meta = json.loads(value.to_bytes())
            if "attributes" in meta:
                meta["attributes"] = finite(meta["attributes"])
                value = type(value).from_bytes(json.dumps(meta).encode())
        return await self._store.set(key, value)


# ------------------------------------------------------------------------------ repositories
def first_line(exc: BaseException) -> str:
    """The first meaningful line of an exception (Icechunk's carry a multi-line trace)."""
    for line in str(exc).splitlines():
        line = line.strip().lstrip("x").strip()
        if line:
            return line
    return type(exc).__name__


@contextlib.contextmanager
def translated(ref: IcechunkRef, what: str, kinds: Any = Exception) -> Iterator[None]:
    """Icechunk's and the storage's errors (``kinds``) in the block as one-line StoreErrors."""
    try:
        yield
    except (FsdaskError, KeyboardInterrupt, MemoryError):
        raise
    except kinds as exc:
        raise StoreError(
            f"{ref.repository}: could not {what} ({type(exc).__name__}: {first_line(exc)}); "
            "check the URL, the endpoint and the credentials (--storage-option), and that the "
            "storage is reachable"
        ) from None


def storage(ref: IcechunkRef, so: Mapping[str, Any] | None):
    """The ``icechunk.Storage`` of ``ref``; S3 options are read in s3fs's spelling.

    ``endpoint_url`` (also under ``client_kwargs``), ``key`` / ``secret`` / ``token``,
    ``anon``, ``region`` (or ``client_kwargs.region_name``, or ``AWS_DEFAULT_REGION``),
    ``force_path_style`` (default: on when an ``endpoint_url`` is given); without a key the
    credentials come from the environment.
    """
    ic = module()
    if ref.backend == "local":
        return ic.local_filesystem_storage(ref.path)
    so = dict(so or {})
    client = dict(so.get("client_kwargs") or {})
    bucket, _, prefix = ref.path.partition("/")
    ep = so.get("endpoint_url") or client.get("endpoint_url")
    kw: dict[str, Any] = {
        "bucket": bucket,
        "prefix": prefix or None,
        "region": so.get("region")
        or client.get("region_name")
        or os.environ.get("AWS_DEFAULT_REGION")
        or os.environ.get("AWS_REGION"),
        "endpoint_url": ep,
        "allow_http": bool(ep and str(ep).startswith("http://")),
        "force_path_style": bool(so.get("force_path_style", ep is not None)),
    }
    if so.get("anon"):
        kw["anonymous"] = True
    elif so.get("key"):
        kw.update(access_key_id=so["key"], secret_access_key=so.get("secret"))
        kw["session_token"] = so.get("token")
    else:
        kw["from_env"] = True
    return ic.s3_storage(**kw)


def config(so: Mapping[str, Any] | None):
    """Repository settings: the S3 client's retries (``config_kwargs.retries.max_attempts``)."""
    ic = module()
    retries = ((so or {}).get("config_kwargs") or {}).get("retries") or {}
    if not retries.get("max_attempts"):
        return None
    tries = ic.StorageRetriesSettings(max_tries=int(retries["max_attempts"]))
    return ic.RepositoryConfig(storage=ic.StorageSettings(retries=tries))


def open_repository(ref: IcechunkRef, so: Mapping[str, Any] | None, *, create: bool = False):
    """The repository of ``ref``; created when absent if ``create``.

    Raises
    ------
    StoreError
        Nothing (or something else) is there, or the storage does not answer.
    """
    ic = module()
    with translated(ref, "open the repository"):
        where = storage(ref, so)
        if create:
            if ref.backend == "local" and os.path.isfile(ref.path):
                raise StoreError(f"{ref.repository}: a file is there; choose another path")
            return retried(lambda: ic.Repository.open_or_create(where, config(so)), tries_of(so))
        if not exists(ref, so):
            raise StoreError(
                f"{ref.repository}: no Icechunk repository there; check the URL, or create one "
                "by writing to it (`fsdask ingest SOURCE icechunk://…`)"
            )
        return retried(lambda: ic.Repository.open(where, config(so)), tries_of(so))


def exists(ref: IcechunkRef, so: Mapping[str, Any] | None) -> bool:
    """Whether a repository is at ``ref`` (not whether its group exists)."""
    if ref.backend == "local" and not os.path.isdir(ref.path):
        return False  # (asking Icechunk would make the folder)
    with translated(ref, "reach the repository"):
        where = storage(ref, so)
        return bool(retried(lambda: module().Repository.exists(where), tries_of(so)))


def resolve(repo: Any, ref: IcechunkRef) -> str:
    """The snapshot id ``ref`` names now (its ``at``, snapshot, tag or branch tip)."""
    if ref.at:
        return ref.at
    try:
        if ref.snapshot:
            repo.lookup_snapshot(ref.snapshot)
            return ref.snapshot
        if ref.tag:
            return repo.lookup_tag(ref.tag)
        return repo.lookup_branch(ref.on_branch)
    except Exception as exc:
        if not re.search(r"not found|invalid snapshot id", str(exc), re.IGNORECASE):
            raise  # the storage failed, not the name: said (and retried) by the caller
        names = (
            sorted(repo.list_tags() if ref.tag else repo.list_branches())
            if not ref.snapshot
            else []
        )
        known = f" (there: {', '.join(names[:8])})" if names else ""
        raise StoreError(
            f"{ref.repository}: no {ref.version}{known} ({first_line(exc)}); check the URL's "
            "branch=, tag= or snapshot= — `fsdask history` lists the snapshots of past runs"
        ) from None


def pinned(ref: IcechunkRef, so: Mapping[str, Any] | None) -> IcechunkRef:
    """``ref`` with ``at`` = the snapshot it names now (an uncommitted one inside a batch)."""
    if ref.at:
        return ref
    run = _BATCH.get()
    if run is not None and run.pending(ref):
        return ref.replace(at=run.placeholder(ref))
    repo = open_repository(ref, so)
    with translated(ref, f"look up {ref.version}"):
        at = retried(lambda: resolve(repo, ref), tries_of(so))
    READS[(ref.repository, ref.version)] = at
    return ref.replace(at=at)


def read_store(ref: IcechunkRef, so: Mapping[str, Any] | None) -> Any:
    """A store reading ``ref``'s snapshot (inside a batch: its branch's uncommitted writes)."""
    run = _BATCH.get()
    if run is not None and (run.pending(ref) or (ref.at or "").startswith(PENDING)):
        return RetryingStore(read_view(run.session(ref, so).store), tries_of(so))
    ref = pinned(ref, so)
    repo = open_repository(ref, so)
    with translated(ref, f"open {ref.version} for reading"):
        session = retried(lambda: repo.readonly_session(snapshot_id=ref.at), tries_of(so))
        return RetryingStore(session.store, tries_of(so))


def read_view(store: Any) -> Any:
    """A read-only view of a writable session's store, with its uncommitted changes, that
    pickles to distributed workers (Icechunk refuses to pickle a writable store, which
    could write; this one cannot)."""
    try:
        from icechunk.store import IcechunkStore

        return IcechunkStore(store=store._store, for_fork=True, read_only=True)
    except Exception:  # another Icechunk: the writable store (threads only)
        return store


def version_fingerprint(ref: IcechunkRef, so: Mapping[str, Any] | None) -> dict:
    """The fingerprint of an input in a repository: its snapshot id (no listing, no reads)."""
    at = pinned(ref, so).at
    fp = {"kind": "icechunk", "repository": ref.repository, "version": ref.version, "snapshot": at}
    return fp | ({"group": ref.group} if ref.group else {})


def as_of(ref: IcechunkRef, so: Mapping[str, Any] | None, version: str) -> IcechunkRef:
    """``ref`` naming ``version`` instead of its branch: a tag of its repository, else a
    snapshot id of it (a StoreError when it is neither)."""
    repo = open_repository(ref, so)
    with translated(ref, f"look up {version!r}"):
        tags = retried(repo.list_tags, tries_of(so))
        target = ref.replace(branch=None, tag=None, snapshot=None, at=None)
        target = (
            target.replace(tag=version) if version in tags else target.replace(snapshot=version)
        )
        retried(lambda: resolve(repo, target), tries_of(so))  # it exists
    return target


# ------------------------------------------------------------------------------ writing
def describe_write(kind: str, ref: IcechunkRef, inputs: Any = ()) -> str:
    """One line for a commit message: the command, what it wrote, its inputs' snapshots."""
    shown = []
    for url in inputs:
        if url is None:
            continue
        if is_icechunk_url(url):
            src = IcechunkRef.parse(str(url))
            run = _BATCH.get()
            made = run is not None and run.pending(src)
            at = "this run" if made else src.at or READS.get((src.repository, src.version), "?")
            shown.append(f"{src.repository}{'#' + src.group if src.group else ''} @ {at}")
        else:
            shown.append(str(url).split("?", 1)[0])
    where = ref.group or "/"
    return f"fsdask {WRITERS.get(kind, 'write')}: {kind} {where}" + (
        f" from {', '.join(shown)}" if shown else ""
    )


def check_writable(ref: IcechunkRef) -> None:
    """Refuse writing to a tag or a snapshot: only a branch moves."""
    if ref.on_branch is None or ref.at:
        raise ParameterError(
            f"{ref.url}: outputs are committed to a branch; {ref.version} cannot change — "
            "name a branch (branch=…, default main)"
        )


def landed(repo: Any, ref: IcechunkRef, base: str, message: str, tries: int) -> str | None:
    """After a failed commit: the branch's tip if it is this commit (the failure was the reply,
    not the write), None if the branch is still at ``base``.

    Raises
    ------
    StoreError
        Another writer's commit is on the branch, or the branch cannot be looked up.
    """
    with translated(ref, f"look up branch {ref.on_branch} after a failed commit"):
        tip = retried(lambda: repo.lookup_branch(ref.on_branch), tries)
        if tip == base:
            return None
        info = retried(lambda: repo.lookup_snapshot(tip), tries)
    if info.message == message and info.parent_id == base:
        return tip
    raise StoreError(
        f"{ref.repository}: another writer committed to branch {ref.on_branch} while this ran "
        f"({(info.message.splitlines() or [''])[0][:60]!r}); nothing of this run was committed and the branch keeps the "
        "other commit — run again"
    )


def commit(session: Any, repo: Any, ref: IcechunkRef, message: str, tries: int = 5) -> str | None:
    """Commit ``session`` to ``ref``'s branch; return the new snapshot id (None: no change).

    A commit that fails in the storage is looked up (:func:`landed`) and, while the branch
    is unchanged and the failure transient (a reply that broke off), made again.

    Raises
    ------
    StoreError
        One line: another writer committed to the branch since the session began (nothing
        of this session is committed; run again), or the commit failed in the storage (the
        branch is where it was).
    """
    if not session.has_uncommitted_changes:
        return None
    from fsdask.version import current

    base = session.snapshot_id
    for attempt in range(tries):
        try:
            return session.commit(message, metadata={"fsdask_version": current()})
        except Exception as exc:
            tip = landed(repo, ref, base, message, tries)
            if tip is not None:
                return tip
            if attempt + 1 < tries and transient(exc):
                time.sleep(min(0.05 * 2**attempt, 1.0))
                continue
            raise StoreError(
                f"{ref.repository}: the commit to branch {ref.on_branch} failed "
                f"({type(exc).__name__}: {first_line(exc)}); the branch is where it was — "
                "check the storage and run again"
            ) from None
    return None  # (not reached)


def branch_session(ref: IcechunkRef, so: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """(repository, writable session on ``ref``'s branch); repository and branch (from
    ``main``) are created when absent."""
    repo = open_repository(ref, so, create=True)
    with translated(ref, f"open {ref.version} for writing"):
        if ref.on_branch not in retried(repo.list_branches, tries_of(so)):
            repo.create_branch(ref.on_branch, repo.lookup_branch(DEFAULT_BRANCH))
        return repo, retried(lambda: repo.writable_session(ref.on_branch), tries_of(so))


@contextlib.contextmanager
def writing(
    ref: IcechunkRef, so: Mapping[str, Any] | None, *, kind: str, inputs: Any = ()
) -> Iterator[Any]:
    """Yield a writable store on ``ref``'s branch; commit what the block wrote, once it succeeds.

    Outside :func:`batch` the block's writes are one commit whose message names the command
    and the input snapshots; a block that raises commits nothing.  Inside a batch they join
    the run's session of that branch (committed by :meth:`Batch.commit`).  Writes run on
    dask's threaded scheduler: a writable session lives in this process.
    """
    import dask

    check_writable(ref)
    message = describe_write(kind, ref, inputs)
    run = _BATCH.get()
    repo, session = run.writer(ref, so) if run is not None else branch_session(ref, so)
    try:
        storage_errors = (module().IcechunkError, OSError)  # a bug of the writer stays one
        with dask.config.set(scheduler="threads"):
            with translated(ref, f"write the {kind}", storage_errors):
                yield JsonSafeStore(session.store)
    except BaseException:
        if run is not None:
            run.failed = True
        raise
    if run is not None:
        run.parts.append(message)
        return
    commit(session, repo, ref, message, tries_of(so))


# ------------------------------------------------------------------------------ a run's batch
class Batch:
    """The writable sessions of one pipeline run, one per repository branch.

    Every output the run writes to a branch goes into that branch's session; the steps read
    each other's outputs from it; :meth:`commit` commits each session once, at the end.  A
    run that fails commits nothing.

    Parameters
    ----------
    title : str
        The first part of the commit message (``fsdask run CONFIG``).
    """

    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = []
        self.failed = False
        self.sessions: dict[tuple[str, str], tuple[IcechunkRef, Any, Any, int]] = {}
        self.token = uuid.uuid4().hex[:8]

    @staticmethod
    def key(ref: IcechunkRef) -> tuple[str, str]:
        """(repository, branch): the sessions are one per key."""
        return (ref.repository, ref.on_branch or "")

    def writer(self, ref: IcechunkRef, so: Mapping[str, Any] | None) -> tuple[Any, Any]:
        """(repository, the run's writable session on ``ref``'s branch), opened on first use."""
        key = self.key(ref)
        if key not in self.sessions:
            self.sessions[key] = (ref, *branch_session(ref, so), tries_of(so))
        return self.sessions[key][1:3]

    def session(self, ref: IcechunkRef, so: Mapping[str, Any] | None) -> Any:
        """The run's writable session on ``ref``'s branch (opened on first use)."""
        return self.writer(ref, so)[1]

    def pending(self, ref: IcechunkRef) -> bool:
        """Whether the run wrote to ``ref``'s branch (and reads of it must see that)."""
        return ref.on_branch is not None and not ref.at and self.key(ref) in self.sessions

    def placeholder(self, ref: IcechunkRef) -> str:
        """The snapshot id standing for ``ref``'s branch until the run commits."""
        return f"{PENDING}{self.token}-{ref.on_branch}"

    def commit(self) -> list[tuple[IcechunkRef, str, str]]:
        """Commit every session; return (branch's reference, placeholder, new snapshot id)."""
        if self.failed:
            raise StoreError("a step's write failed; nothing of this run was committed")
        message = f"{self.title}: " + "; ".join(self.parts or ["no outputs"])
        made = []
        for ref, repo, session, tries in self.sessions.values():
            snapshot = commit(session, repo, ref, message, tries)
            if snapshot:
                made.append((ref, self.placeholder(ref), snapshot))
        return made


_BATCH: contextvars.ContextVar[Batch | None] = contextvars.ContextVar(
    "icechunk_batch", default=None
)


@contextlib.contextmanager
def batch(title: str) -> Iterator[Batch]:
    """Collect every Icechunk write in the block into one commit per branch (see :class:`Batch`).

    The caller commits with :meth:`Batch.commit` inside the block; what is not committed when
    the block ends is discarded (the sessions are dropped: nothing reaches the branch).
    """
    run = Batch(title)
    token = _BATCH.set(run)
    try:
        yield run
    finally:
        _BATCH.reset(token)
