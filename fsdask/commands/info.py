"""``fsdask info URL``: shape, chunking, dtype and label summary of a dataset (or a result)."""

from __future__ import annotations

import argparse

from fsdask.commands import add_data_options, add_storage_options, data_options, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("info", help="describe a dataset or a result",
                       description="Print shape, chunking, dtype, label summary and provenance of an "
                                   "fsdask dataset, or the top features of a result.")
    p.add_argument("url")
    p.add_argument("--top", type=int, default=10, help="for a result: how many top features to list")
    add_storage_options(p)
    add_data_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    import xarray as xr

    from fsdask.errors import StoreError
    from fsdask.io import open_dataset
    from fsdask.io.store import describe
    from fsdask.results import open_result, top_table
    so = storage_options(args)
    try:
        ds = open_dataset(args.url, storage_options=so, **data_options(args))
    except StoreError as exc:
        if "no variable 'X'" not in str(exc):
            raise
        res = open_result(args.url, storage_options=so)
        print(f"result    {args.url}\nmethod    {res.attrs.get('method')}  "
              f"({res.attrs.get('n_selected')} of {res.attrs.get('n_features')} selected)")
        for r, f, w, s in top_table(res, args.top):
            print(f"{r:>6}  {f:<30} {w:.6g}{'  *' if s else ''}")
        return 0
    print(describe(ds, args.url))
    return 0
