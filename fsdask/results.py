"""Selection results: an ``xarray.Dataset`` over ``feature``, written atomically.

Variables: ``weight(feature)`` (the method's score; higher = more relevant),
``rank(feature)`` (1 = best), ``selected(feature)`` (bool), plus method extras.  Attributes:
method, parameters (JSON), n_iter, converged, objective trace, wall time, versions, input
store and its fingerprint.

Atomicity: a local result is written to a hidden sibling directory and renamed into place;
a remote one carries the ``fsdask_complete`` marker, written last.  Either way a crashed run
never leaves something that :func:`open_result` accepts as finished.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import numpy as np
import xarray as xr
import zarr

from fsdask.errors import StoreError
from fsdask.io.store import COMPLETE_ATTR, _is_local, _local, _zarr_kwargs, atomic_store, plain_strings


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def clean_attrs(attrs: Mapping[str, Any]) -> dict:
    """Attributes safe for Zarr: JSON-able values, dicts serialised as JSON strings."""
    out = {}
    for k, v in attrs.items():
        v = _jsonable(v)
        out[k] = json.dumps(v) if isinstance(v, dict) else v
    return out


def write_result(ds: xr.Dataset, url: str | os.PathLike, *, storage_options: Mapping[str, Any] | None = None,
                 overwrite: bool = True) -> str:
    """Write a result Dataset atomically to a Zarr v3 store (local or fsspec URL)."""
    url = os.fspath(url)
    ds = ds.copy()
    ds.attrs = clean_attrs({k: v for k, v in ds.attrs.items() if k != COMPLETE_ATTR})
    for name in list(ds.variables):
        if ds[name].dtype == object or ds[name].dtype.kind in "UT":
            values = np.array([str(v) for v in np.asarray(ds[name].values).ravel()], dtype=object)
            ds[name] = (ds[name].dims, values.reshape(ds[name].shape))
    remote = not _is_local(url)
    kwargs = _zarr_kwargs(url, storage_options) if remote else {}
    try:
        with atomic_store(url, storage_options, overwrite=overwrite) as target:
            # the completion marker goes in last: locally before the rename, remotely as
            # the final write of the store
            ds.to_zarr(target, mode="w", zarr_format=3, consolidated=False, **kwargs)
            zarr.open_group(target, mode="r+", zarr_format=3, **kwargs).attrs.update({COMPLETE_ATTR: True})
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(f"{url}: could not write the result ({exc})") from exc
    return url if remote else _local(url)


def open_result(url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> xr.Dataset:
    """Open a result written by :func:`write_result`; refuse incomplete ones."""
    url = os.fspath(url)
    if _is_local(url) and not os.path.exists(_local(url)):
        raise StoreError(f"{url}: no such result; run `fsdask select … --output {url}` first")
    try:
        ds = xr.open_zarr(_local(url) if _is_local(url) else url, consolidated=False, zarr_format=3,
                          **_zarr_kwargs(url, storage_options)).load()
    except Exception as exc:
        raise StoreError(f"{url}: not a readable fsdask result ({type(exc).__name__}: {exc})") from exc
    if "weight" not in ds or not ds.attrs.get(COMPLETE_ATTR):
        raise StoreError(f"{url}: not a complete fsdask result (missing 'weight' or completion marker); "
                         "re-run the selection")
    for k, v in list(ds.attrs.items()):
        if isinstance(v, str) and v.startswith("{"):
            try:
                ds.attrs[k] = json.loads(v)
            except ValueError:
                pass
    return plain_strings(ds)


def top_table(result: xr.Dataset, k: int = 20) -> list[tuple[int, str, float, bool]]:
    """(rank, feature id, weight, selected) for the ``k`` best-ranked features."""
    order = np.argsort(result["rank"].values, kind="stable")[:k]
    feats = result["feature"].values
    return [(int(result["rank"].values[i]), str(feats[i]), float(result["weight"].values[i]),
             bool(result["selected"].values[i])) for i in order]
