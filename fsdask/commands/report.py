"""``fsdask report RESULT [--data DATA] [--evaluation EVAL …] --out DIR [--csv]``."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping, Sequence

from fsdask.commands import (
    add_data_options,
    add_overwrite,
    add_storage_options,
    check_count,
    data_options,
    storage_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
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


def report(
    result: str | None = None,
    *,
    out: str,
    data: str | None = None,
    evaluation: Sequence[str] = (),
    csv: bool = False,
    top: int = 30,
    title: str | None = None,
    overwrite: bool = False,
    variable: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    label: str | None = None,
    rechunk_to: str | None = None,
    memory_budget: Any = None,
    drop_unlabelled: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    history: str | None = None,
    stdout=None,
) -> str:
    """Write the HTML report of ``result`` to the folder ``out``; return the index path.

    ``history``: a pipeline's state file (or config); adds its run-history page (also alone,
    without a result)."""
    from fsdask.commands.evaluate import open_data
    from fsdask.evaluate import open_evaluation
    from fsdask.io.outputs import check_output
    from fsdask.report import make_report
    from fsdask.results import open_result

    so = dict(storage_options or {})
    read = dict(
        variable=variable,
        sample_dim=sample_dim,
        feature_dim=feature_dim,
        label=label,
        rechunk_to=rechunk_to,
        memory_budget=memory_budget,
        drop_unlabelled=drop_unlabelled,
    )  # how to read data other tools wrote
    check_count(top, "--top")
    if isinstance(evaluation, str):
        evaluation = [evaluation]
    inputs = tuple(x for x in (result, data, *evaluation) if x)
    check_output(out, kind="report", overwrite=overwrite, inputs=inputs)
    pages = None
    if history:
        from fsdask.pipeline.history import history_pages, history_report

        pages = history_pages(history)  # read (and checked) before anything is computed
        if result is None:
            index = history_report(out, pages, overwrite=overwrite, inputs=inputs)
            print(
                f"history report written to {index} (open it in a browser)",
                file=stdout or sys.stdout,
            )
            return str(index)
    elif result is None:
        from fsdask.errors import ParameterError

        raise ParameterError(
            "fsdask report: give a RESULT, or --history STATE for the run-history page"
        )
    res = open_result(result, storage_options=so)
    ds = open_data(data, so, read) if data else None
    evs = [open_evaluation(e, storage_options=so) for e in evaluation]
    index = make_report(
        res,
        out,
        data=ds,
        evaluations=evs,
        csv=csv,
        top=top,
        title=title,
        overwrite=overwrite,
        inputs=inputs,
        extra=pages,
    )
    print(f"report written to {index} (open it in a browser)", file=stdout or sys.stdout)
    return str(index)


def run(args: argparse.Namespace) -> int:
    report(
        args.result,
        out=args.out,
        data=args.data,
        evaluation=args.evaluation,
        csv=args.csv,
        top=args.top,
        title=args.title,
        overwrite=args.overwrite,
        storage_options=storage_options(args),
        history=args.history,
        **data_options(args),
    )
    return 0
