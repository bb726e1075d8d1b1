"""``fsdask ingest SOURCE URL``: convert a matrix to an fsdask Zarr dataset."""

from __future__ import annotations

import argparse

from fsdask.api import ingest
from fsdask.cli.options import (
    add_data_options,
    add_overwrite,
    add_progress,
    add_storage_options,
    read_options,
    storage_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask ingest`` to the subparsers ``sub``; return its parser."""
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
    add_progress(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.ingest` with the parsed options; return the exit status (0)."""
    ingest(
        args.source,
        args.url,
        orient=args.orient,
        sep=args.sep,
        chunk_mb=args.chunk_mb,
        x_key=args.x_key,
        y_key=args.y_key,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        read=read_options(args),
        storage_options=storage_options(args),
    )
    return 0
