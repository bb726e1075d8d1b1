"""``fsdask evaluate DATA --method NAME …`` / ``fsdask evaluate DATA RESULT``: cross-validated
error of a selection as a function of the number of top-ranked features."""

from __future__ import annotations

import argparse

import numpy as np

from fsdask.commands import add_scheduler, add_storage_options, parse_kv, storage_options

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
    p = sub.add_parser("evaluate", help="cross-validate a selection (LOO / k-fold, SVM / KNN)",
                       description="Cross-validated classification error as a function of the number of "
                                   "top-ranked features, with the protocol spelled out in the output.",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("data", help="dataset: a Zarr store made by `fsdask ingest`, or a .npz file")
    p.add_argument("result", nargs="?", help="a result written by `fsdask select` (instead of --method)")
    p.add_argument("--method", help="selection method to refit (registry name, as for `fsdask select`)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                   help="method parameter, repeatable (values parsed as YAML)")
    p.add_argument("--protocol", choices=("loo", "kfold"), default="loo")
    p.add_argument("--folds", type=int, default=10, help="number of folds for --protocol kfold (default 10)")
    p.add_argument("--seed", type=int, default=0, help="shuffling seed of the k folds (default 0)")
    p.add_argument("--classifier", choices=("svm", "knn"), default="svm",
                   help="linear SVM (default) or k-nearest neighbours")
    p.add_argument("--C", type=float, default=1.0, help="SVM C (default 1)")
    p.add_argument("--neighbors", type=int, default=3, help="k of k-NN (default 3)")
    p.add_argument("--selection", choices=("inside", "once"), default=None,
                   help="refit the selector inside each fold (default with --method) or once on all "
                        "samples (the only choice for a saved RESULT)")
    p.add_argument("--max-features", type=int, default=50, help="feed the top 1..N features (default 50)")
    p.add_argument("--no-standardize", action="store_true", help="feed raw features to the classifier")
    p.add_argument("--parallel", choices=("auto", "folds", "within"), default="auto",
                   help="folds as parallel tasks (X in memory), or folds in turn with each selection "
                        "parallel over feature blocks (auto: folds when X ≤ 2 GiB)")
    p.add_argument("--reconstruction", action="store_true",
                   help="unsupervised: instead of a classifier, print the normalised reconstruction error "
                        "‖X − X_S X_S⁺ X‖²/‖X‖² (and PEV = 1 − it) of the top 1..--max-features features, "
                        "ranked on all samples")
    p.add_argument("--output", "-o", help="write the evaluation (.zarr store or .nc file)")
    p.add_argument("--csv", help="write the error curve to this CSV file")
    p.add_argument("--all-rows", action="store_true", help="print the curve for every m")
    add_scheduler(p)
    add_storage_options(p)
    return p


def open_data(url: str, so: dict | None = None):
    """An fsdask dataset from a Zarr store or a ``.npz`` file (shared/data layout)."""
    if str(url).endswith(".npz"):
        from fsdask.datasets.shared import load_npz, to_dataset
        X, y, info = load_npz(url)
        return to_dataset(X, y, info)
    from fsdask.io import open_dataset
    return open_dataset(url, storage_options=so)


def _ranking(args, ds, so) -> tuple[np.ndarray, str, "object"]:
    """(feature indices best first, method name, result or None) on all samples."""
    from fsdask.evaluate.protocol import check_result_matches, ranking_of
    if args.result is not None:
        from fsdask.results import open_result
        result = open_result(args.result, storage_options=so)
        names = ds["X"]["feature"].values if "feature" in ds["X"].coords else None
        check_result_matches(result, ds.sizes["feature"], names)
        return np.argsort(result["rank"].values, kind="stable"), str(result.attrs.get("method", "result")), result
    from fsdask.methods import get_method
    est = get_method(args.method, **parse_kv(args.param)).fit(ds)
    return ranking_of(est), args.method, est.result_


def _reconstruction(args, ds, so) -> int:
    from fsdask.cluster import scheduler
    from fsdask.evaluate import reconstruction_curve
    with scheduler(args.scheduler, memory_limit=args.memory_limit, worker_timeout=args.worker_timeout):
        order, name, _ = _ranking(args, ds, so)
        q = min(args.max_features, order.size)
        curve = reconstruction_curve(ds["X"], order[:q])
    print(f"**{name}** — normalised reconstruction error ‖X − X_S X_S⁺ X‖²_F / ‖X‖²_F of the top q features "
          "(features centred; ranking on all samples)\n")
    print("| q | reconstruction error | PEV |\n|---:|---:|---:|")
    shown = sorted({m for m in (1, 2, 3, 5, 10, 20, 30, 40, 50, 100, 200, 500) if m <= q} | {q})
    for m in (range(1, q + 1) if args.all_rows else shown):
        print(f"| {m} | {curve[m - 1]:.5f} | {1 - curve[m - 1]:.5f} |")
    if args.csv:
        import pandas as pd
        pd.DataFrame({"reconstruction_error": curve, "pev": 1 - curve},
                     index=pd.Index(np.arange(1, q + 1), name="n_features")).to_csv(args.csv)
        print(f"curve written to {args.csv}")
    return 0


def run(args: argparse.Namespace) -> int:
    from fsdask.errors import ParameterError
    from fsdask.evaluate import evaluate, evaluate_result, write_evaluation

    so = storage_options(args)
    if (args.result is None) == (args.method is None):
        raise ParameterError("give either --method NAME (refit in the protocol) or a RESULT store to evaluate, "
                             "not both and not neither")
    if args.result is not None and args.selection == "inside":
        raise ParameterError("a saved RESULT was ranked on all samples: only --selection once applies; "
                             "use --method NAME to refit inside each fold")
    ds = open_data(args.data, so)
    if args.reconstruction:
        return _reconstruction(args, ds, so)
    common = dict(protocol=args.protocol, n_splits=args.folds, classifier=args.classifier, C=args.C,
                  n_neighbors=args.neighbors, n_features=args.max_features, random_state=args.seed,
                  standardize=not args.no_standardize, scheduler=args.scheduler)
    if args.result is not None:
        from fsdask.results import open_result
        res = evaluate_result(ds, None, open_result(args.result, storage_options=so), **common)
    else:
        res = evaluate(ds, None, args.method, parse_kv(args.param), selection=args.selection or "inside",
                       parallel=args.parallel, **common)
    print(res.to_markdown(rows="all" if args.all_rows else None))
    print(f"top features (first fold): {', '.join(res.top_features(10))}")
    print(f"{res.method}: best error {res.best_error:.4f} ({res.best_n_errors}/{res.n_samples}) with the top "
          f"{res.best_n_features} feature(s); {res.wall_time_s:.1f} s")
    print(f"protocol: {res.label}")
    relevant = ds.attrs.get("relevant_features")
    if relevant is not None and len(relevant):
        from fsdask.evaluate import false_discovery_rate
        k = len(relevant)
        fdr = [false_discovery_rate(r[:k], relevant) for r in res.fold_rankings if r.size >= k]
        if fdr:
            print(f"truth ({k} relevant features in the dataset's attrs): false-discovery rate of the top {k}, "
                  f"mean over {len(fdr)} ranking(s): {np.mean(fdr):.3f}")
    if args.output:
        print(f"evaluation written to {write_evaluation(res, args.output)}")
    if args.csv:
        res.curve.to_csv(args.csv)
        print(f"curve written to {args.csv}")
    return 0
