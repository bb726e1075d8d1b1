"""``fsdask history STATE``: the per-night record of a pipeline (selected count, stability, runtime)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("history", help="the run history of a pipeline, one line per selecting step and run",
                       description="Print the history that `fsdask run` appends next to its state file: per "
                                   "run and selecting step the date, input fingerprint, number selected, "
                                   "Jaccard and Kuncheva stability of the top-k against the previous run, "
                                   "runtime and the top features.  Plots: `fsdask report --history STATE "
                                   "--out DIR`.")
    p.add_argument("state", help="the pipeline's state file (or its config YAML, or the .history.jsonl file)")
    p.add_argument("--top", type=int, default=5, help="how many top feature ids to show per line (default 5)")
    p.add_argument("--json", action="store_true", help="print the records (with stability) as JSON lines")
    return p


def run(args: argparse.Namespace) -> int:
    import json

    from fsdask.errors import ParameterError
    from fsdask.pipeline.history import history_path, read_history, state_of, table, with_stability

    path = history_path(state_of(args.state))
    records = read_history(path)
    if not records:
        raise ParameterError(f"{path}: no run history; `fsdask run CONFIG` writes it next to the state file "
                             "(give the state file or the config of a pipeline that has run)")
    if args.json:
        for rec in with_stability(records):
            print(json.dumps(rec, ensure_ascii=False))
    else:
        print(table(records, show_top=args.top))
    return 0
