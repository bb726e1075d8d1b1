"""``fsdask report RESULT [--data DATA] [--evaluation EVAL …] --out DIR [--csv]``."""

from __future__ import annotations

import argparse

from fsdask.commands import add_data_options, add_storage_options, data_options, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="an HTML page with figures for a result",
                       description="Write DIR/index.html and PNG figures: sorted weights with the selection "
                                   "cut, convergence trace, λ/ρ/iteration paths, CV curves, the top features "
                                   "(with a heatmap and class means when --data is given). Opens from disk.")
    p.add_argument("result", help="a result written by `fsdask select`")
    p.add_argument("--data", help="the dataset the result was computed on (Zarr store or .npz)")
    p.add_argument("--evaluation", action="append", default=[],
                   help="an evaluation written by `fsdask evaluate --output` (repeatable)")
    p.add_argument("--out", "-o", required=True, help="output directory")
    p.add_argument("--csv", action="store_true", help="also write DIR/ranked.csv (every feature, best first)")
    p.add_argument("--top", type=int, default=30, help="how many top features to list (default 30)")
    p.add_argument("--title", help="page title")
    add_storage_options(p)
    add_data_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    from fsdask.commands.evaluate import open_data
    from fsdask.evaluate import open_evaluation
    from fsdask.report import make_report
    from fsdask.results import open_result

    so = storage_options(args)
    result = open_result(args.result, storage_options=so)
    data = open_data(args.data, so, data_options(args)) if args.data else None
    evs = [open_evaluation(e) for e in args.evaluation]
    index = make_report(result, args.out, data=data, evaluations=evs, csv=args.csv, top=args.top, title=args.title)
    print(f"report written to {index} (open it in a browser)")
    return 0
