"""fsdask datasets as Zarr v3 stores.

Layout: an xarray Dataset with ``X(sample, feature)`` chunked (all samples, feature block),
optional ``y(sample)`` or ``Y(sample, target)``, coordinates ``sample`` and ``feature``,
and provenance attributes.  The attribute ``fsdask_complete`` is written *last*; a store
without it was interrupted mid-write and is refused by :func:`open_dataset`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import logging
import os
from typing import Any, Iterator, Mapping

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr

from fsdask._config import memory_budget as _memory_budget
from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size
from fsdask.errors import FsdaskError, InputError, StoreError
from fsdask.io.outputs import COMPLETE_ATTR, KIND_ATTR, publish

log = logging.getLogger("fsdask")
FORMAT_ATTR = "fsdask_format"
FORMAT_VERSION = 1


def _is_local(url: str) -> bool:
    return "://" not in str(url) or str(url).startswith("file://")


def _zarr_kwargs(url: str, storage_options: Mapping[str, Any] | None) -> dict:
    """Keyword arguments that let xarray/zarr reach ``url`` (local path or fsspec URL)."""
    if _is_local(url):
        return {}
    if url.startswith("s3://"):
        try:
            import s3fs  # noqa: F401
        except ImportError as exc:
            raise StoreError(
                f"{url}: s3:// needs s3fs; install the extra: pip install 'fsdask[s3]'"
            ) from exc
    return {"storage_options": dict(storage_options or {})}


def _local(url: str) -> str:
    return str(url).removeprefix("file://")


def safe_url(url: str) -> str:
    """``url`` with any ``user:password@`` part removed (for logs and provenance)."""
    url = str(url)
    if "://" in url and "@" in url.split("://", 1)[1].split("/", 1)[0]:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://{rest.split('@', 1)[1]}"
    return url


def _endpoint(storage_options: Mapping[str, Any] | None) -> str | None:
    so = dict(storage_options or {})
    return so.get("endpoint_url") or (so.get("client_kwargs") or {}).get("endpoint_url")


def check_reachable(
    url: str, storage_options: Mapping[str, Any] | None = None, timeout: float = 3.0
) -> None:
    """Fail fast with :class:`StoreError` when an explicit ``endpoint_url`` has nothing listening.

    Without this, botocore's and s3fs's retries take many seconds before reporting a
    connection error.  Only an explicit endpoint is probed (a TCP connect, no request).
    """
    import socket
    from urllib.parse import urlparse

    if _is_local(url):
        return
    ep = _endpoint(storage_options)
    if not ep:
        return
    u = urlparse(ep)
    host, port = u.hostname, u.port or (443 if u.scheme == "https" else 80)
    if not host:
        raise StoreError(
            f"{safe_url(url)}: endpoint_url {ep!r} is not a URL; use e.g. http://host:9000"
        )
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise StoreError(
            f"{safe_url(url)}: storage unreachable: nothing answers at {ep} "
            f"({type(exc).__name__}: {exc}); check endpoint_url and that the server "
            "is running and reachable from here"
        ) from None


def _fs(url: str, storage_options: Mapping[str, Any] | None):
    import fsspec

    return fsspec.core.url_to_fs(url, **dict(storage_options or {}))


def _exists(url: str, storage_options: Mapping[str, Any] | None) -> bool:
    """Whether anything is stored at ``url`` (local path or fsspec URL)."""
    if _is_local(url):
        return os.path.exists(_local(url))
    try:
        fs, path = _fs(url, storage_options)
        return bool(fs.exists(path.rstrip("/") + "/zarr.json") or fs.exists(path))
    except FileNotFoundError:
        return False
    except Exception as exc:
        raise StoreError(
            f"{safe_url(url)}: storage unreachable or unreadable ({type(exc).__name__}: {exc}); "
            f"{_storage_hint(url)}"
        ) from None


@contextlib.contextmanager
def atomic_store(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    overwrite: bool = False,
    kind: str = "dataset",
    inputs: tuple = (),
) -> Iterator[str]:
    """Yield a place to write the store for ``url``; publish it only if the block succeeds.

    See :func:`fsdask.io.outputs.publish`: the existing output is replaced only if it is an
    fsdask output of the same ``kind`` and ``overwrite`` is given, and only once the new one
    is complete.
    """
    url = os.fspath(url)
    check_reachable(url, storage_options)
    with publish(url, storage_options, kind=kind, overwrite=overwrite, inputs=inputs) as target:
        yield target


def checksum_encoding(names: Any, extra: Mapping[str, dict] | None = None) -> dict:
    """Zarr encoding giving every variable in ``names`` checksummed chunks.

    Zstd frames carry a content checksum that libzstd verifies on every decode, so a chunk
    whose bytes changed after writing fails to read instead of decoding to other numbers.
    """
    from zarr.codecs import ZstdCodec

    enc = {str(n): {"compressors": [ZstdCodec(level=0, checksum=True)]} for n in names}
    for n, e in (extra or {}).items():
        enc.setdefault(n, {}).update(e)
    return enc


def is_checksummed(array: Any) -> bool:
    """Whether a Zarr v3 array's chunks carry a checksum (zstd ``checksum`` or a crc32c codec)."""
    for codec in getattr(array.metadata, "codecs", ()):
        if getattr(codec, "checksum", False) or type(codec).__name__.lower().startswith("crc32c"):
            return True
    return False


class GuardedArray:
    """Read-only view of a stored Zarr array whose read errors name the store.

    A corrupted chunk surfaces deep inside a codec (``RuntimeError: Zstd decompression
    error``), lost storage as a botocore/aiohttp error; both become a :class:`StoreError`
    saying which store and which features could not be read, and what to do.  Every
    estimator and command reads X through this (it is what :func:`open_dataset` returns),
    so this is the one place where read failures are translated.
    """

    def __init__(self, array: Any, url: str):
        self.array = array
        self.url = safe_url(url)
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)
        self.ndim = len(self.shape)

    def _where(self, key: Any) -> str:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], slice):
            start, stop, _ = key[1].indices(self.shape[1])
            return f" (features {start}–{stop - 1})"
        return ""

    def _missing_chunks(self, key: Any) -> list[str]:
        """Keys of the stored chunks that ``key`` covers and that are absent from the store."""
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], slice)):
            return []
        from zarr.core.sync import sync

        start, stop, _ = key[1].indices(self.shape[1])
        width = self.array.chunks[1]
        store, prefix = self.array.store_path.store, self.array.store_path.path
        keys = [
            self.array.metadata.encode_chunk_key((0, j))
            for j in range(start // width, (stop - 1) // width + 1)
        ]
        keys = [f"{prefix}/{k}" if prefix else k for k in keys]
        return [k for k in keys if not sync(store.exists(k))]

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            block = np.asarray(self.array[key])
            # a chunk missing from the store reads as the fill value (NaN) without any error
            missing = (
                self._missing_chunks(key)
                if block.size and block.dtype.kind == "f" and np.isnan(block).all()
                else []
            )
            if missing:
                raise StoreError(
                    f"{self.url}: chunk(s) {', '.join(missing)} of X"
                    f"{self._where(key)} are missing from the store (deleted or never written); "
                    "re-create the store with `fsdask ingest`"
                )
            return block
        except (FsdaskError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            where = self._where(key)
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                f"{self.url}: cannot read X{where}: {type(exc).__name__}: {msg}; the chunk is "
                "corrupted or the storage failed — check the storage and retry, or re-create "
                "the store with `fsdask ingest`"
            ) from None


def _storage_hint(url: str) -> str:
    if _is_local(url):
        return "check the path"
    return (
        "check the URL, the endpoint and the credentials (environment variables or "
        "--storage-option key=value), and that the bucket exists"
    )


def open_dataset(
    url: Any,
    storage_options: Mapping[str, Any] | None = None,
    *,
    variable: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    label: str | None = None,
    rechunk_to: str | None = None,
    memory_budget: Any = None,
    nan_policy: str = "error",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    require_complete: bool = True,
    drop_unlabelled: bool = False,
) -> xr.Dataset:
    """Open a dataset lazily: an fsdask store, any Zarr v2/v3 store, an AnnData file/store or object.

    Parameters
    ----------
    url
        Local path or fsspec URL (``s3://bucket/data.zarr``) of a Zarr store (fsdask's, or
        written by xarray / zarr-python, v2 or v3, consolidated or not), an ``.h5ad`` file or
        an AnnData-on-Zarr store; or an in-memory ``anndata.AnnData``.
    storage_options
        Passed to fsspec (credentials, ``endpoint_url``, ``anon``, …).  Never logged or stored.
    variable
        The matrix to read (default: ``X``, else the only 2-D variable); AnnData: ``X``,
        ``raw`` or ``layers/NAME``.
    sample_dim, feature_dim
        Which dims are samples and features (matched by name, never by position).
    label
        The label variable (AnnData: an ``obs`` column, ``obs:cell_type``); default: a 1-D
        variable along the sample dim named as in :data:`fsdask.io.foreign.LABEL_NAMES`.
    rechunk_to, memory_budget
        Where a rechunked copy goes when the store's chunking cannot be re-blocked on the
        fly (default: a temporary directory), and the memory one task may use (bytes or
        ``"1GB"``; default: the dask config ``fsdask.memory-budget``, 1 GiB).
    nan_policy
        For sparse AnnData, what to do with NaN/Inf values (``error``, ``zero``, ``mean``,
        ``drop-feature``).
    require_complete
        Refuse fsdask stores whose write did not finish (default).
    drop_unlabelled
        Leave out the samples whose label is missing (NaN, None or blank) and say how many
        (attribute ``dropped_unlabelled_samples``); by default such labels are refused.

    Returns
    -------
    xarray.Dataset
        ``X(sample, feature)`` backed by dask in (all samples × feature block) chunks; ``y``
        when present.  A store fsdask did not write is only read, and its dataset has an
        attribute ``foreign`` saying so (shown by ``fsdask info``).
    """
    from fsdask.io import rechunk as _rechunk

    budget = _memory_budget(memory_budget)  # a bad size is refused before anything is read
    if not isinstance(url, (str, os.PathLike)):
        if type(url).__name__ == "AnnData":
            from fsdask.io.anndata import from_anndata

            ds = from_anndata(
                url, variable=variable, label=label, chunk_bytes=chunk_bytes, nan_policy=nan_policy
            )
            return _labelled(ds, drop_unlabelled)
        if hasattr(url, "tocsc") and hasattr(
            url, "nnz"
        ):  # scipy.sparse: dense one feature block at a time
            from fsdask.io.anndata import sparse_blocks

            return xr.Dataset(
                {"X": (("sample", "feature"), sparse_blocks(url, chunk_bytes))},
                coords={"sample": np.arange(url.shape[0]), "feature": np.arange(url.shape[1])},
                attrs={"source": f"in-memory {type(url).__name__}"},
            )
        raise InputError(
            f"open_dataset: expected a path, a URL, an AnnData object or a scipy.sparse matrix, "
            f"got {type(url).__name__}"
        )
    url = os.fspath(url)
    shown = safe_url(url)
    if _is_local(url) and not os.path.exists(_local(url)):
        raise StoreError(
            f"{url}: no such file or directory; give the path of a Zarr store, an .h5ad file "
            "or create a store with `fsdask ingest`"
        )
    check_reachable(url, storage_options)
    if _is_hdf5(url):
        from fsdask.io.anndata import open_anndata

        ds = open_anndata(
            url,
            storage_options,
            hdf5=True,
            variable=variable,
            label=label,
            chunk_bytes=chunk_bytes,
            nan_policy=nan_policy,
            rechunk_to=rechunk_to,
        )
        return _labelled(ds, drop_unlabelled)
    node = _open_node(url, storage_options)
    attrs = dict(node.attrs) if node is not None else {}
    if node is None or COMPLETE_ATTR in attrs or FORMAT_ATTR in attrs or KIND_ATTR in attrs:
        # labels were checked when fsdask wrote it
        return _open_fsdask(url, storage_options, require_complete=require_complete)
    from fsdask.io.anndata import is_anndata_group, open_anndata

    if is_anndata_group(node):
        ds = open_anndata(
            url,
            storage_options,
            hdf5=False,
            variable=variable,
            label=label,
            chunk_bytes=chunk_bytes,
            nan_policy=nan_policy,
            rechunk_to=rechunk_to,
        )
        return _labelled(ds, drop_unlabelled)
    from fsdask.io.foreign import open_foreign_zarr

    target = _local(url) if _is_local(url) else url
    ds = open_foreign_zarr(
        node,
        target,
        _zarr_kwargs(url, storage_options),
        variable=variable,
        sample_dim=sample_dim,
        feature_dim=feature_dim,
        label=label,
    )
    X = _rechunk.to_feature_blocks(
        ds["X"].data,
        where=shown,
        memory_budget=budget,
        chunk_bytes=chunk_bytes,
        rechunk_to=rechunk_to,
        storage_options=storage_options,
    )
    ds["X"] = (("sample", "feature"), X)
    ds.attrs["store"] = shown
    return _labelled(ds, drop_unlabelled)


def _labelled(ds: xr.Dataset, drop: bool) -> xr.Dataset:
    """Refuse missing labels (NaN, as the openers encode them), or drop their samples."""
    where = ds.attrs.get("store") or ds.attrs.get("source") or "the dataset"
    if "y" not in ds:
        if drop:
            raise InputError(
                f"{where}: --drop-unlabelled leaves out samples without a label, but no label "
                "was found; name it with --label"
            )
        return ds
    y = ds["y"].values
    missing = np.isnan(y) if y.dtype.kind == "f" else np.zeros(y.shape, bool)
    if not missing.any():
        return ds
    name = ds["y"].attrs.get("label", "y")
    if not drop:
        first = ", ".join(str(s) for s in ds["sample"].values[missing][:3])
        raise InputError(
            f"{where}: label {name!r} is missing for {int(missing.sum())} sample(s) (NaN, None "
            f"or blank; first: {first}); fill them in, or leave them out with --drop-unlabelled"
        )
    keep = np.flatnonzero(~missing)
    if keep.size == 0:
        raise InputError(f"{where}: no sample has a label {name!r}; nothing would be left")
    log.warning("%s: left out %d sample(s) without a label", where, missing.sum())
    out = ds.isel(sample=keep)
    if "class_names" in ds.attrs:  # class codes: whole numbers again
        out["y"] = out["y"].astype(np.int64)
    out.attrs["dropped_unlabelled_samples"] = int(missing.sum())
    return out


def _is_hdf5(url: str) -> bool:
    """An HDF5 file (.h5ad): by its signature when local, by its suffix otherwise."""
    if _is_local(url):
        path = _local(url)
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as fh:
            return fh.read(8) == b"\x89HDF\r\n\x1a\n"
    return url.rstrip("/").lower().endswith((".h5ad", ".h5", ".hdf5"))


def _open_node(url: str, storage_options: Mapping[str, Any] | None) -> Any:
    """The store's root group (or root array), any Zarr format; ``None`` if Zarr cannot open it."""
    target = _local(url) if _is_local(url) else url
    try:
        return zarr.open(target, mode="r", **_zarr_kwargs(url, storage_options))
    except Exception:
        return None  # the fsdask path below reports why, with its established messages


def _open_fsdask(
    url: str, storage_options: Mapping[str, Any] | None, *, require_complete: bool = True
) -> xr.Dataset:
    """Open a store written by fsdask (Zarr v3, the completion marker checked)."""
    url = os.fspath(url)
    shown = safe_url(url)
    if _is_local(url) and not os.path.exists(_local(url)):
        raise StoreError(
            f"{url}: no such file or directory; give the path of a Zarr store made by "
            "`fsdask ingest` or fsdask.write_dataset"
        )
    check_reachable(url, storage_options)
    target = _local(url) if _is_local(url) else url
    kwargs = _zarr_kwargs(url, storage_options)
    try:
        ds = xr.open_zarr(target, consolidated=False, zarr_format=3, chunks={}, **kwargs)
    except StoreError:
        raise
    except (FileNotFoundError, KeyError) as exc:
        if _is_zarr_group(target, kwargs):
            raise StoreError(
                f"{shown}: a Zarr store but not an fsdask dataset ({type(exc).__name__}: {exc}); "
                "create one with `fsdask ingest`"
            ) from None
        raise StoreError(
            f"{shown}: not a Zarr v3 store ({type(exc).__name__}: {exc}); "
            f"{_storage_hint(url)}, or create it with `fsdask ingest`"
        ) from None
    except PermissionError as exc:
        raise StoreError(f"{shown}: access denied ({exc}); {_storage_hint(url)}") from None
    except OSError as exc:
        raise StoreError(
            f"{shown}: storage unreachable or unreadable ({type(exc).__name__}: {exc}); "
            f"{_storage_hint(url)}"
        ) from None
    except Exception as exc:
        raise StoreError(
            f"{shown}: could not open as a Zarr v3 dataset ({type(exc).__name__}: {exc}); "
            f"{_storage_hint(url)}"
        ) from None
    if "X" not in ds:
        raise StoreError(
            f"{shown}: a Zarr store but not an fsdask dataset (no variable 'X'; found "
            f"{sorted(ds.data_vars) or 'nothing'}); create one with `fsdask ingest`"
        )
    if set(ds["X"].dims) != {"sample", "feature"}:
        raise StoreError(
            f"{shown}: variable X has dims {ds['X'].dims}; expected ('sample', 'feature') — "
            "not an fsdask dataset; create one with `fsdask ingest`"
        )
    if require_complete and not ds.attrs.get(COMPLETE_ATTR, False):
        raise StoreError(
            f"{shown}: the store is incomplete (its write was interrupted or is still "
            "running); re-run the ingest/write that made it"
        )
    ds["X"], verified = _guarded_X(ds, target, kwargs, url)
    for name in [v for v in ds.data_vars if v != "X"]:
        try:  # labels are small: read (and so verify) them now, with a clear error
            ds[name] = ds[name].load()
        except Exception as exc:
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                f"{shown}: cannot read {name!r} ({type(exc).__name__}: {msg}); the chunk is "
                "corrupted or the storage failed — re-create the store with `fsdask ingest`"
            ) from None
    ds.attrs["store"] = shown
    ds.attrs["verified"] = bool(verified)
    if not verified:
        log.warning(
            "%s: written without chunk checksums (before fsdask 0.2?): reads are unverified; "
            "`fsdask verify` checks it against its fingerprint, re-ingesting adds checksums",
            shown,
        )
    return plain_strings(ds)


def plain_strings(ds: xr.Dataset) -> xr.Dataset:
    """Variable-length strings as object arrays, xarray's usual representation.

    Zarr v3 reads them as NumPy's ``StringDType``, on which ``.astype(str)`` raises
    ("cannot cast dtype StringDType() to StrDType") and which older pandas code does not
    expect; feature and sample ids are converted once here, lazily for dask-backed variables.
    """
    fixed = {
        name: var.astype(object) for name, var in ds.variables.items() if var.dtype.kind == "T"
    }
    if not fixed:
        return ds
    coords = {k: v for k, v in fixed.items() if k in ds.coords}
    data = {k: v for k, v in fixed.items() if k not in ds.coords}
    return ds.assign_coords(coords).assign(data)


def _is_zarr_group(target: str, kwargs: Mapping[str, Any]) -> bool:
    try:
        zarr.open_group(target, mode="r", **kwargs)
        return True
    except Exception:
        return False


def _guarded_X(ds: xr.Dataset, target: str, kwargs: dict, url: str) -> tuple[xr.DataArray, bool]:
    """X as a dask array read through :class:`GuardedArray` (chunks = the stored chunks), and
    whether its chunks are checksummed."""
    from dask.base import tokenize

    try:
        arr = zarr.open_group(target, mode="r", zarr_format=3, **kwargs)["X"]
    except Exception as exc:
        raise StoreError(
            f"{safe_url(url)}: cannot open X ({type(exc).__name__}: {exc}); {_storage_hint(url)}"
        ) from None
    dims = tuple(arr.metadata.dimension_names or ds["X"].dims)
    guarded = GuardedArray(arr, url)
    name = "fsdask-X-" + tokenize(
        safe_url(url), ds.attrs.get("fingerprint"), ds.attrs.get("created"), arr.shape, arr.chunks
    )
    data = da.from_array(
        guarded,
        chunks=arr.chunks,
        name=name,
        lock=False,
        asarray=False,
        fancy=False,
        meta=np.empty((0, 0), dtype=guarded.dtype),
        inline_array=True,
    )
    X = xr.DataArray(
        data, dims=dims, coords={d: ds[d] for d in dims if d in ds.coords}, attrs=ds["X"].attrs
    )
    X.encoding = ds["X"].encoding
    return X.transpose("sample", "feature"), is_checksummed(arr)


def _block_digests(X: da.Array) -> da.Array:
    """(number of feature blocks, 16) uint8: a blake2b digest of each (all samples × block) block."""
    X = X.rechunk({0: -1})

    def digest(b: np.ndarray) -> np.ndarray:
        h = hashlib.blake2b(np.ascontiguousarray(b).tobytes(), digest_size=16).digest()
        return np.frombuffer(h, dtype=np.uint8)[None, :]

    return X.map_blocks(digest, chunks=((1,), (16,) * len(X.chunks[1])), dtype=np.uint8).reshape(
        -1, 16
    )


def combine_digests(digests: np.ndarray, shape: tuple, dtype: Any) -> str:
    """Fingerprint of a dataset from its per-block digests (order matters)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((tuple(shape), str(np.dtype(dtype)))).encode())
    h.update(np.ascontiguousarray(digests).tobytes())
    return h.hexdigest()


def verify_dataset(
    url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None
) -> dict:
    """Re-read every block of X and compare its digest with the one recorded at write time.

    Returns ``{"fingerprint", "blocks", "checksummed"}``; raises :class:`StoreError` naming the
    store and the feature ranges whose content differs from what was written.
    """
    ds = open_dataset(url, storage_options)
    shown = ds.attrs["store"]
    recorded = ds.attrs.get("fingerprint")
    if not recorded:
        raise StoreError(
            f"{shown}: no recorded fingerprint, so there is nothing to verify against; "
            "re-create the store with `fsdask ingest`"
        )
    X = ds["X"].data
    digests = _block_digests(X).compute()
    computed = combine_digests(digests, X.shape, X.dtype)
    if computed != recorded:
        bounds = np.cumsum((0,) + X.chunks[1])
        stored = ds.attrs.get("block_digests")
        bad = [
            j
            for j in range(len(X.chunks[1]))
            if stored and stored[32 * j : 32 * (j + 1)] != digests[j].tobytes().hex()
        ]
        where = (
            ", ".join(f"{bounds[j]}–{bounds[j + 1] - 1}" for j in bad[:5])
            + (" …" if len(bad) > 5 else "")
            if bad
            else "unknown (no per-block digests recorded)"
        )
        raise StoreError(
            f"{shown}: content differs from what was written (fingerprint {computed} ≠ recorded "
            f"{recorded}); features {where}; re-create the store with `fsdask ingest`"
        )
    return {
        "fingerprint": computed,
        "blocks": len(X.chunks[1]),
        "checksummed": bool(ds.attrs["verified"]),
    }


def dataset_fingerprint(X: da.Array | np.ndarray) -> str:
    """Content fingerprint of X: blake2b over per-feature-block digests (one pass)."""
    X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X))
    return combine_digests(_block_digests(X).compute(), X.shape, X.dtype)


def _provenance(source: str, X: da.Array, extra: Mapping[str, Any] | None = None) -> dict:
    from fsdask import __version__

    attrs = {
        "source": str(source),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "fsdask_version": __version__,
        "shape": [int(s) for s in X.shape],
        "dtype": str(X.dtype),
        FORMAT_ATTR: FORMAT_VERSION,
    }
    attrs.update(extra or {})
    return attrs


def write_dataset(
    ds: xr.Dataset,
    url: str | os.PathLike,
    *,
    storage_options: Mapping[str, Any] | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    block: int | None = None,
    overwrite: bool = False,
    source: str = "in-memory",
    attrs: Mapping[str, Any] | None = None,
    inputs: tuple = (),
) -> str:
    """Write an fsdask dataset to a Zarr v3 store; return its content fingerprint.

    X is rechunked so that every dask block is exactly one Zarr chunk (all samples ×
    ``block`` features, the last block possibly shorter): parallel writers never share a
    chunk, which is what corrupts misaligned writes (dask#12583, zarr-python#3514).
    The completion marker is written last.
    """
    url = os.fspath(url)
    if "X" not in ds:
        raise InputError("the Dataset to write has no variable 'X'")
    X = ds["X"]
    if X.dims != ("sample", "feature"):
        X = X.transpose("sample", "feature")
    n, p = X.shape
    block = block or feature_block_size(n, X.dtype.itemsize, chunk_bytes)
    block = min(block, p)
    data = (
        X.data
        if isinstance(X.data, da.Array)
        else da.from_array(np.asarray(X.data), chunks=(n, block))
    )
    data = data.rechunk((n, block))
    out = xr.Dataset(coords={k: v for k, v in ds.coords.items()})
    out["X"] = (("sample", "feature"), data)
    for name, var in ds.data_vars.items():
        if name != "X":
            out[name] = var.chunk() if hasattr(var, "chunk") else var
    for c in ("sample", "feature"):
        if c not in out.coords:
            out = out.assign_coords({c: np.arange(out.sizes[c])})
        if out[c].dtype.kind in "UT" or out[c].dtype == object:
            out = out.assign_coords({c: np.array([str(v) for v in out[c].values], dtype=object)})
    # the format attribute goes in first, so an interrupted write is recognisable as fsdask's
    # (and refused as incomplete) rather than opened as a foreign store
    out.attrs = {
        **{k: v for k, v in ds.attrs.items() if k != COMPLETE_ATTR},
        FORMAT_ATTR: FORMAT_VERSION,
    }
    encoding = checksum_encoding(out.variables, {"X": {"chunks": (n, block)}})
    kwargs = _zarr_kwargs(url, storage_options)
    with atomic_store(url, storage_options, overwrite=overwrite, inputs=inputs) as target:
        try:
            write = out.to_zarr(
                target,
                mode="w",
                zarr_format=3,
                consolidated=False,
                encoding=encoding,
                compute=False,
                **kwargs,
            )
            _, digests = dask.compute(write, _block_digests(data))
        except (PermissionError, OSError) as exc:
            if isinstance(exc, FsdaskError):
                raise
            raise StoreError(
                f"{safe_url(url)}: could not write ({type(exc).__name__}: {exc}); "
                f"{_storage_hint(url)}"
            ) from None
        fingerprint = combine_digests(digests, data.shape, data.dtype)
        final_attrs = _provenance(source, data, attrs)
        final_attrs.update(
            {
                "fingerprint": fingerprint,
                "chunk_features": int(block),
                "block_digests": np.ascontiguousarray(digests).tobytes().hex(),
            }
        )
        mark_complete(target, kwargs, {**out.attrs, **final_attrs})
    return fingerprint


def mark_complete(
    target: str, zarr_kwargs: Mapping[str, Any], attrs: Mapping[str, Any], kind: str = "dataset"
) -> None:
    """Write the final attributes and, last, the completion marker and the output's kind."""
    group = zarr.open_group(target, mode="r+", zarr_format=3, **zarr_kwargs)
    group.attrs.update(dict(attrs))
    group.attrs.update({COMPLETE_ATTR: True, KIND_ATTR: kind})


def describe(ds: xr.Dataset, url: str = "") -> str:
    """Human-readable summary of an fsdask dataset (``fsdask info``)."""
    X = ds["X"]
    n, p = X.shape
    chunks = X.chunks or ((n,), (p,))
    lines = [
        f"dataset   {url}",
        f"X         {n} samples × {p} features, {X.dtype}",
        f"chunks    {len(chunks[1])} feature block(s) of {chunks[1][0]} features "
        f"({chunks[1][0] * n * X.dtype.itemsize / 2**20:.1f} MiB each)",
    ]
    if "foreign" in ds.attrs:
        lines.append(f"foreign   {ds.attrs['foreign']}")
    if "y" in ds:
        y = ds["y"].values
        if y.dtype.kind in "iub" or y.dtype.kind in "OUT":
            vals, counts = np.unique(y, return_counts=True)
            names = ds.attrs.get("class_names")
            parts = []
            for v, c in zip(vals, counts):
                label = (
                    names[int(v)]
                    if names is not None and y.dtype.kind in "iu" and 0 <= v < len(names)
                    else v
                )
                parts.append(f"{label}: {c}")
            lines.append(
                f"y         {len(vals)} classes ({', '.join(parts[:12])}{' …' if len(parts) > 12 else ''})"
            )
        else:
            lines.append(f"y         continuous, mean {np.nanmean(y):.4g}, sd {np.nanstd(y):.4g}")
    else:
        lines.append("y         none (unlabeled)")
    for key in ("source", "created", "fingerprint", "fsdask_version"):
        if key in ds.attrs:
            lines.append(f"{key:<9} {ds.attrs[key]}")
    return "\n".join(lines)
