"""``fsdask info URL``: shape, chunking, dtype and label summary of a dataset (or a result)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

from fsdask.commands import (
    add_data_options,
    add_storage_options,
    check_count,
    data_options,
    storage_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "info",
        help="describe a dataset or a result",
        description="Print shape, chunking, dtype, label summary and provenance of an "
        "fsdask dataset, or the top features of a result.",
    )
    p.add_argument("url")
    p.add_argument(
        "--top", type=int, default=10, help="for a result: how many top features to list"
    )
    add_storage_options(p)
    add_data_options(p)
    return p


def info(
    url: str,
    *,
    top: int = 10,
    variable: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    label: str | None = None,
    rechunk_to: str | None = None,
    memory_budget: Any = None,
    drop_unlabelled: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> None:
    """Print a summary of the dataset or result at ``url``."""
    from fsdask.errors import StoreError
    from fsdask.io import open_dataset
    from fsdask.io.store import describe, safe_url
    from fsdask.results import open_result, top_table

    stdout = stdout or sys.stdout
    so = dict(storage_options or {})
    read = dict(
        variable=variable,
        sample_dim=sample_dim,
        feature_dim=feature_dim,
        label=label,
        rechunk_to=rechunk_to,
        memory_budget=memory_budget,
        drop_unlabelled=drop_unlabelled,
    )  # how to read data other tools wrote
    check_count(top, "--top")
    try:
        ds = open_dataset(url, storage_options=so, **read)
    except StoreError as exc:
        if "no variable 'X'" not in str(exc):
            raise
        res = open_result(url, storage_options=so)
        print(
            f"result    {safe_url(url)}\nmethod    {res.attrs.get('method')}  "
            f"({res.attrs.get('n_selected')} of {res.attrs.get('n_features')} selected)",
            file=stdout,
        )
        for r, f, w, s in top_table(res, top):
            print(f"{r:>6}  {f:<30} {w:.6g}{'  *' if s else ''}", file=stdout)
        return
    print(describe(ds, safe_url(url)), file=stdout)


def run(args: argparse.Namespace) -> int:
    info(args.url, top=args.top, storage_options=storage_options(args), **data_options(args))
    return 0
