"""``fsdask run CONFIG.yaml``: run a batch pipeline (ingest → select → evaluate → report), resumably."""

from __future__ import annotations

import argparse

from fsdask import pipeline
from fsdask.pipeline import load_config, run_pipeline


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask run`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "run",
        help="run a pipeline described in YAML (resumes after a crash)",
        description=pipeline.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", help="pipeline YAML file (see examples/pipeline.yaml)")
    p.add_argument(
        "--restart", action="store_true", help="ignore the state file and run every step"
    )
    p.add_argument(
        "--log-json",
        metavar="FILE",
        help="append JSON-lines events (steps, iterations, errors) to FILE",
    )
    p.add_argument(
        "--scheduler",
        help="override the config's default scheduler (e.g. local:8 inside a batch job)",
    )
    p.add_argument("--memory-limit", help="override the config's default per-worker memory limit")
    p.add_argument(
        "--as-of",
        metavar="SNAPSHOT|TAG",
        help="read every Icechunk input (icechunk://…) at this snapshot id or tag: repeat a "
        "past night (`fsdask history` shows each run's snapshot)",
    )
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.pipeline.run_pipeline` with the parsed options; return the exit status (0)."""
    summary = run_pipeline(
        args.config,
        restart=args.restart,
        log_json=args.log_json,  # StepFailed carries
        defaults={"scheduler": args.scheduler, "memory_limit": args.memory_limit},
        as_of=args.as_of,
    )  # its exit code
    ran = sum(v == "ran" for v in summary.values())
    print(
        f"pipeline finished: {ran} step(s) run, {len(summary) - ran} skipped as really done; "
        f"state in {load_config(args.config).state_path}"
    )
    return 0
