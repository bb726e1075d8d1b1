"""fsdask datasets as Zarr v3 stores.

Layout: an xarray Dataset with ``X(sample, feature)`` chunked (all samples, feature block),
optional ``y(sample)`` or ``Y(sample, target)``, coordinates ``sample`` and ``feature``,
and provenance attributes.  The attribute ``fsdask_complete`` is written *last*; a store
without it was interrupted mid-write and is refused by :func:`open_dataset`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from typing import Any, Mapping

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr

from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size
from fsdask.errors import InputError, StoreError

COMPLETE_ATTR = "fsdask_complete"
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
            raise StoreError(f"{url}: s3:// needs s3fs; install the extra: pip install 'fsdask[s3]'") from exc
    return {"storage_options": dict(storage_options or {})}


def _local(url: str) -> str:
    return str(url).removeprefix("file://")


def _storage_hint(url: str) -> str:
    if _is_local(url):
        return "check the path"
    return ("check the URL, the endpoint and the credentials (environment variables or "
            "--storage-option key=value), and that the bucket exists")


def open_dataset(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None,
                 *, require_complete: bool = True) -> xr.Dataset:
    """Open an fsdask dataset lazily.

    Parameters
    ----------
    url
        Local path or fsspec URL (``s3://bucket/data.zarr``).
    storage_options
        Passed to fsspec (credentials, ``endpoint_url``, …).  Never logged or stored.
    require_complete
        Refuse stores whose write did not finish (default).

    Returns
    -------
    xarray.Dataset
        ``X(sample, feature)`` backed by dask, chunked as stored; ``y`` when present.
    """
    url = os.fspath(url)
    if _is_local(url) and not os.path.exists(_local(url)):
        raise StoreError(f"{url}: no such file or directory; give the path of a Zarr store made by "
                         "`fsdask ingest` or fsdask.write_dataset")
    try:
        ds = xr.open_zarr(_local(url) if _is_local(url) else url, consolidated=False, zarr_format=3,
                          chunks={}, **_zarr_kwargs(url, storage_options))
    except StoreError:
        raise
    except (FileNotFoundError, KeyError) as exc:
        raise StoreError(f"{url}: not a Zarr v3 store ({type(exc).__name__}: {exc}); "
                         f"{_storage_hint(url)}, or create it with `fsdask ingest`") from exc
    except PermissionError as exc:
        raise StoreError(f"{url}: access denied ({exc}); {_storage_hint(url)}") from exc
    except OSError as exc:
        raise StoreError(f"{url}: storage unreachable or unreadable ({type(exc).__name__}: {exc}); "
                         f"{_storage_hint(url)}") from exc
    except Exception as exc:
        raise StoreError(f"{url}: could not open as a Zarr v3 dataset ({type(exc).__name__}: {exc}); "
                         f"{_storage_hint(url)}") from exc
    if "X" not in ds:
        raise StoreError(f"{url}: a Zarr store but not an fsdask dataset (no variable 'X'; found "
                         f"{sorted(ds.data_vars) or 'nothing'}); create one with `fsdask ingest`")
    if set(ds["X"].dims) != {"sample", "feature"}:
        raise StoreError(f"{url}: variable X has dims {ds['X'].dims}; expected ('sample', 'feature')")
    if require_complete and not ds.attrs.get(COMPLETE_ATTR, False):
        raise StoreError(f"{url}: the store is incomplete (its write was interrupted or is still "
                         "running); re-run the ingest/write that made it")
    ds["X"] = ds["X"].transpose("sample", "feature")
    return ds


def _block_digests(X: da.Array) -> da.Array:
    def digest(b):
        h = hashlib.blake2b(np.ascontiguousarray(b).tobytes(), digest_size=16).digest()
        return np.frombuffer(h, dtype=np.uint8)[None, :]
    return da.blockwise(lambda b: digest(b), "jd", X, "ij", new_axes={"d": 16}, adjust_chunks={"j": 1},
                        dtype=np.uint8, concatenate=True)


def combine_digests(digests: np.ndarray, shape: tuple, dtype: Any) -> str:
    """Fingerprint of a dataset from its per-block digests (order matters)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((tuple(shape), str(np.dtype(dtype)))).encode())
    h.update(np.ascontiguousarray(digests).tobytes())
    return h.hexdigest()


def dataset_fingerprint(X: da.Array | np.ndarray) -> str:
    """Content fingerprint of X: blake2b over per-feature-block digests (one pass)."""
    X = X if isinstance(X, da.Array) else da.from_array(np.asarray(X))
    return combine_digests(_block_digests(X).compute(), X.shape, X.dtype)


def _provenance(source: str, X: da.Array, extra: Mapping[str, Any] | None = None) -> dict:
    from fsdask import __version__
    attrs = {
        "source": str(source),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
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
    data = X.data if isinstance(X.data, da.Array) else da.from_array(np.asarray(X.data), chunks=(n, block))
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
    out.attrs = {k: v for k, v in ds.attrs.items() if k != COMPLETE_ATTR}
    encoding = {"X": {"chunks": (n, block)}}
    target = _local(url) if _is_local(url) else url
    kwargs = _zarr_kwargs(url, storage_options)
    if _is_local(url) and os.path.exists(_local(url)) and not overwrite:
        raise StoreError(f"{url} already exists; pass overwrite=True (CLI: --overwrite) or choose another path")
    try:
        write = out.to_zarr(target, mode="w", zarr_format=3, consolidated=False, encoding=encoding,
                            compute=False, **kwargs)
        _, digests = dask.compute(write, _block_digests(data))
    except (PermissionError, OSError) as exc:
        raise StoreError(f"{url}: could not write ({type(exc).__name__}: {exc}); {_storage_hint(url)}") from exc
    fingerprint = combine_digests(digests, data.shape, data.dtype)
    final_attrs = _provenance(source, data, attrs)
    final_attrs.update({"fingerprint": fingerprint, "chunk_features": int(block), COMPLETE_ATTR: True})
    group = zarr.open_group(target, mode="r+", zarr_format=3, **kwargs)
    group.attrs.update({**out.attrs, **final_attrs})
    return fingerprint


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
    if "y" in ds:
        y = ds["y"].values
        if y.dtype.kind in "iub" or y.dtype.kind in "OUT":
            vals, counts = np.unique(y, return_counts=True)
            names = ds.attrs.get("class_names")
            parts = []
            for v, c in zip(vals, counts):
                label = names[int(v)] if names is not None and y.dtype.kind in "iu" and 0 <= v < len(names) else v
                parts.append(f"{label}: {c}")
            lines.append(f"y         {len(vals)} classes ({', '.join(parts[:12])}{' …' if len(parts) > 12 else ''})")
        else:
            lines.append(f"y         continuous, mean {np.nanmean(y):.4g}, sd {np.nanstd(y):.4g}")
    else:
        lines.append("y         none (unlabeled)")
    for key in ("source", "created", "fingerprint", "fsdask_version"):
        if key in ds.attrs:
            lines.append(f"{key:<9} {ds.attrs[key]}")
    return "\n".join(lines)
