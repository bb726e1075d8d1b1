"""From arrays in memory (or lazy) to an fsdask dataset: labels, NaN policy, the write.

Every file reader of :mod:`fsdask.io.ingest` returns the same record (``X``, ``y``,
``feature_names``, ``sample_names``, ``class_names``); :func:`write_arrays` takes it the rest
of the way, so the checks on labels and values are written once.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import dask.array as da
import numpy as np
import xarray as xr

from fsdask._validation import feature_block_size, string_ids
from fsdask.errors import InputError
from fsdask.io.blocks import apply_nan_policy
from fsdask.io.foreign import xarray_matrix
from fsdask.io.options import ReadOptions
from fsdask.io.store import write_dataset

log = logging.getLogger("fsdask")


def build_dataset(
    X: da.Array,
    y: Any = None,
    feature_names: Any = None,
    sample_names: Any = None,
    class_names: Any = None,
    extra_attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    n, p = X.shape
    coords = {
        "sample": string_ids(sample_names) if sample_names is not None else np.arange(n),
        "feature": string_ids(feature_names) if feature_names is not None else np.arange(p),
    }
    if len(coords["feature"]) != p:
        raise InputError(
            f"feature_names has {len(coords['feature'])} entries but X has {p} features"
        )
    if len(coords["sample"]) != n:
        raise InputError(f"sample_names has {len(coords['sample'])} entries but X has {n} samples")
    ds = xr.Dataset({"X": (("sample", "feature"), X)}, coords=coords)
    if y is not None:
        y = np.asarray(y)
        if y.shape[0] != n:
            raise InputError(f"y has {y.shape[0]} entries but X has {n} samples")
        if y.dtype.kind in "OUS":
            classes, codes = np.unique(y.astype(str), return_inverse=True)
            y, class_names = codes.astype(np.int64), classes
        if y.ndim == 1:
            ds["y"] = ("sample", y)
        else:
            ds["Y"] = (("sample", "target"), y)
    if class_names is not None:
        ds.attrs["class_names"] = [str(c) for c in np.asarray(class_names).ravel()]
    ds.attrs.update(extra_attrs or {})
    return ds


def is_missing(y: np.ndarray) -> np.ndarray:
    """Mask of missing labels: NaN, None, or an empty / blank string."""
    import pandas as pd

    y = np.asarray(y)
    miss = np.asarray(pd.isna(y), dtype=bool)
    if y.dtype.kind in "OUST":
        miss |= np.array([isinstance(v, str) and not v.strip() for v in y.ravel()]).reshape(y.shape)
    return miss if miss.ndim == 1 else miss.any(axis=tuple(range(1, miss.ndim)))


def drop_missing_labels(X: Any, y: Any, sample_names: Any, drop: bool, where: str):
    """Refuse (or drop, with ``drop``) samples without a label; return X, y, sample names, count."""
    if y is None:
        return X, None, sample_names, 0
    y = np.asarray(y)
    miss = is_missing(y)
    if not miss.any():
        return X, integral_labels(y), sample_names, 0
    idx = np.flatnonzero(miss)
    if not drop:
        names = [str(sample_names[i]) if sample_names is not None else f"#{i}" for i in idx[:5]]
        raise InputError(
            f"{where}: {idx.size} sample(s) have no label (NaN, None or an empty cell; first: "
            f"{', '.join(names)}); fill them in, or drop those samples with --drop-unlabelled"
        )
    keep = ~miss
    if not keep.any():
        raise InputError(f"{where}: no sample has a label; nothing would be left")
    X = X[keep] if not isinstance(X, da.Array) else X[np.flatnonzero(keep)]
    sample_names = None if sample_names is None else np.asarray(sample_names)[keep]
    return X, integral_labels(y[keep]), sample_names, int(idx.size)


def integral_labels(y: np.ndarray) -> np.ndarray:
    """Float labels that are all whole numbers (a CSV column that had an empty cell) → int64."""
    if y.dtype.kind == "f" and y.size and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    if y.dtype == object and all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in y.ravel()
    ):
        return integral_labels(y.astype(np.float64))
    return y


def from_memory(
    source: Any, y: Any, feature_names: Any, sample_names: Any, options: ReadOptions
) -> dict:
    """The record of an in-memory numpy / dask array, ``xarray.DataArray`` or ``Dataset``
    (an xarray object's dims matched by name: :func:`fsdask.io.foreign.xarray_matrix`)."""
    class_names = None
    if isinstance(source, (xr.Dataset, xr.DataArray)):
        where = f"in-memory {type(source).__name__}"
        Xa, y_found, class_names = xarray_matrix(source, options, where)
        if y is None:
            y = y_found
        else:
            class_names = None
        if feature_names is None and "feature" in Xa.coords:
            feature_names = Xa["feature"].values
        if sample_names is None and "sample" in Xa.coords:
            sample_names = Xa["sample"].values
        source = Xa.data
    return {
        "X": source,
        "y": y,
        "feature_names": feature_names,
        "sample_names": sample_names,
        "class_names": class_names,
    }


def _as_matrix(X: Any, source_desc: str, dtype: Any, chunk_bytes: int) -> da.Array:
    """``X`` checked (numeric, 2-D, not empty) as a dask array of ``dtype``, all samples a block."""
    if not isinstance(X, da.Array):
        X = np.asarray(X)
        if X.dtype == object or not np.issubdtype(X.dtype, np.number):
            raise InputError(f"{source_desc}: X is not numeric (dtype {X.dtype})")
    if X.ndim != 2:
        raise InputError(f"{source_desc}: X must be 2-D (samples × features); got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"{source_desc}: X is empty (shape {X.shape})")
    n = X.shape[0]
    if not isinstance(X, da.Array):
        X = da.from_array(
            X, chunks=(n, feature_block_size(n, np.dtype(dtype).itemsize, chunk_bytes))
        )
    return X.astype(dtype).rechunk({0: -1})


def write_arrays(
    d: Mapping[str, Any],
    url: str,
    *,
    source_desc: str,
    attrs: dict,
    options: ReadOptions,
    storage_options: Mapping[str, Any] | None,
    overwrite: bool,
    chunk_bytes: int,
    dtype: Any,
    inputs: tuple,
) -> str:
    """Check a reader's record (labels, NaN policy) and write it as an fsdask dataset.

    Memory: an in-memory ``X`` is shared, written block by block; a lazy one is streamed.
    Returns the fingerprint.
    """
    X = _as_matrix(d["X"], source_desc, dtype, chunk_bytes)
    X, y, snames, dropped = drop_missing_labels(
        X, d.get("y"), d.get("sample_names"), options.drop_unlabelled, source_desc
    )
    if dropped:
        attrs["dropped_unlabelled_samples"] = dropped
        log.warning(
            "%s: dropped %d sample(s) without a label (--drop-unlabelled)", source_desc, dropped
        )
    X, fnames, report = apply_nan_policy(
        X, options.nan_policy, d.get("feature_names"), where=source_desc
    )
    attrs.update(report)
    ds = build_dataset(X, y, fnames, snames, d.get("class_names"))
    return write_dataset(
        ds,
        url,
        storage_options=storage_options,
        chunk_bytes=chunk_bytes,
        overwrite=overwrite,
        source=source_desc,
        attrs={**ds.attrs, **attrs},
        inputs=inputs,
    )


def ingest_dataset(
    ds: xr.Dataset,
    url: str,
    *,
    options: ReadOptions,
    storage_options: Mapping[str, Any] | None,
    overwrite: bool,
    chunk_bytes: int,
    dtype: Any,
    inputs: tuple = (),
) -> str:
    """Copy an opened dataset (already in feature blocks) to the canonical fsdask layout."""
    where = ds.attrs.get("store") or ds.attrs.get("source") or "dataset"
    X = ds["X"].data.astype(dtype)
    if "nan_policy" in ds.attrs:  # applied as it was opened: keep that count
        fnames = ds["feature"].values
        keys = ("nonfinite_values", "nan_policy", "affected_features", "dropped_features")
        report = {k: ds.attrs[k] for k in keys if k in ds.attrs}
    else:
        X, fnames, report = apply_nan_policy(
            X, options.nan_policy, ds["feature"].values, where=where
        )
    y = ds["y"].values if "y" in ds else None
    out = build_dataset(X, y, fnames, ds["sample"].values, ds.attrs.get("class_names"))
    attrs = {**out.attrs, **report, "source_file": str(where)}
    if "dropped_unlabelled_samples" in ds.attrs:  # --drop-unlabelled on the way in
        attrs["dropped_unlabelled_samples"] = ds.attrs["dropped_unlabelled_samples"]
    return write_dataset(
        out,
        url,
        storage_options=storage_options,
        chunk_bytes=chunk_bytes,
        overwrite=overwrite,
        source=str(where),
        attrs=attrs,
        inputs=inputs,
    )
