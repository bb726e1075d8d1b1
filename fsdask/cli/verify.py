"""``fsdask verify URL``: re-read a dataset and check it against the fingerprint recorded at write."""

from __future__ import annotations

import argparse

from fsdask.api import verify
from fsdask.cli.options import add_scheduler, add_storage_options, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask verify`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "verify",
        help="check a dataset's content against its recorded fingerprint",
        description="Read every feature block of X, recompute its digest and compare with "
        "the fingerprint recorded when the store was written. Exit 0 when they "
        "match, 2 (naming the feature ranges) when they do not.",
    )
    p.add_argument("url", help="a dataset made by `fsdask ingest`")
    add_scheduler(p)
    add_storage_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.verify` with the parsed options; return the exit status (0)."""
    verify(
        args.url,
        scheduler=args.scheduler,
        memory_limit=args.memory_limit,
        progress=not args.no_progress,
        storage_options=storage_options(args),
    )
    return 0
