"""``fsdask info URL``: shape, chunking, dtype and label summary of a dataset (or a result)."""

from __future__ import annotations

import argparse

from fsdask.api import info
from fsdask.cli.options import (
    add_data_options,
    add_json,
    add_storage_options,
    json_stdout,
    read_options,
    storage_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask info`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "info",
        help="describe a dataset or a result",
        description="Print shape, chunking, dtype, label summary and provenance of an "
        "fsdask dataset, or the top features of a result.",
    )
    p.add_argument(
        "url", help="a dataset or result store, or a file fsdask reads (local path or URL)"
    )
    p.add_argument(
        "--top", type=int, default=10, help="for a result: how many top features to list"
    )
    add_json(
        p,
        "the dataset's shape, chunking, dtype, labels and attributes, or the result's top features",
    )
    add_storage_options(p)
    add_data_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.info` with the parsed options; return the exit status (0)."""
    with json_stdout(args.json) as out:
        info(
            args.url,
            top=args.top,
            read=read_options(args),
            storage_options=storage_options(args),
            as_json=args.json,
            stdout=out,
        )
    return 0
