"""``info``: shape, chunking, dtype and label summary of a dataset (or the top of a result)."""

from __future__ import annotations

import sys
from typing import Any, Mapping

from fsdask.api.common import check_count
from fsdask.api.spec import DATA_READS, command
from fsdask.io.options import ReadOptions


@command(inputs=("url",), reads=DATA_READS)
def info(
    url: str,
    *,
    top: int = 10,
    read: ReadOptions | None = None,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> None:
    """Print a summary of the dataset or result at ``url``.

    Parameters
    ----------
    url : str
        A dataset (any store :func:`fsdask.open_dataset` reads) or a result.
    top : int
        For a result: how many top features to list.
    read : ReadOptions, optional
        How to read a dataset other tools wrote.
    storage_options : mapping, optional
        fsspec storage options.
    stdout : file, optional
        Where to print (default: ``sys.stdout``).
    """
    from fsdask.errors import StoreError
    from fsdask.io import open_dataset
    from fsdask.io.store import describe, safe_url
    from fsdask.results import open_result, top_table

    stdout = stdout or sys.stdout
    so = dict(storage_options or {})
    check_count(top, "--top")
    try:
        ds = open_dataset(
            url, storage_options=so, describe_only=True, **(read or ReadOptions()).as_dict()
        )
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
