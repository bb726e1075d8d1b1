"""Selection results: an ``xarray.Dataset`` over ``feature``, written atomically.

Variables: ``weight(feature)`` (the method's score; higher = more relevant),
``rank(feature)`` (1 = best), ``selected(feature)`` (bool), plus method extras.  Attributes:
method, parameters (JSON), n_iter, converged, objective trace, wall time, versions, input
store and its fingerprint.

Stores carry consolidated metadata (written last), so ``xr.open_zarr`` opens them quietly.
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

from fsdask.errors import StoreError
from fsdask.io.location import Location
from fsdask.io.outputs import KIND_ATTR, publish_file
from fsdask.io.store import (
    COMPLETE_ATTR,
    TEST_COLUMNS,
    atomic_store,
    checksum_encoding,
    mark_complete,
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


def jsonable_attrs(attrs: Mapping[str, Any]) -> dict:
    """Attributes as JSON-able values (NumPy scalars and arrays made Python ones), dicts kept
    as dicts (``--json`` output).

    Parameters
    ----------
    attrs : mapping

    Returns
    -------
    dict
    """
    return {str(k): _jsonable(v) for k, v in attrs.items()}


def _zarr_ready(ds: xr.Dataset) -> xr.Dataset:
    """A copy with JSON-able attributes and text variables as plain Python strings."""
    ds = ds.copy()
    ds.attrs = clean_attrs(
        {k: v for k, v in ds.attrs.items() if k not in (COMPLETE_ATTR, KIND_ATTR)}
    )
    for name in test_columns(ds):
        ds[name].attrs.setdefault("description", TEST_DESCRIPTIONS[name])
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
            mark_complete(target, kwargs, {}, kind=kind)
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

    The new result is written complete next to the target, then moved into place, so an
    interrupted write leaves the old result whole.

    Parameters
    ----------
    ds : xarray.Dataset
        A selection result, e.g. an estimator's ``result_``.
    url : str or path-like
        Local path or fsspec URL (``s3://…``).
    storage_options : mapping, optional
        fsspec options (credentials, ``endpoint_url``); never written into the result.
    overwrite : bool, default False
        Replace an existing fsdask result at ``url``; anything else there is never replaced.
    inputs : tuple of str, default ()
        The locations the result was computed from: an output onto one of them is refused.

    Returns
    -------
    str
        The content fingerprint of the written result.

    Examples
    --------
    >>> import numpy as np
    >>> import fsdask
    >>> X = np.random.default_rng(0).normal(size=(20, 50))
    >>> sel = fsdask.Filter(statistic="variance", n_features_to_select=5).fit(X)
    >>> fingerprint = fsdask.write_result(sel.result_, "variance.zarr")
    >>> int(fsdask.open_result("variance.zarr")["selected"].sum())
    5
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
    """Open a result written by :func:`write_result` (or ``fsdask select -o``).

    Parameters
    ----------
    url : str or path-like
        Local path or fsspec URL of the result store.
    storage_options : mapping, optional
        fsspec options (credentials, ``endpoint_url``).

    Returns
    -------
    xarray.Dataset
        The result, loaded: ``weight``, ``rank`` and ``selected`` over ``feature`` (and
        whatever else the method recorded), with the fit's provenance in its attributes.

    Raises
    ------
    StoreError
        When ``url`` holds no result, or an incomplete one (an interrupted write).

    Examples
    --------
    >>> import numpy as np
    >>> import fsdask
    >>> X = np.random.default_rng(0).normal(size=(20, 50))
    >>> sel = fsdask.Filter(statistic="variance", n_features_to_select=5).fit(X)
    >>> _ = fsdask.write_result(sel.result_, "result.zarr")
    >>> result = fsdask.open_result("result.zarr")
    >>> sorted(v for v in ("weight", "rank", "selected") if v in result)
    ['rank', 'selected', 'weight']
    """
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


#: what they mean (their ``description`` attribute in a written result)
TEST_DESCRIPTIONS = {
    "pvalue": "two-sided p-value of the feature's test (NaN for constant features)",
    "pvalue_adj": "Benjamini-Hochberg adjusted p-value (false discovery rate) over the "
    "non-constant features",
    "direction": "+1: larger in the second class (classes in sorted order) or growing with "
    "y; -1: the other way; 0: no difference; NaN for constant features",
}


def test_columns(result: xr.Dataset) -> list[str]:
    """The :data:`TEST_COLUMNS` that ``result`` holds as per-feature variables.

    Parameters
    ----------
    result : xarray.Dataset
        A selection result.

    Returns
    -------
    list of str
    """
    return [c for c in TEST_COLUMNS if c in result and result[c].dims == ("feature",)]


def top_records(result: xr.Dataset, k: int = 20) -> list[dict[str, Any]]:
    """The ``k`` best-ranked features as JSON-able records: rank, feature, weight, selected,
    and the result's :func:`test_columns` (None where a value is NaN).

    Parameters
    ----------
    result : xarray.Dataset
        A selection result.
    k : int
        How many.

    Returns
    -------
    list of dict
    """
    order = np.argsort(result["rank"].values, kind="stable")[:k]
    cols = {c: result[c].values for c in test_columns(result)}
    out = []
    for (r, f, w, s), i in zip(top_table(result, k), order):
        rec: dict[str, Any] = {"rank": r, "feature": f, "weight": w, "selected": s}
        for c, values in cols.items():
            v = float(values[i])
            rec[c] = (int(v) if c == "direction" else v) if np.isfinite(v) else None
        out.append(rec)
    return out


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
    """Every feature, best first: rank, feature, weight, selected, and the result's
    :func:`test_columns` (pvalue, pvalue_adj, direction) when it has them."""
    import pandas as pd

    order = np.argsort(result["rank"].values, kind="stable")
    table = {
        "rank": result["rank"].values[order].astype(np.int64),
        "feature": np.asarray(result["feature"].values)[order].astype(str),
        "weight": result["weight"].values[order].astype(np.float64),
        "selected": result["selected"].values[order].astype(np.int8),
    }
    for c in test_columns(result):
        values = result[c].values[order].astype(np.float64)
        # the direction is a sign: an integer column (empty where the feature had none)
        table[c] = pd.array(values, dtype="Int8") if c == "direction" else values
    return pd.DataFrame(table)


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
    """Print the ``k`` best-ranked features as a table (``relevant`` marks known true
    features); the result's p-values, adjusted p-values and directions get columns too."""
    file = file or sys.stdout
    cols = test_columns(result)
    heads = {"pvalue": "p-value", "pvalue_adj": "adj. p", "direction": "dir"}
    print(
        f"{'rank':>6}  {'feature':<24} {'weight':>12}  selected"
        + "".join(f"  {heads[c]:>10}" for c in cols)
        + ("  relevant" if relevant else ""),
        file=file,
    )
    for rec in top_records(result, k):
        f = rec["feature"]
        mark = ("  yes" if f in relevant else "   -") if relevant is not None else ""
        stats = "".join(f"  {format_test_value(c, rec[c]):>10}" for c in cols)
        print(
            f"{rec['rank']:>6}  {f:<24} {rec['weight']:>12.6g}  "
            f"{'yes' if rec['selected'] else ' - '}     {stats}{mark}",
            file=file,
        )


def format_test_value(column: str, value: Any) -> str:
    """A p-value (4 significant digits) or a direction (``+``/``−``/``0``) as shown in tables.

    Parameters
    ----------
    column : one of :data:`TEST_COLUMNS`
    value : float, int or None

    Returns
    -------
    str
        ``"–"`` for a missing value.
    """
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    if column == "direction":
        return {1: "+", -1: "−"}.get(int(value), "0")
    return f"{value:.4g}"
