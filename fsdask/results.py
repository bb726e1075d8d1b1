"""Selection results: an ``xarray.Dataset`` over ``feature``, written atomically.

Variables: ``weight(feature)`` (the method's score; higher = more relevant),
``rank(feature)`` (1 = best), ``selected(feature)`` (bool), plus method extras.  Attributes:
method, parameters (JSON), n_iter, converged, objective trace, wall time, versions, input
store and its fingerprint.

Writes are publish-then-swap (:func:`fsdask.io.outputs.publish`): the new store is written
complete under a temporary name and only then takes the target's place, which is replaced
only when it is an fsdask output of the same kind and ``overwrite`` is given.  Chunks carry
zstd checksums.  The ranked-table CSV writer and the top-features printer live here too.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import xarray as xr
import zarr

from fsdask.errors import StoreError
from fsdask.io.location import Location
from fsdask.io.outputs import KIND_ATTR, publish_file
from fsdask.io.store import (
    COMPLETE_ATTR,
    atomic_store,
    checksum_encoding,
    plain_strings,
    safe_url,
)

if TYPE_CHECKING:
    import pandas


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


def _zarr_ready(ds: xr.Dataset) -> xr.Dataset:
    """A copy with JSON-able attributes and text variables as plain Python strings."""
    ds = ds.copy()
    ds.attrs = clean_attrs(
        {k: v for k, v in ds.attrs.items() if k not in (COMPLETE_ATTR, KIND_ATTR)}
    )
    for name in list(ds.variables):
        if ds[name].dtype == object or ds[name].dtype.kind in "UT":
            values = np.array([str(v) for v in np.asarray(ds[name].values).ravel()], dtype=object)
            ds[name] = (ds[name].dims, values.reshape(ds[name].shape))
    return ds


def write_store(
    ds: xr.Dataset,
    url: str | os.PathLike,
    *,
    kind: str,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    inputs: tuple = (),
) -> str:
    """Write a small Dataset (a result, an evaluation) as a checksummed Zarr v3 store.

    Publish-then-swap (:func:`fsdask.io.outputs.publish`): an existing output is replaced
    only when it is an fsdask ``kind`` and ``overwrite`` is given, and only once the new one
    is complete; the completion marker and the kind are written last.
    """
    url = os.fspath(url)
    ds = _zarr_ready(ds)
    loc = Location.of(url, storage_options)
    remote = not loc.is_local
    kwargs = loc.zarr_kwargs()
    try:
        with atomic_store(
            url, storage_options, overwrite=overwrite, kind=kind, inputs=inputs
        ) as target:
            ds.to_zarr(
                target,
                mode="w",
                zarr_format=3,
                consolidated=False,
                encoding=checksum_encoding(ds.variables),
                **kwargs,
            )
            zarr.open_group(target, mode="r+", zarr_format=3, **kwargs).attrs.update(
                {COMPLETE_ATTR: True, KIND_ATTR: kind}
            )
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(
            f"{safe_url(url)}: could not write the {kind} ({type(exc).__name__}: {exc}); "
            "check the path, the free space and the permissions"
        ) from None
    return loc.shown if remote else loc.target


def write_result(
    ds: xr.Dataset,
    url: str | os.PathLike,
    *,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    inputs: tuple = (),
) -> str:
    """Write a result Dataset to a Zarr v3 store (local or fsspec URL), publish-then-swap.

    An existing path is refused unless ``overwrite`` is given and it holds an fsdask result.
    """
    return write_store(
        ds, url, kind="result", storage_options=storage_options, overwrite=overwrite, inputs=inputs
    )


def open_store(
    url: str | os.PathLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    what: str = "result",
) -> xr.Dataset:
    """Open a small fsdask store (loaded), JSON attributes decoded; StoreError when unreadable."""
    url = os.fspath(url)
    loc = Location.of(url, storage_options)
    if loc.is_local and not loc.exists():
        raise StoreError(f"{url}: no such {what}")
    try:
        ds = xr.open_zarr(
            loc.target,
            consolidated=False,
            zarr_format=3,
            **loc.zarr_kwargs(),
        ).load()
    except StoreError:
        raise
    except Exception as exc:
        msg = str(exc).splitlines()[0] if str(exc) else ""
        raise StoreError(
            f"{safe_url(url)}: not a readable fsdask {what} ({type(exc).__name__}: {msg})"
        ) from None
    for k, v in list(ds.attrs.items()):
        if isinstance(v, str) and v.startswith("{"):
            try:
                ds.attrs[k] = json.loads(v)
            except ValueError:
                pass
    return plain_strings(ds)


def open_result(
    url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None
) -> xr.Dataset:
    """Open a result written by :func:`write_result`; refuse incomplete ones."""
    url = os.fspath(url)
    if (loc := Location.of(url)).is_local and not loc.exists():
        raise StoreError(f"{url}: no such result; run `fsdask select … --output {url}` first")
    ds = open_store(url, storage_options, what="result")
    if "weight" not in ds or not ds.attrs.get(COMPLETE_ATTR):
        raise StoreError(
            f"{safe_url(url)}: not a complete fsdask result (missing 'weight' or completion "
            "marker); re-run the selection"
        )
    return ds


def top_table(result: xr.Dataset, k: int = 20) -> list[tuple[int, str, float, bool]]:
    """(rank, feature id, weight, selected) for the ``k`` best-ranked features."""
    order = np.argsort(result["rank"].values, kind="stable")[:k]
    feats = result["feature"].values
    return [
        (
            int(result["rank"].values[i]),
            str(feats[i]),
            float(result["weight"].values[i]),
            bool(result["selected"].values[i]),
        )
        for i in order
    ]


def ranked_table(result: xr.Dataset) -> pandas.DataFrame:
    """Every feature, best first: rank, feature, weight, selected."""
    import pandas as pd

    order = np.argsort(result["rank"].values, kind="stable")
    return pd.DataFrame(
        {
            "rank": result["rank"].values[order].astype(np.int64),
            "feature": np.asarray(result["feature"].values)[order].astype(str),
            "weight": result["weight"].values[order].astype(np.float64),
            "selected": result["selected"].values[order].astype(np.int8),
        }
    )


def write_csv(
    result: xr.Dataset, path: str | os.PathLike, *, overwrite: bool = False, inputs: tuple = ()
) -> str:
    """The ranked table as CSV (quoted where needed: ids with commas or quotes round-trip),
    published by rename: an existing file is replaced only if it is an fsdask table and
    ``overwrite`` is given."""
    return write_table(ranked_table(result), path, overwrite=overwrite, inputs=inputs, index=False)


def write_table(
    df: pandas.DataFrame,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    inputs: tuple = (),
    index: bool = True,
) -> str:
    """Write ``df`` as CSV to a local ``path`` with :func:`fsdask.io.outputs.publish_file`."""
    path = os.fspath(path)
    with publish_file(path, kind="csv", overwrite=overwrite, inputs=inputs) as tmp:
        df.to_csv(tmp, index=index, float_format="%.10g")
    return path


def print_top(result: xr.Dataset, k: int, relevant: set | None = None, file=None) -> None:
    """Print the ``k`` best-ranked features as a table (``relevant`` marks known true features)."""
    file = file or sys.stdout
    print(
        f"{'rank':>6}  {'feature':<24} {'weight':>12}  selected"
        + ("  relevant" if relevant else ""),
        file=file,
    )
    for r, f, w, s in top_table(result, k):
        mark = ("  yes" if f in relevant else "   -") if relevant is not None else ""
        print(f"{r:>6}  {f:<24} {w:>12.6g}  {'yes' if s else ' - '}     {mark}", file=file)
