"""``fsdask evaluate DATA --method NAME …`` / ``fsdask evaluate DATA RESULT``: cross-validated
error of a selection as a function of the number of top-ranked features."""

from __future__ import annotations

import argparse

from fsdask.api import evaluate, parse_kv
from fsdask.cli.options import (
    add_data_options,
    add_overwrite,
    add_scheduler,
    add_storage_options,
    read_options,
    storage_options,
)

EPILOG = """\
protocols
  --protocol loo            leave-one-out (the papers' microarray protocol)
  --protocol kfold          stratified k-fold (--folds K, shuffled with --seed)
  --selection inside        refit the selector on every training fold (honest; default)
  --selection once          rank once on all samples, cross-validate only the classifier
                            (what several papers did; optimistic, and labelled so)
The classifier (linear SVM or k-NN) is trained on the top m features for m = 1..--max-features;
features are standardised with each training fold's mean and sd.

examples
  fsdask evaluate golub.zarr --method ttest --protocol loo --classifier svm
  fsdask evaluate golub.zarr --method logo --param kernel_width=2 --protocol kfold --folds 10
  fsdask evaluate golub.zarr result.zarr          # a saved result's ranking (selection once)
  fsdask evaluate ../shared/data/colon_alon.npz --method snr --output eval.zarr --csv curve.csv
"""


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``fsdask evaluate`` to the subparsers ``sub``; return its parser."""
    p = sub.add_parser(
        "evaluate",
        help="cross-validate a selection (LOO / k-fold, SVM / KNN)",
        description="Cross-validated classification error as a function of the number of "
        "top-ranked features, with the protocol spelled out in the output.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    p.add_argument("data", help="dataset: a Zarr store made by `fsdask ingest`, or a .npz file")
    p.add_argument(
        "result", nargs="?", help="a result written by `fsdask select` (instead of --method)"
    )
    p.add_argument(
        "--method", help="selection method to refit (registry name, as for `fsdask select`)"
    )
    p.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="method parameter, repeatable (values parsed as YAML)",
    )
    p.add_argument(
        "--protocol",
        choices=("loo", "kfold"),
        default="loo",
        help="leave-one-out or stratified k-fold cross-validation (default loo)",
    )
    p.add_argument(
        "--folds", type=int, default=10, help="number of folds for --protocol kfold (default 10)"
    )
    p.add_argument("--seed", type=int, default=0, help="shuffling seed of the k folds (default 0)")
    p.add_argument(
        "--classifier",
        choices=("svm", "knn"),
        default="svm",
        help="linear SVM (default) or k-nearest neighbours",
    )
    p.add_argument("--C", type=float, default=1.0, help="SVM C (default 1)")
    p.add_argument("--neighbors", type=int, default=3, help="k of k-NN (default 3)")
    p.add_argument(
        "--selection",
        choices=("inside", "once"),
        default=None,
        help="refit the selector inside each fold (default with --method) or once on all "
        "samples (the only choice for a saved RESULT)",
    )
    p.add_argument(
        "--max-features", type=int, default=50, help="feed the top 1..N features (default 50)"
    )
    p.add_argument(
        "--no-standardize", action="store_true", help="feed raw features to the classifier"
    )
    p.add_argument(
        "--parallel",
        choices=("auto", "folds", "within"),
        default="auto",
        help="folds as parallel tasks (X in memory), or folds in turn with each selection "
        "parallel over feature blocks (auto: folds when X fits fsdask.memory-budget, 1 GiB)",
    )
    p.add_argument(
        "--reconstruction",
        action="store_true",
        help="unsupervised: instead of a classifier, print the normalised reconstruction error "
        "‖X − X_S X_S⁺ X‖²/‖X‖² (and PEV = 1 − it) of the top 1..--max-features features, "
        "ranked on all samples",
    )
    p.add_argument(
        "--output",
        "-o",
        help="write the evaluation (.zarr store, local or fsspec URL, or a local .nc file)",
    )
    p.add_argument("--csv", help="write the error curve to this CSV file")
    p.add_argument("--all-rows", action="store_true", help="print the curve for every m")
    add_overwrite(p)
    add_scheduler(p)
    add_storage_options(p)
    add_data_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Call :func:`fsdask.api.evaluate` with the parsed options; return the exit status (0)."""
    evaluate(
        args.data,
        args.result,
        method=args.method,
        params=parse_kv(args.param),
        protocol=args.protocol,
        folds=args.folds,
        seed=args.seed,
        classifier=args.classifier,
        C=args.C,
        neighbors=args.neighbors,
        selection=args.selection,
        max_features=args.max_features,
        standardize=not args.no_standardize,
        parallel=args.parallel,
        reconstruction=args.reconstruction,
        output=args.output,
        csv=args.csv,
        all_rows=args.all_rows,
        overwrite=args.overwrite,
        scheduler=args.scheduler,
        memory_limit=args.memory_limit,
        progress=not args.no_progress,
        read=read_options(args),
        storage_options=storage_options(args),
    )
    return 0
