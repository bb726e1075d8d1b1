"""``fsdask demo``: the command line of :func:`fsdask.api.demo`."""

from __future__ import annotations

import argparse

from fsdask.api import demo
from fsdask.api.demo import ABOUT, DEMO_METHODS
from fsdask.cli.options import add_scheduler


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask demo`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "demo",
        help="run the end-to-end demo on a synthetic problem",
        description=ABOUT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out",
        default="fsdask-demo",
        help="folder for the data and results (default ./fsdask-demo)",
    )
    p.add_argument(
        "--features", type=int, default=200_000, help="number of features (default 200000)"
    )
    p.add_argument("--samples", type=int, default=100, help="number of samples (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic problems (default 0)")
    p.add_argument(
        "--methods",
        default=None,
        help="comma-separated methods to run (default: "
        + ",".join(m for m, _ in DEMO_METHODS)
        + ")",
    )
    add_scheduler(p)
    p.set_defaults(scheduler="local:2")
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.demo` with the parsed options; return the exit status (0)."""
    demo(
        args.out,
        features=args.features,
        samples=args.samples,
        seed=args.seed,
        methods=args.methods.split(",") if args.methods else None,
        scheduler=args.scheduler,
        memory_limit=args.memory_limit,
        progress=not args.no_progress,
    )
    return 0
