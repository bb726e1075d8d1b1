"""``fsdask select URL --method NAME --output RESULT``: run one selection method."""

from __future__ import annotations

import argparse

from fsdask.api import parse_kv, select
from fsdask.cli.options import (
    add_data_options,
    add_json,
    add_overwrite,
    add_scheduler,
    add_storage_options,
    json_stdout,
    read_options,
    storage_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask select`` to the subparsers ``sub``; return its parser."""
    from fsdask.methods import REGISTRY

    p = sub.add_parser(
        "select",
        help="run a feature-selection method on a dataset",
        description="Fit a method on a Zarr dataset and write the result (weight, rank, "
        "selected over feature) as a Zarr store, publish-then-swap.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="methods: "
        + ", ".join(REGISTRY)
        + "\nparameters are the estimator's keyword arguments, e.g. "
        "--param k=6 --param n_features_to_select=50",
    )
    p.add_argument("url", help="input dataset (made by `fsdask ingest`)")
    p.add_argument("--method", required=True, help="method name (see below)")
    p.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="estimator parameter, repeatable; values are parsed as YAML (3, 0.5, true, [1,2])",
    )
    p.add_argument(
        "--output", "-o", required=True, help="result store to write (local path or URL)"
    )
    p.add_argument(
        "--top", type=int, default=20, help="how many top features to print (default 20)"
    )
    p.add_argument("--csv", help="also write the ranked table to this CSV file")
    add_overwrite(p)
    add_json(p, "the run and its top features")
    g = p.add_argument_group("checkpoints of iterative fits (qalpha, logo, cpfs, hsic)")
    g.add_argument(
        "--checkpoint-every",
        metavar="N|Ts",
        help="save the fit's state every N iterations (5) or T seconds (60s) to "
        "OUTPUT.fsdask-checkpoint; a run killed mid-fit continues from it when run again",
    )
    r = g.add_mutually_exclusive_group()
    r.add_argument(
        "--resume",
        dest="resume",
        action="store_true",
        default=None,
        help="continue from OUTPUT.fsdask-checkpoint (the default when it exists; one written "
        "for other data, options or fsdask version is refused)",
    )
    r.add_argument(
        "--restart",
        dest="resume",
        action="store_false",
        help="ignore OUTPUT.fsdask-checkpoint and fit from the start (it is overwritten)",
    )
    w = p.add_argument_group("writing the selection back into an AnnData-on-Zarr input")
    w.add_argument(
        "--write-var",
        action="store_true",
        help="also add var columns fsdask_METHOD_score, _rank, _selected (per group when the "
        "result has groups) and uns['fsdask'][METHOD] (provenance) to the input store, in "
        "place; existing columns are refused unless --overwrite-var names them",
    )
    w.add_argument(
        "--overwrite-var",
        action="append",
        metavar="COLUMN",
        default=[],
        help="an existing var column --write-var may replace, repeatable ('all': every "
        "column it writes)",
    )
    p.add_argument("--no-overwrite", action="store_true", help=argparse.SUPPRESS)  # the default now
    add_scheduler(p)
    add_storage_options(p)
    add_data_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.select` with the parsed options; return the exit status (0)."""
    with json_stdout(args.json) as out:
        return _select(args, out)


def _write_var(args: argparse.Namespace):
    """``--write-var`` [``--overwrite-var NAME``…] as :func:`fsdask.api.select`'s ``write_var``."""
    from fsdask.errors import ParameterError

    if args.overwrite_var and not args.write_var:
        raise ParameterError("--overwrite-var names columns of --write-var; add --write-var")
    return args.overwrite_var or args.write_var


def _select(args: argparse.Namespace, out) -> int:
    select(
        args.url,
        method=args.method,
        output=args.output,
        params=parse_kv(args.param),
        csv=args.csv,
        top=args.top,
        write_var=_write_var(args),
        overwrite=args.overwrite,
        scheduler=args.scheduler,
        memory_limit=args.memory_limit,
        progress=not args.no_progress,
        read=read_options(args),
        storage_options=storage_options(args),
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        as_json=args.json,
        stdout=out,
    )
    return 0
