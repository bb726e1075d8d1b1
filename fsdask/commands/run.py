"""``fsdask run CONFIG.yaml``: run a batch pipeline (ingest → select → evaluate → report), resumably."""

from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
    from fsdask import pipeline
    p = sub.add_parser("run", help="run a pipeline described in YAML (resumes after a crash)",
                       description=pipeline.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="pipeline YAML file (see examples/pipeline.yaml)")
    p.add_argument("--restart", action="store_true", help="ignore the state file and run every step")
    return p


def run(args: argparse.Namespace) -> int:
    from fsdask.pipeline import load_config, run_pipeline
    summary = run_pipeline(args.config, restart=args.restart)   # StepFailed carries its exit code
    ran = sum(v == "ran" for v in summary.values())
    print(f"pipeline finished: {ran} step(s) run, {len(summary) - ran} skipped as already done; "
          f"state in {load_config(args.config).state_path}")
    return 0
