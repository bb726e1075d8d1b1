"""``fsdask verify URL``: re-read a dataset and check it against the fingerprint recorded at write."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

from fsdask.commands import add_scheduler, add_storage_options, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
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


def verify(
    url: str,
    *,
    scheduler: str = "threads",
    memory_limit: str | None = None,
    progress: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> dict:
    """Verify the dataset at ``url``; raise StoreError on any difference."""
    from fsdask.cluster import progress as show_progress
    from fsdask.cluster import scheduler as run_on
    from fsdask.io.store import safe_url, verify_dataset

    with run_on(scheduler, memory_limit=memory_limit) as client:
        with show_progress(client, enabled=progress):
            report = verify_dataset(url, storage_options)
    note = "" if report["checksummed"] else " (chunks carry no checksums: re-ingest to add them)"
    print(
        f"{safe_url(url)}: ok — {report['blocks']} feature block(s) match fingerprint "
        f"{report['fingerprint']}{note}",
        file=stdout or sys.stdout,
    )
    return report


def run(args: argparse.Namespace) -> int:
    verify(
        args.url,
        scheduler=args.scheduler,
        memory_limit=args.memory_limit,
        progress=not args.no_progress,
        storage_options=storage_options(args),
    )
    return 0
