"""``fsdask history STATE``: the per-night record of a pipeline (selected count, stability, runtime)."""

from __future__ import annotations

import argparse

from fsdask.api import history


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask history`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "history",
        help="the run history of a pipeline, one line per selecting step and run",
        description="Print the history that `fsdask run` appends next to its state file: per "
        "run and selecting step the date, input fingerprint, number selected, "
        "Jaccard and Kuncheva stability of the top-k against the previous run, "
        "runtime and the top features.  Plots: `fsdask report --history STATE "
        "--out DIR`.",
    )
    p.add_argument(
        "state", help="the pipeline's state file (or its config YAML, or the .history.jsonl file)"
    )
    p.add_argument(
        "--top", type=int, default=5, help="how many top feature ids to show per line (default 5)"
    )
    p.add_argument(
        "--json", action="store_true", help="print the records (with stability) as JSON lines"
    )
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.history` with the parsed options; return the exit status (0)."""
    history(args.state, top=args.top, as_json=args.json)
    return 0
