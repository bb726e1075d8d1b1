"""``verify``: re-read a dataset and check it against the fingerprint recorded at write."""

from __future__ import annotations

import sys
from typing import Any, Mapping

from fsdask.api.common import running
from fsdask.api.spec import command


@command(inputs=("url",))
def verify(
    url: str,
    *,
    scheduler: str = "threads",
    memory_limit: str | None = None,
    progress: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> dict:
    """Verify the dataset at ``url``; raise StoreError on any difference.

    Parameters
    ----------
    url : str
        A dataset written by fsdask.
    scheduler, memory_limit, progress
        Where to run (:func:`fsdask.cluster.scheduler`) and whether to show progress.
    storage_options : mapping, optional
        fsspec storage options.
    stdout : file, optional
        Where to print (default: ``sys.stdout``).

    Returns
    -------
    dict
        The report of :func:`fsdask.io.verify_dataset` (blocks, fingerprint, checksummed).
    """
    from fsdask.io.store import safe_url, verify_dataset

    with running(scheduler, memory_limit, progress):
        report = verify_dataset(url, storage_options)
    note = "" if report["checksummed"] else " (chunks carry no checksums: re-ingest to add them)"
    print(
        f"{safe_url(url)}: ok — {report['blocks']} feature block(s) match fingerprint "
        f"{report['fingerprint']}{note}",
        file=stdout or sys.stdout,
    )
    return report
