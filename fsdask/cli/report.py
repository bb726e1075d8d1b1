"""``fsdask report RESULT [--data DATA] [--evaluation EVAL …] --out DIR [--csv]``."""

from __future__ import annotations

import argparse

from fsdask.api import report
from fsdask.cli.options import (
    add_data_options,
    add_overwrite,
    add_storage_options,
    read_options,
    storage_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask report`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "report",
        help="an HTML page with figures for a result",
        description="Write DIR/index.html and PNG figures: sorted weights with the selection "
        "cut, convergence trace, λ/ρ/iteration paths, CV curves, the top features "
        "(with a heatmap and class means when --data is given). Opens from disk.",
    )
    p.add_argument(
        "result", nargs="?", help="a result written by `fsdask select` (optional with --history)"
    )
    p.add_argument("--data", help="the dataset the result was computed on (Zarr store or .npz)")
    p.add_argument(
        "--evaluation",
        action="append",
        default=[],
        help="an evaluation written by `fsdask evaluate --output` (repeatable; local path or URL)",
    )
    p.add_argument("--out", "-o", required=True, help="output directory (local)")
    p.add_argument(
        "--csv", action="store_true", help="also write DIR/ranked.csv (every feature, best first)"
    )
    p.add_argument("--top", type=int, default=30, help="how many top features to list (default 30)")
    p.add_argument("--title", help="page title")
    p.add_argument(
        "--history",
        metavar="STATE",
        help="add DIR/history.html: selected count, top-k stability and runtime per run of the "
        "pipeline whose state file (or config) is STATE",
    )
    add_overwrite(p)
    add_storage_options(p)
    add_data_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.report` with the parsed options; return the exit status (0)."""
    report(
        args.result,
        out=args.out,
        data=args.data,
        evaluation=args.evaluation,
        csv=args.csv,
        top=args.top,
        title=args.title,
        overwrite=args.overwrite,
        read=read_options(args),
        storage_options=storage_options(args),
        history=args.history,
    )
    return 0
