"""``fsdask export RESULT --anndata in.h5ad -o out.h5ad``: write a selection back into AnnData."""

from __future__ import annotations

import argparse

from fsdask.api import export
from fsdask.cli.options import add_storage_options, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask export`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "export",
        help="write a result back into an AnnData file (.h5ad or AnnData Zarr)",
        description="Copy the AnnData to OUTPUT and add var['KEY_selected'], "
        "var['KEY_weight'], var['KEY_rank'] (rank 1 = best; -1 for features "
        "the result does not cover) and the result's provenance in uns['KEY'] "
        "(KEY: --key-added, default fsdask). Everything else is copied unchanged; the "
        "input is never modified and an existing OUTPUT is never replaced.",
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
    p.add_argument(
        "--key-added",
        default="fsdask",
        metavar="KEY",
        help="prefix of the var columns and the uns key written (scanpy's convention; "
        "default: fsdask). Give each method its own, e.g. fsdask_fisher, to keep both",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace var columns / the uns entry of KEY that the AnnData already has "
        "(OUTPUT itself is never replaced)",
    )
    add_storage_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.export` with the parsed options; return the exit status (0)."""
    export(
        args.result,
        anndata=args.anndata,
        output=args.output,
        key_added=args.key_added,
        overwrite=args.overwrite,
        storage_options=storage_options(args),
    )
    return 0
