"""The door for reading: :func:`open_dataset` dispatches a URL or an object to its reader.

fsdask stores go to :func:`fsdask.io.store.open_fsdask`; ``.h5ad`` files, AnnData-on-Zarr
stores and in-memory ``AnnData`` to :mod:`fsdask.io.anndata`; any other Zarr store to
:mod:`fsdask.io.foreign`; a scipy.sparse matrix to :func:`fsdask.io.anndata.sparse_blocks`.
A source stored by samples stays in sample blocks unless ``layout="features"`` asks for
feature blocks (:func:`fsdask.io.rechunk.to_feature_blocks`, a copy when needed).  The read options arrive whole, as one
:class:`~fsdask.io.options.ReadOptions`; loose keywords are folded into it here and nothing
below sees them loose.  Missing labels are refused or dropped here, once, for every reader.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Mapping

import dask.array as da
import numpy as np
import xarray as xr
import zarr

from fsdask._validation import DEFAULT_CHUNK_BYTES, as_feature_blocks, is_sample_blocked
from fsdask.errors import FsdaskError, InputError, StoreError
from fsdask.io.anndata import from_anndata, is_anndata_group, open_anndata, sparse_blocks
from fsdask.io.blocks import apply_nan_policy
from fsdask.io.foreign import open_foreign_zarr, xarray_matrix
from fsdask.io.location import Location
from fsdask.io.options import ReadOptions
from fsdask.io.rechunk import to_feature_blocks
from fsdask.io.store import is_fsdask_attrs, open_fsdask

log = logging.getLogger("fsdask")


def open_dataset(
    url: Any,
    storage_options: Mapping[str, Any] | None = None,
    options: ReadOptions | None = None,
    *,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    require_complete: bool = True,
    describe_only: bool = False,
    **loose: Any,
) -> xr.Dataset:
    """Open a dataset lazily: an fsdask store, any Zarr v2/v3 store, an AnnData file/store or object.

    Parameters
    ----------
    url
        Local path or fsspec URL (``s3://bucket/data.zarr``) of a Zarr store (fsdask's, or
        written by xarray / zarr-python, v2 or v3, consolidated or not), an ``.h5ad`` file or
        an AnnData-on-Zarr store; or an in-memory ``anndata.AnnData`` or scipy.sparse matrix.
    storage_options
        Passed to fsspec (credentials, ``endpoint_url``, ``anon``, …).  Never logged or stored.
    options : ReadOptions, optional
        How to read it (:class:`~fsdask.io.options.ReadOptions`: matrix, dims, label, layout…).
    chunk_bytes
        The target size of a block (a feature block, or a sample block's stored values).
    require_complete
        Refuse fsdask stores whose write did not finish (default).
    describe_only
        Open an AnnData for a description only (``fsdask info``): no stored value is read
        (no per-block copy, no NaN count), so X may be slow to compute.
    **loose
        The fields of :class:`~fsdask.io.options.ReadOptions` as keywords (``variable=``,
        ``sample_dim=``, ``label=``, ``drop_unlabelled=``, …), applied on top of ``options``.

    Returns
    -------
    xarray.Dataset
        ``X(sample, feature)`` backed by dask; ``y`` when present.  ``layout="auto"`` keeps
        a source stored by samples (AnnData CSR or dense, a dense Zarr store chunked by
        samples) in sample blocks as stored, CSR as ``csr_matrix`` blocks, with no copy
        (attribute ``layout``: ``"samples"``); else X is in (all samples × feature block) chunks.  A store fsdask did not write is only read, and its dataset has an
        attribute ``foreign`` saying so (shown by ``fsdask info``).  Memory: nothing is read
        until computed, then one block per task.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import weston_linear, write_synthetic
    >>> _ = write_synthetic(weston_linear(n_features=300), "weston.zarr")
    >>> ds = fsdask.open_dataset("weston.zarr")
    >>> ds["X"].dims, ds["X"].shape, ds["y"].shape
    (('sample', 'feature'), (100, 300), (100,))
    """
    options = read_options(url, options, loose)  # a bad option is refused before any read
    if not isinstance(url, (str, os.PathLike)):
        return _open_object(url, options, chunk_bytes)
    loc = Location.of(url, storage_options)
    if loc.versioned and not loc.ref.at:  # Icechunk: read one snapshot
        return _pinned(loc, storage_options, options, chunk_bytes, require_complete, describe_only)
    if loc.is_local and not loc.exists():
        raise StoreError(
            f"{loc.url}: no such file or directory; give the path of a Zarr store, an .h5ad "
            "file or create a store with `fsdask ingest`"
        )
    loc.check_reachable()
    if _is_hdf5(loc):
        ds = open_anndata(
            loc.url,
            storage_options,
            hdf5=True,
            options=options,
            chunk_bytes=chunk_bytes,
            describe_only=describe_only,
        )
        return labelled(ds, options.drop_unlabelled)
    node = _open_node(loc)
    if node is None or is_fsdask_attrs(dict(node.attrs)):
        # labels were checked when fsdask wrote it
        return open_fsdask(loc.url, storage_options, require_complete=require_complete)
    if is_anndata_group(node):
        ds = open_anndata(
            loc.url,
            storage_options,
            hdf5=False,
            options=options,
            chunk_bytes=chunk_bytes,
            describe_only=describe_only,
        )
        return labelled(ds, options.drop_unlabelled)
    return labelled(_open_foreign(node, loc, options, chunk_bytes), options.drop_unlabelled)


def _pinned(loc: Location, so, options, chunk_bytes, require_complete, describe_only) -> xr.Dataset:
    """An Icechunk dataset read at the snapshot its branch or tag names now; its attribute
    ``icechunk`` records repository, branch or tag, and that snapshot."""
    at = loc.pin()
    flags = {"require_complete": require_complete, "describe_only": describe_only}
    ds = open_dataset(at.url, so, options, chunk_bytes=chunk_bytes, **flags)
    return ds.assign_attrs(icechunk=at.provenance())


def read_options(url: Any, options: ReadOptions | None, loose: Mapping[str, Any]) -> ReadOptions:
    """``ReadOptions.of(options, **loose)``; an error names the data it was meant for."""
    try:
        return ReadOptions.of(options, **loose)
    except FsdaskError as exc:
        where = Location.of(url).shown if isinstance(url, (str, os.PathLike)) else "open_dataset"
        raise type(exc)(f"{where}: {exc}") from None


def _open_object(obj: Any, options: ReadOptions, chunk_bytes: int) -> xr.Dataset:
    """An in-memory AnnData, xarray object or scipy.sparse matrix as a dataset."""
    if isinstance(obj, (xr.Dataset, xr.DataArray)):
        return labelled(_open_xarray(obj, options, chunk_bytes), options.drop_unlabelled)
    if type(obj).__name__ == "AnnData":
        ds = from_anndata(obj, options=options, chunk_bytes=chunk_bytes)
        return labelled(ds, options.drop_unlabelled)
    if hasattr(obj, "tocsc") and hasattr(obj, "nnz"):  # scipy.sparse: dense one block at a time
        return xr.Dataset(
            {"X": (("sample", "feature"), sparse_blocks(obj, chunk_bytes))},
            coords={"sample": np.arange(obj.shape[0]), "feature": np.arange(obj.shape[1])},
            attrs={"source": f"in-memory {type(obj).__name__}"},
        )
    raise InputError(
        f"open_dataset: expected a path, a URL, an AnnData or xarray object or a scipy.sparse "
        "matrix, "
        f"got {type(obj).__name__}"
    )


def _open_xarray(obj: Any, options: ReadOptions, chunk_bytes: int) -> xr.Dataset:
    """An in-memory xarray Dataset or DataArray, dims matched by name, in feature blocks."""
    X, y, classes = xarray_matrix(obj, options, f"in-memory {type(obj).__name__}")
    Xd = as_feature_blocks(da.asarray(X.data), chunk_bytes=chunk_bytes)
    coords = {d: X[d].values if d in X.coords else np.arange(X.sizes[d]) for d in X.dims}
    ds = xr.Dataset({"X": (("sample", "feature"), Xd)}, coords=coords)
    ds = with_nan_policy(ds, options.nan_policy, f"in-memory {type(obj).__name__}")
    if y is not None:
        ds["y"] = ("sample", y)
    ds.attrs["source"] = f"in-memory {type(obj).__name__}"
    if classes is not None:
        ds.attrs["class_names"] = classes
    return ds


def _open_foreign(node: Any, loc: Location, options: ReadOptions, chunk_bytes: int) -> xr.Dataset:
    """A Zarr store fsdask did not write: kept by sample blocks when it is stored so and
    ``layout`` is ``"auto"``, else re-blocked to feature blocks."""
    ds = open_foreign_zarr(node, loc.target, options, chunk_bytes=chunk_bytes)
    X = ds["X"].data
    if options.layout == "auto" and is_sample_blocked(X):
        log.info(
            "%s: read by sample blocks as stored (%d blocks of ~%d samples), no copy",
            loc.shown,
            len(X.chunks[0]),
            X.chunks[0][0],
        )
        ds.attrs["layout"] = "samples"
    else:
        X = to_feature_blocks(
            X,
            where=loc.shown,
            options=options,
            chunk_bytes=chunk_bytes,
            storage_options=loc.storage_options,
            allow_copy=True,
        )
        ds["X"] = (("sample", "feature"), X)
        ds.attrs["layout"] = "features"
    ds.attrs["store"] = loc.shown
    return with_nan_policy(ds, options.nan_policy, loc.shown)


def with_nan_policy(ds: xr.Dataset, policy: str, where: str) -> xr.Dataset:
    """``ds`` with ``policy`` applied to X as it is read (see
    :func:`~fsdask.io.blocks.apply_nan_policy`); ``error`` costs nothing here: the fit's
    validation refuses a NaN in the pass it makes anyway."""
    if policy == "error":
        return ds
    X, names, report = apply_nan_policy(ds["X"].data, policy, ds["feature"].values, where=where)
    if X.shape[1] != ds.sizes["feature"]:
        ds = ds.isel(feature=np.isin(ds["feature"].values, names))
    ds["X"] = (("sample", "feature"), X)
    if report["nonfinite_values"]:
        log.warning(
            "%s: %d NaN/Inf value(s) in %d feature(s): nan_policy=%s",
            where,
            report["nonfinite_values"],
            report.get("affected_features", 0),
            policy,
        )
    return ds.assign_attrs(report)  # ingest records it in the store it writes


def labelled(ds: xr.Dataset, drop: bool) -> xr.Dataset:
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


def _is_hdf5(loc: Location) -> bool:
    """An HDF5 file (.h5ad): by its signature when local, by its suffix otherwise."""
    if loc.is_local:
        return loc.is_hdf5()
    return loc.url.rstrip("/").lower().endswith((".h5ad", ".h5", ".hdf5"))


def _open_node(loc: Location) -> Any:
    """The store's root group (or root array), any Zarr format; ``None`` if Zarr cannot open it."""
    try:
        return zarr.open(loc.target, mode="r", **loc.zarr_kwargs())
    except Exception:
        return None  # the fsdask path reports why, with its established messages
