"""Turn user data into fsdask Zarr datasets, streaming where the source allows.

:func:`ingest` dispatches by source: a store other tools wrote (any Zarr, ``.h5ad``,
AnnData-on-Zarr, in-memory ``AnnData``) is read through :func:`fsdask.io.open.open_dataset`
and copied block by block; a file by its suffix — ``.npz`` (the layout of ``shared/data``:
keys ``X``, ``y``, ``feature_names``, ``sample_names``, ``class_names``) and ``.mat`` in
:mod:`.files`, CSV/TSV in :mod:`.tables` (features as rows stream in batches, so 10⁶
feature rows never sit in memory); in-memory numpy / dask / xarray objects in
:mod:`.build`, which also writes every record.  A new file format is a reader returning the
record of :mod:`.build` and one entry of :data:`FILE_READERS`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import numpy as np

from fsdask._validation import DEFAULT_CHUNK_BYTES
from fsdask.errors import InputError
from fsdask.io.blocks import NanPolicy, apply_nan_policy, lazy_from_blocks
from fsdask.io.ingest.build import from_memory, ingest_dataset, write_arrays
from fsdask.io.ingest.files import read_mat, read_npz
from fsdask.io.ingest.tables import (
    csv_errors,
    guess_orient,
    samples_as_rows,
    sniff_sep,
    stream_features_as_rows,
)
from fsdask.io.location import Location
from fsdask.io.open import open_dataset, read_options
from fsdask.io.options import NAN_POLICIES, ReadOptions

__all__ = ["NAN_POLICIES", "NanPolicy", "apply_nan_policy", "ingest", "lazy_from_blocks"]

CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".tab", ".csv.gz", ".tsv.gz")


def ingest(
    source: Any,
    url: str | os.PathLike,
    options: ReadOptions | None = None,
    *,
    y: Any = None,
    feature_names: Any = None,
    sample_names: Any = None,
    orient: Literal["auto", "samples", "features"] = "auto",
    sep: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    dtype: Any = np.float32,
    x_key: str | None = None,
    y_key: str | None = None,
    batch: int = 10_000,
    **loose: Any,
) -> str:
    """Convert ``source`` to an fsdask Zarr dataset at ``url``; return its fingerprint.

    Parameters
    ----------
    source
        Path to ``.npz`` / ``.csv`` / ``.tsv`` / ``.mat`` / ``.h5ad``, a Zarr store (any
        writer), or an in-memory numpy / dask array (sample × feature), an
        ``xarray.DataArray`` with dims (sample, feature), an ``xarray.Dataset`` with ``X``
        or an ``AnnData``.
    url
        Destination (local path or fsspec URL).
    options : ReadOptions, optional
        How to read the source (:class:`~fsdask.io.options.ReadOptions`): ``label`` (CSV:
        the label column or row; stores: the label variable or ``obs`` column),
        ``nan_policy``, ``drop_unlabelled``; for stores (read block by block with
        :func:`fsdask.open_dataset` and copied to the canonical layout) also ``variable``,
        ``sample_dim``, ``feature_dim``, ``rechunk_to``, ``memory_budget``.
    y, feature_names, sample_names
        For in-memory sources.  String labels are encoded as codes with ``class_names``.
    orient
        CSV orientation: ``samples`` (a row per sample), ``features`` (a row per feature,
        streamed in ``batch`` rows), or ``auto`` (more columns than rows → samples as rows).
    sep, x_key, y_key, batch
        CSV separator (default by suffix), MATLAB names of X and y, CSV rows per read.
    storage_options, chunk_bytes, dtype, overwrite
        fsspec options; target block size; stored dtype; replace an existing fsdask
        dataset at ``url`` (nothing else is ever replaced; the old one stays whole until
        the new one is complete).
    **loose
        Fields of ``ReadOptions`` as keywords (``label=``, ``nan_policy=``, …), on top of
        ``options``.

    Returns
    -------
    str
        The dataset's content fingerprint.

    Examples
    --------
    >>> import numpy as np
    >>> import fsdask
    >>> rng = np.random.default_rng(0)
    >>> np.savez("data.npz", X=rng.normal(size=(12, 40)), y=np.repeat([0, 1], 6))
    >>> fingerprint = fsdask.ingest("data.npz", "data.zarr")
    >>> ds = fsdask.open_dataset("data.zarr")
    >>> ds["X"].shape, ds["X"].dtype.name
    ((12, 40), 'float32')
    """
    options = read_options(source, options, loose)
    url = os.fspath(url)
    inputs = (os.fspath(source),) if isinstance(source, (str, os.PathLike)) else ()
    _check_target(url, storage_options, overwrite, inputs)
    write = dict(storage_options=storage_options, overwrite=overwrite)
    write.update(chunk_bytes=chunk_bytes, dtype=dtype)
    if readable_store(source):
        feature_blocks = options.replace(layout="features")  # what an fsdask store holds
        ds = open_dataset(source, storage_options, feature_blocks, chunk_bytes=chunk_bytes)
        return ingest_dataset(ds, url, options=options, inputs=inputs, **write)
    attrs: dict = {}
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        how = dict(orient=orient, sep=sep, batch=batch, x_key=x_key, y_key=y_key)
        d = _read_file(path, url, options, attrs, how, write)
        if isinstance(d, str):  # streamed straight into the store: its fingerprint
            return d
        source_desc = str(path)
    else:
        source_desc = f"in-memory {type(source).__name__}"
        d = from_memory(source, y, feature_names, sample_names, options)
    return write_arrays(
        d, url, source_desc=source_desc, attrs=attrs, options=options, inputs=inputs, **write
    )


def _check_target(url: str, storage_options, overwrite: bool, inputs: tuple) -> None:
    """Before anything is read: the storage answers, and the target is free or an fsdask
    dataset to replace."""
    target = Location.of(url, storage_options)
    target.check_reachable()
    target.check_output(kind="dataset", overwrite=overwrite, inputs=inputs)


def readable_store(source: Any) -> bool:
    """Whether ``source`` is read through :func:`fsdask.open_dataset`: a Zarr store (local folder or
    URL), an ``.h5ad`` file or an in-memory ``AnnData``."""
    if type(source).__name__ == "AnnData":
        return True
    if not isinstance(source, (str, os.PathLike)):
        return False
    loc = Location.of(source)
    if not loc.is_local:
        return True
    s = loc.target
    return os.path.isdir(s) or s.rstrip("/").lower().endswith((".zarr", ".h5ad"))


def _suffix(path: Path) -> str:
    return "".join(path.suffixes[-2:]).lower() if path.suffix == ".gz" else path.suffix.lower()


def _read_file(
    path: Path,
    url: str,
    options: ReadOptions,
    attrs: dict,
    how: Mapping[str, Any],
    write: Mapping[str, Any],
) -> dict | str:
    """The record of the file at ``path`` by its suffix, or the fingerprint of a CSV streamed
    straight into ``url``.

    ``how``: ``orient``, ``sep``, ``batch``, ``x_key``, ``y_key``; ``write``: the keywords of
    the write (storage options, overwrite, chunk_bytes, dtype).
    """
    if not path.exists():
        raise InputError(f"{path}: no such file; give a .npz, .csv/.tsv, .mat or .h5ad file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty")
    suffix = _suffix(path)
    attrs["source_file"] = path.name
    if suffix in FILE_READERS:
        return FILE_READERS[suffix](path, how["x_key"], how["y_key"])
    if suffix not in CSV_SUFFIXES:
        raise InputError(
            f"{path}: unknown file type {suffix!r}; fsdask ingests .npz, .csv, .tsv, .mat, "
            ".h5ad files and Zarr stores (.zarr, any writer)"
        )
    s = sniff_sep(path, how["sep"])
    with csv_errors(path, s):
        orient = how["orient"]
        if orient == "auto":
            orient = guess_orient(path, s, options)
        if orient == "features":
            return stream_features_as_rows(
                path, url, sep=s, options=options, batch=how["batch"], attrs=attrs, **write
            )
        return samples_as_rows(path, options, s)


#: file suffix → reader of the whole file (``path, x_key, y_key`` → record)
FILE_READERS: dict[str, Callable[[Path, str | None, str | None], dict]] = {
    ".npz": lambda path, _x, _y: read_npz(path),
    ".mat": read_mat,
}
