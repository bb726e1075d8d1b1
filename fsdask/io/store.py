"""The fsdask format: datasets as Zarr v3 stores — write, open, verify, fingerprint.

Layout: an xarray Dataset with ``X(sample, feature)`` chunked (all samples, feature block),
optional ``y(sample)`` or ``Y(sample, target)``, coordinates ``sample`` and ``feature``,
and provenance attributes.  The attribute ``fsdask_complete`` is written *last*; a store
without it was interrupted mid-write and is refused by :func:`open_fsdask`.  Other
formats are read by the readers above this module and dispatched by
:func:`fsdask.io.open.open_dataset`.
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

from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size
from fsdask.errors import FsdaskError, InputError, StoreError
from fsdask.io.guard import GuardedArray, guarded_dask
from fsdask.io.location import COMPLETE_ATTR, KIND_ATTR, Location, safe_url

__all__ = [
    "COMPLETE_ATTR",
    "FORMAT_ATTR",
    "FORMAT_VERSION",
    "KIND_ATTR",
    "GuardedArray",
    "atomic_store",
    "block_digests",
    "checksum_encoding",
    "combine_digests",
    "dataset_fingerprint",
    "describe",
    "is_checksummed",
    "mark_complete",
    "open_fsdask",
    "plain_strings",
    "provenance",
    "safe_url",
    "verify_dataset",
    "write_dataset",
]

log = logging.getLogger("fsdask")
FORMAT_ATTR = "fsdask_format"
FORMAT_VERSION = 1


#: per-feature test results a method may give (p-value, Benjamini–Hochberg adjusted p-value,
#: direction of the effect); result stores, the report and the AnnData write-back carry those a result has, in this order
TEST_COLUMNS = ("pvalue", "pvalue_adj", "direction")


@contextlib.contextmanager
def atomic_store(
    url: str | os.PathLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    overwrite: bool = False,
    kind: str = "dataset",
    inputs: tuple = (),
) -> Iterator[str]:
    """Yield a place to write the store for ``url``; publish it only if the block succeeds.

    See :meth:`fsdask.io.location.Location.publish`: the existing output is replaced only if
    it is an fsdask output of the same ``kind`` and ``overwrite`` is given, and only once the
    new one is complete.
    """
    loc = Location.of(url, storage_options)
    loc.check_reachable()
    with loc.publish(kind=kind, overwrite=overwrite, inputs=inputs) as target:
        yield target


def is_fsdask_attrs(attrs: Mapping[str, Any]) -> bool:
    """Whether a Zarr root's attributes mark a store fsdask wrote (complete or not)."""
    return COMPLETE_ATTR in attrs or FORMAT_ATTR in attrs or KIND_ATTR in attrs


def open_fsdask(
    url: str | os.PathLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    require_complete: bool = True,
) -> xr.Dataset:
    """Open a store written by fsdask (Zarr v3, the completion marker checked).

    Parameters
    ----------
    url : str or path
        Local path or fsspec URL.
    storage_options : mapping, optional
        Passed to fsspec.
    require_complete : bool, default True
        Refuse a store whose write did not finish.

    Returns
    -------
    xarray.Dataset
        ``X`` lazy (read through :class:`~fsdask.io.guard.GuardedArray`, one task per stored
        chunk); the other variables (labels, small) loaded and so verified.
    """
    loc = Location.of(url, storage_options)
    if loc.is_local and not loc.exists():
        raise StoreError(
            f"{loc.url}: no such file or directory; give the path of a Zarr store made by "
            "`fsdask ingest` or fsdask.write_dataset"
        )
    loc.check_reachable()
    ds = _open_zarr(loc)
    _check_layout(ds, loc.shown, require_complete)
    ds["X"], verified = _guarded_X(ds, loc)
    for name in [v for v in ds.data_vars if v != "X"]:
        try:  # labels are small: read (and so verify) them now, with a clear error
            ds[name] = ds[name].load()
        except Exception as exc:
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                f"{loc.shown}: cannot read {name!r} ({type(exc).__name__}: {msg}); the chunk is "
                "corrupted or the storage failed — re-create the store with `fsdask ingest`"
            ) from None
    ds.attrs["store"] = loc.shown
    ds.attrs["verified"] = bool(verified)
    if not verified:
        log.warning(
            "%s: written without chunk checksums (before fsdask 0.2?): reads are unverified; "
            "`fsdask verify` checks it against its fingerprint, re-ingesting adds checksums",
            loc.shown,
        )
    return plain_strings(ds)


def _open_zarr(loc: Location) -> xr.Dataset:
    """``xr.open_zarr`` of an fsdask store, its failures as one-line StoreErrors."""
    shown, hint, kwargs = loc.shown, loc.storage_hint(), loc.zarr_kwargs()
    try:
        return xr.open_zarr(loc.target, consolidated=False, zarr_format=3, chunks={}, **kwargs)
    except StoreError:
        raise
    except (FileNotFoundError, KeyError) as exc:
        if _is_zarr_group(loc.target, kwargs):
            raise StoreError(
                f"{shown}: a Zarr store but not an fsdask dataset ({type(exc).__name__}: {exc}); "
                "create one with `fsdask ingest`"
            ) from None
        raise StoreError(
            f"{shown}: not a Zarr v3 store ({type(exc).__name__}: {exc}); "
            f"{hint}, or create it with `fsdask ingest`"
        ) from None
    except PermissionError as exc:
        raise StoreError(f"{shown}: access denied ({exc}); {hint}") from None
    except OSError as exc:
        raise StoreError(
            f"{shown}: storage unreachable or unreadable ({type(exc).__name__}: {exc}); {hint}"
        ) from None
    except Exception as exc:
        raise StoreError(
            f"{shown}: could not open as a Zarr v3 dataset ({type(exc).__name__}: {exc}); {hint}"
        ) from None


def _check_layout(ds: xr.Dataset, shown: str, require_complete: bool) -> None:
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


def _is_zarr_group(target: str, kwargs: Mapping[str, Any]) -> bool:
    try:
        zarr.open_group(target, mode="r", **kwargs)
        return True
    except Exception:
        return False


def _guarded_X(ds: xr.Dataset, loc: Location) -> tuple[xr.DataArray, bool]:
    """X as a dask array read through :class:`GuardedArray` (chunks = the stored chunks), and
    whether its chunks are checksummed."""
    from dask.base import tokenize

    try:
        arr = zarr.open_group(loc.target, mode="r", zarr_format=3, **loc.zarr_kwargs())["X"]
    except Exception as exc:
        raise StoreError(
            f"{loc.shown}: cannot open X ({type(exc).__name__}: {exc}); {loc.storage_hint()}"
        ) from None
    dims = tuple(arr.metadata.dimension_names or ds["X"].dims)
    guarded = GuardedArray(arr, loc.url)
    name = "fsdask-X-" + tokenize(
        loc.shown, ds.attrs.get("fingerprint"), ds.attrs.get("created"), arr.shape, arr.chunks
    )
    data = guarded_dask(guarded, arr.chunks, name=name)
    X = xr.DataArray(
        data, dims=dims, coords={d: ds[d] for d in dims if d in ds.coords}, attrs=ds["X"].attrs
    )
    X.encoding = ds["X"].encoding
    return X.transpose("sample", "feature"), is_checksummed(arr)


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


def block_digests(X: da.Array) -> da.Array:
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

    Parameters
    ----------
    url : str or path
        An fsdask store (local path or fsspec URL).
    storage_options : mapping, optional
        Passed to fsspec.

    Returns
    -------
    dict
        ``{"fingerprint", "blocks", "checksummed"}``.

    Raises
    ------
    StoreError
        Naming the store and the feature ranges whose content differs from what was written.
    """
    ds = open_fsdask(url, storage_options)
    shown = ds.attrs["store"]
    recorded = ds.attrs.get("fingerprint")
    if not recorded:
        raise StoreError(
            f"{shown}: no recorded fingerprint, so there is nothing to verify against; "
            "re-create the store with `fsdask ingest`"
        )
    X = ds["X"].data
    digests = block_digests(X).compute()
    computed = combine_digests(digests, X.shape, X.dtype)
    if computed != recorded:
        raise StoreError(
            f"{shown}: content differs from what was written (fingerprint {computed} ≠ recorded "
            f"{recorded}); features {_changed_blocks(X, digests, ds.attrs.get('block_digests'))}; "
            "re-create the store with `fsdask ingest`"
        )
    return {
        "fingerprint": computed,
        "blocks": len(X.chunks[1]),
        "checksummed": bool(ds.attrs["verified"]),
    }


def _changed_blocks(X: da.Array, digests: np.ndarray, stored: str | None) -> str:
    """The feature ranges whose digest differs from the recorded one, for a message."""
    bounds = np.cumsum((0,) + X.chunks[1])
    bad = [
        j
        for j in range(len(X.chunks[1]))
        if stored and stored[32 * j : 32 * (j + 1)] != digests[j].tobytes().hex()
    ]
    if not bad:
        return "unknown (no per-block digests recorded)"
    return ", ".join(f"{bounds[j]}–{bounds[j + 1] - 1}" for j in bad[:5]) + (
        " …" if len(bad) > 5 else ""
    )


def dataset_fingerprint(X: da.Array | np.ndarray) -> str:
    """Content fingerprint of X: blake2b over per-feature-block digests (one pass)."""
    X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X))
    return combine_digests(block_digests(X).compute(), X.shape, X.dtype)


def provenance(source: str, X: da.Array, extra: Mapping[str, Any] | None = None) -> dict:
    """The provenance attributes of a dataset written from ``source`` (``extra`` on top)."""
    from fsdask.version import current

    attrs = {
        "source": str(source),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "fsdask_version": current(),
        "shape": [int(s) for s in X.shape],
        "dtype": str(X.dtype),
        FORMAT_ATTR: FORMAT_VERSION,
    }
    attrs.update(extra or {})
    return attrs


def _canonical(ds: xr.Dataset, chunk_bytes: int, block: int | None) -> tuple[xr.Dataset, int]:
    """``ds`` in the stored layout (X in (all samples × ``block``) chunks, string ids), and
    the block width."""
    if "X" not in ds:
        raise InputError("the Dataset to write has no variable 'X'")
    X = ds["X"]
    if X.dims != ("sample", "feature"):
        X = X.transpose("sample", "feature")
    n, p = X.shape
    block = min(block or feature_block_size(n, X.dtype.itemsize, chunk_bytes), p)
    data = (
        X.data
        if isinstance(X.data, da.Array)
        else da.from_array(np.asarray(X.data), chunks=(n, block))
    )
    out = xr.Dataset(coords={k: v for k, v in ds.coords.items()})
    out["X"] = (("sample", "feature"), data.rechunk((n, block)))
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
    return out, block


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

    Parameters
    ----------
    ds : xarray.Dataset
        With ``X`` (sample, feature), lazy or in memory; written block by block (memory:
        one block per task).
    url : str or path
        Local path or fsspec URL; an existing fsdask dataset is replaced only with
        ``overwrite``, anything else never.
    storage_options, chunk_bytes, block, overwrite, source, attrs, inputs
        fsspec options; the target block size (or the block width itself); replace an
        fsdask dataset; provenance; the command's inputs (never written over).

    Returns
    -------
    str
        The content fingerprint.

    Examples
    --------
    >>> import numpy as np
    >>> import xarray as xr
    >>> import fsdask
    >>> X = np.random.default_rng(0).normal(size=(10, 30)).astype("float32")
    >>> ds = xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", np.arange(10) % 2)})
    >>> fingerprint = fsdask.write_dataset(ds, "data.zarr")
    >>> fsdask.open_dataset("data.zarr")["X"].shape
    (10, 30)
    """
    loc = Location.of(url, storage_options)
    out, block = _canonical(ds, chunk_bytes, block)
    data = out["X"].data
    n = data.shape[0]
    encoding = checksum_encoding(out.variables, {"X": {"chunks": (n, block)}})
    kwargs = loc.zarr_kwargs()
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
            _, digests = dask.compute(write, block_digests(data))
        except (PermissionError, OSError) as exc:
            if isinstance(exc, FsdaskError):
                raise
            raise StoreError(
                f"{loc.shown}: could not write ({type(exc).__name__}: {exc}); {loc.storage_hint()}"
            ) from None
        fingerprint = combine_digests(digests, data.shape, data.dtype)
        final_attrs = provenance(source, data, attrs)
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
    consolidate(group.store)


def consolidate(store) -> None:
    """Write the consolidated metadata of a finished store, last, so that a plain
    ``xr.open_zarr`` reads it in one request and without a warning.

    Parameters
    ----------
    store : zarr.abc.store.Store
        The store of the complete group (nothing may change it afterwards).
    """
    import warnings

    if not getattr(store, "supports_consolidated_metadata", True):
        return  # Icechunk: its snapshots list the metadata already
    with warnings.catch_warnings():
        # zarr notes that consolidated metadata is not in the v3 spec: zarr-python and
        # xarray read it, and a reader that does not simply lists the store
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")
        zarr.consolidate_metadata(store, zarr_format=3)


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
    if "anndata" in ds.attrs:
        lines.append(f"stored    {ds.attrs['anndata']}")
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
