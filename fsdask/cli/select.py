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
    p.add_argument(
        "--groups",
        metavar="all|G1,G2",
        help="ttest, f, fold_change: test every group of the label (all) or the listed ones "
        "against the rest, in one pass (the same as --param groups=...)",
    )
    p.add_argument(
        "--max-samples",
        type=int,
        metavar="N",
        help="qalpha, logo, laplacian_score (quadratic in the samples): fit on at most N "
        "samples, a seeded class-stratified subsample recorded in the result",
    )
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
    add_confidence_options(p)
    add_scheduler(p)
    add_storage_options(p)
    add_data_options(p)
    return p


def confidence(args: argparse.Namespace) -> dict:
    """The ``--stability`` / ``--fdr`` options as :func:`fsdask.api.select.confident`'s keywords."""
    names = ("stability", "stability_threshold", "fdr", "fdr_method", "permutations")
    return {n: getattr(args, n) for n in names}


def add_confidence_options(p: argparse.ArgumentParser) -> None:
    """``--stability N`` and ``--fdr Q`` (:func:`fsdask.api.select.confident`)."""
    g = p.add_argument_group("stated confidence (stability selection, false discovery rate)")
    g.add_argument(
        "--stability",
        type=int,
        metavar="N",
        help="stability selection over N subsamples (complementary halves): keep the features "
        "selected in at least --stability-threshold of them",
    )
    g.add_argument(
        "--stability-threshold",
        type=float,
        default=0.6,
        metavar="T",
        help="selection frequency a stable feature reaches (default 0.6; > 0.5 for the bound)",
    )
    g.add_argument(
        "--fdr",
        type=float,
        metavar="Q",
        help="select at false discovery rate Q (filters with a test: their p-values; "
        "others: a label-permutation null, see --permutations)",
    )
    g.add_argument(
        "--fdr-method",
        choices=("bh", "by"),
        default="bh",
        help="Benjamini-Hochberg (default) or Benjamini-Yekutieli (any dependence)",
    )
    g.add_argument(
        "--permutations",
        type=int,
        metavar="B",
        help="label permutations of the FDR null (required for methods other than filters)",
    )


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
        params=_with_groups(parse_kv(args.param), args.groups),
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
        confidence=confidence(args),
        stdout=out,
        max_samples=args.max_samples,
    )
    return 0


def _with_groups(params: dict, groups: str | None) -> dict:
    """``--groups all`` or ``--groups A,B`` as the estimator's ``groups`` parameter."""
    if groups is None:
        return params
    return {**params, "groups": "all" if groups == "all" else groups.split(",")}
