"""``ingest``: convert a matrix file to an fsdask Zarr dataset."""

from __future__ import annotations

import sys
from typing import Any, Mapping

from fsdask.api.spec import DATA_READS, command
from fsdask.io.options import ReadOptions


@command(outputs=("url",), inputs=("source",), reads=DATA_READS)
def ingest(
    source: str,
    url: str,
    *,
    orient: str = "auto",
    sep: str | None = None,
    chunk_mb: float = 64.0,
    x_key: str | None = None,
    y_key: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
    read: ReadOptions | None = None,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> str:
    """Convert ``source`` to a dataset at ``url``, print its summary; return its fingerprint.

    Parameters
    ----------
    source : str
        The input file (``.npz``, ``.csv``, ``.tsv``, ``.mat``, ``.h5ad``, a foreign store).
    url : str
        The destination store (local path or URL).
    orient : {"auto", "samples", "features"}
        CSV layout: a row per sample or a row per feature.
    sep : str, optional
        CSV separator.
    chunk_mb : float
        Target size of a feature block in MiB.
    x_key, y_key : str, optional
        ``.mat``: names of the data and label variables.
    overwrite : bool
        Replace an fsdask dataset at ``url``.
    progress : bool
        Show the progress of the tasks that read the source and write the store
        (:func:`fsdask.cluster.progress`, on stderr).
    read : ReadOptions, optional
        How to read the source: its label (CSV column or row, AnnData ``obs`` column),
        ``drop_unlabelled``, ``nan_policy`` and, for a store other tools wrote, its variable
        and dims.
    storage_options : mapping, optional
        fsspec storage options.
    stdout : file, optional
        Where to print (default: ``sys.stdout``).

    Returns
    -------
    str
        The content fingerprint of the dataset written.
    """
    from fsdask.cluster import progress as show_progress
    from fsdask.io import ingest as ingest_file
    from fsdask.io import open_dataset
    from fsdask.io.store import describe, safe_url

    so = dict(storage_options or {})
    with show_progress(None, enabled=progress):  # the active scheduler's tasks
        fingerprint = ingest_file(
            source,
            url,
            orient=orient,
            sep=sep,
            storage_options=so,
            overwrite=overwrite,
            chunk_bytes=_chunk_bytes(chunk_mb),
            x_key=x_key,
            y_key=y_key,
            **(read or ReadOptions()).as_dict(),
        )
    ds = open_dataset(url, storage_options=so)
    print(describe(ds, safe_url(url)), file=stdout or sys.stdout)
    if ds.attrs.get("dropped_unlabelled_samples"):
        print(
            f"dropped {ds.attrs['dropped_unlabelled_samples']} sample(s) without a label (--drop-unlabelled)",
            file=stdout or sys.stdout,
        )
    return fingerprint


def _chunk_bytes(chunk_mb: Any) -> int:
    """``--chunk-mb`` in bytes, or a ParameterError."""
    import math

    from fsdask.errors import ParameterError

    if (
        isinstance(chunk_mb, bool)
        or not isinstance(chunk_mb, (int, float))
        or not math.isfinite(chunk_mb)
        or chunk_mb <= 0
    ):
        raise ParameterError(f"--chunk-mb={chunk_mb!r}: expected a size in MiB > 0 (e.g. 64)")
    return max(1, int(chunk_mb * 2**20))
