"""``fsdask export RESULT --anndata in.h5ad -o out.h5ad``: write a selection back into AnnData."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

from fsdask.commands import add_storage_options, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "export",
        help="write a result back into an AnnData file (.h5ad or AnnData Zarr)",
        description="Copy the AnnData to OUTPUT and add var['fsdask_selected'], "
        "var['fsdask_weight'], var['fsdask_rank'] (rank 1 = best; -1 for features "
        "the result does not cover) and the result's provenance in uns['fsdask']. "
        "Everything else is copied unchanged; the input is never modified and an "
        "existing OUTPUT is never replaced.",
    )
    p.add_argument("result", help="a result written by `fsdask select`")
    p.add_argument(
        "--anndata",
        required=True,
        help="the .h5ad file (or AnnData .zarr) the result was computed on",
    )
    p.add_argument(
        "--output", "-o", required=True, help="new .h5ad / .zarr to write (must not exist)"
    )
    add_storage_options(p)
    return p


def export(
    result: str,
    *,
    anndata: str,
    output: str,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> str:
    """Write ``result``'s selection into a copy of ``anndata`` at ``output``; return ``output``."""
    import os

    from fsdask.errors import StoreError
    from fsdask.io.anndata_write import annotate_anndata
    from fsdask.results import open_result

    if os.path.exists(output):  # checked before anything is read
        raise StoreError(
            f"{output} already exists; choose another output path (fsdask never overwrites "
            "what it did not write)"
        )
    res = open_result(result, storage_options=dict(storage_options or {}))
    out = annotate_anndata(res, anndata, out=output)
    print(
        f"{out}: {anndata} with var['fsdask_selected'] ({int(res['selected'].values.sum())} selected), "
        "var['fsdask_weight'], var['fsdask_rank'] and uns['fsdask'] added",
        file=stdout or sys.stdout,
    )
    return out


def run(args: argparse.Namespace) -> int:
    export(
        args.result, anndata=args.anndata, output=args.output, storage_options=storage_options(args)
    )
    return 0
