"""``fsdask ingest SOURCE URL``: convert a matrix to an fsdask Zarr dataset."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

from fsdask.commands import (
    add_data_options,
    add_overwrite,
    add_storage_options,
    data_options,
    storage_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "ingest",
        help="convert .npz/.csv/.tsv/.mat/.h5ad to a chunked Zarr dataset",
        description="Convert a matrix file to an fsdask Zarr v3 dataset (local path or "
        "fsspec URL such as s3://bucket/data.zarr). Features-as-rows CSV is "
        "streamed in batches.",
    )
    p.add_argument("source", help="input file (.npz as in shared/data, .csv, .tsv, .mat, .h5ad)")
    p.add_argument("url", help="destination Zarr store")
    p.add_argument(
        "--label",
        help="CSV: label column (samples as rows) or label row (features as rows); "
        ".h5ad: obs column",
    )
    p.add_argument(
        "--drop-unlabelled",
        action="store_true",
        help="drop samples whose label is missing (NaN, None or an empty cell) instead of "
        "refusing the file; the count is reported",
    )
    p.add_argument(
        "--orient",
        choices=["auto", "samples", "features"],
        default="auto",
        help="CSV layout: a row per sample or a row per feature (default: guess)",
    )
    p.add_argument("--sep", help="CSV separator (default: tab for .tsv, comma otherwise)")
    p.add_argument(
        "--nan-policy",
        choices=["error", "zero", "mean", "drop-feature"],
        default="error",
        help="what to do with NaN/Inf values (default: refuse with a count)",
    )
    p.add_argument(
        "--chunk-mb",
        type=float,
        default=64.0,
        help="target size of a feature block in MiB (default 64)",
    )
    p.add_argument("--x-key", help=".mat: name of the data variable")
    p.add_argument("--y-key", help=".mat: name of the label variable")
    add_overwrite(p)
    add_storage_options(p)
    add_data_options(p, label=False)
    return p


def ingest(
    source: str,
    url: str,
    *,
    label: str | None = None,
    drop_unlabelled: bool = False,
    orient: str = "auto",
    sep: str | None = None,
    nan_policy: str = "error",
    chunk_mb: float = 64.0,
    x_key: str | None = None,
    y_key: str | None = None,
    overwrite: bool = False,
    variable: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    rechunk_to: str | None = None,
    memory_budget: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> str:
    """Convert ``source`` to a dataset at ``url``, print its summary; return its fingerprint."""
    import math

    from fsdask.errors import ParameterError
    from fsdask.io import ingest as ingest_file
    from fsdask.io import open_dataset
    from fsdask.io.store import describe, safe_url

    so = dict(storage_options or {})
    read = dict(
        variable=variable,
        sample_dim=sample_dim,
        feature_dim=feature_dim,
        rechunk_to=rechunk_to,
        memory_budget=memory_budget,
    )  # how to read data other tools wrote
    if (
        isinstance(chunk_mb, bool)
        or not isinstance(chunk_mb, (int, float))
        or not math.isfinite(chunk_mb)
        or chunk_mb <= 0
    ):
        raise ParameterError(f"--chunk-mb={chunk_mb!r}: expected a size in MiB > 0 (e.g. 64)")
    fingerprint = ingest_file(
        source,
        url,
        label=label,
        orient=orient,
        sep=sep,
        nan_policy=nan_policy,
        storage_options=so,
        overwrite=overwrite,
        chunk_bytes=max(1, int(chunk_mb * 2**20)),
        x_key=x_key,
        y_key=y_key,
        drop_unlabelled=drop_unlabelled,
        **read,
    )
    ds = open_dataset(url, storage_options=so)
    print(describe(ds, safe_url(url)), file=stdout or sys.stdout)
    if ds.attrs.get("dropped_unlabelled_samples"):
        print(
            f"dropped {ds.attrs['dropped_unlabelled_samples']} sample(s) without a label (--drop-unlabelled)",
            file=stdout or sys.stdout,
        )
    return fingerprint


def run(args: argparse.Namespace) -> int:
    ingest(
        args.source,
        args.url,
        label=args.label,
        drop_unlabelled=args.drop_unlabelled,
        orient=args.orient,
        sep=args.sep,
        nan_policy=args.nan_policy,
        chunk_mb=args.chunk_mb,
        x_key=args.x_key,
        y_key=args.y_key,
        overwrite=args.overwrite,
        storage_options=storage_options(args),
        **data_options(args, label=False),
    )
    return 0
