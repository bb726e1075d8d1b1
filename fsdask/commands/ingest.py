"""``fsdask ingest SOURCE URL``: convert a matrix to an fsdask Zarr dataset."""

from __future__ import annotations

import argparse

from fsdask.commands import add_data_options, add_storage_options, data_options, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("ingest", help="convert .npz/.csv/.tsv/.mat/.h5ad or any Zarr store to a chunked fsdask dataset",
                       description="Convert a matrix file to an fsdask Zarr v3 dataset (local path or "
                                   "fsspec URL such as s3://bucket/data.zarr). Features-as-rows CSV is "
                                   "streamed in batches.")
    p.add_argument("source", help="input: a file (.npz as in shared/data, .csv, .tsv, .mat, .h5ad) or a Zarr "
                                  "store (any writer: xarray, zarr-python v2/v3, AnnData, fsdask; path or URL)")
    p.add_argument("url", help="destination Zarr store")
    p.add_argument("--label", help="CSV: label column (samples as rows) or label row (features as rows); "
                                   ".h5ad/AnnData: obs column; Zarr store: label variable")
    p.add_argument("--orient", choices=["auto", "samples", "features"], default="auto",
                   help="CSV layout: a row per sample or a row per feature (default: guess)")
    p.add_argument("--sep", help="CSV separator (default: tab for .tsv, comma otherwise)")
    p.add_argument("--nan-policy", choices=["error", "zero", "mean", "drop-feature"], default="error",
                   help="what to do with NaN/Inf values (default: refuse with a count)")
    p.add_argument("--chunk-mb", type=float, default=64.0, help="target size of a feature block in MiB (default 64)")
    p.add_argument("--x-key", help=".mat: name of the data variable")
    p.add_argument("--y-key", help=".mat: name of the label variable")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    add_storage_options(p)
    add_data_options(p, label=False)
    return p


def run(args: argparse.Namespace) -> int:
    from fsdask.io import ingest, open_dataset
    from fsdask.io.store import describe
    so = storage_options(args)
    ingest(args.source, args.url, label=args.label, orient=args.orient, sep=args.sep,
           nan_policy=args.nan_policy, storage_options=so, overwrite=args.overwrite,
           chunk_bytes=int(args.chunk_mb * 2**20), x_key=args.x_key, y_key=args.y_key,
           **{k: v for k, v in data_options(args).items() if k not in ("label", "nan_policy")})
    print(describe(open_dataset(args.url, storage_options=so), args.url))
    return 0
