"""``fsdask history STATE``: the per-night record of a pipeline (selected count, stability, runtime)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
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


def history(state: str, *, top: int = 5, as_json: bool = False, stdout=None) -> list[dict]:
    """Print the run history of the pipeline whose state file (or config) is ``state``; return
    its records of selecting steps, each with its stability against the previous run."""
    import json
    import sys

    from fsdask.errors import ParameterError
    from fsdask.pipeline.history import history_path, read_history, state_of, table, with_stability

    out = stdout or sys.stdout
    path = history_path(state_of(state))
    records = read_history(path)
    if not records:
        raise ParameterError(
            f"{path}: no run history; `fsdask run CONFIG` writes it next to the state file "
            "(give the state file or the config of a pipeline that has run)"
        )
    rows = with_stability(records)
    if as_json:
        for rec in rows:
            print(json.dumps(rec, ensure_ascii=False), file=out)
    else:
        print(table(records, show_top=top), file=out)
    return rows


def run(args: argparse.Namespace) -> int:
    history(args.state, top=args.top, as_json=args.json)
    return 0
