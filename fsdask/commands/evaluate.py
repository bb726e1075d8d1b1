"""``fsdask evaluate DATA --method NAME …`` / ``fsdask evaluate DATA RESULT``: cross-validated
error of a selection as a function of the number of top-ranked features."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

import numpy as np

from fsdask.commands import (
    add_data_options,
    add_overwrite,
    add_scheduler,
    add_storage_options,
    check_count,
    data_options,
    parse_kv,
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
    p.add_argument("--protocol", choices=("loo", "kfold"), default="loo")
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


def open_data(url: str, so: Mapping[str, Any] | None = None, read: Mapping[str, Any] | None = None):
    """An fsdask dataset from a Zarr store or a ``.npz`` file (shared/data layout)."""
    if str(url).endswith(".npz"):
        import zipfile

        from fsdask.datasets.shared import load_npz, to_dataset
        from fsdask.errors import FsdaskError, InputError

        try:
            X, y, info = load_npz(url)
        except FsdaskError:
            raise
        except FileNotFoundError:
            raise InputError(f"{url}: no such file") from None
        except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise InputError(
                f"{url}: not a readable .npz dataset ({type(exc).__name__}: {msg}); expected the "
                "layout of shared/data/README.md (arrays X, y, …, saved without pickles)"
            ) from None
        return to_dataset(X, y, info)
    from fsdask.io import open_dataset

    return open_dataset(url, storage_options=so, **dict(read or {}))


def _ranking(ds, result, method, params, so) -> tuple[np.ndarray, str, object]:
    """(feature indices best first, method name, result or None) on all samples."""
    from fsdask.evaluate.protocol import check_result_matches, ranking_of

    if result is not None:
        from fsdask.results import open_result

        res = open_result(result, storage_options=so)
        names = ds["X"]["feature"].values if "feature" in ds["X"].coords else None
        check_result_matches(res, ds.sizes["feature"], names)
        return (
            np.argsort(res["rank"].values, kind="stable"),
            str(res.attrs.get("method", "result")),
            res,
        )
    from fsdask.methods import get_method

    est = get_method(method, **dict(params or {})).fit(ds)
    return ranking_of(est), method, est.result_


def _reconstruction(
    ds,
    result,
    method,
    params,
    so,
    *,
    max_features,
    all_rows,
    csv,
    overwrite,
    inputs,
    scheduler,
    memory_limit,
    stdout,
) -> None:
    from fsdask.cluster import scheduler as run_on
    from fsdask.evaluate import reconstruction_curve
    from fsdask.results import write_table

    with run_on(scheduler, memory_limit=memory_limit):
        order, name, _ = _ranking(ds, result, method, params, so)
        q = min(max_features, order.size)
        curve = reconstruction_curve(ds["X"], order[:q])
    print(
        f"**{name}** — normalised reconstruction error ‖X − X_S X_S⁺ X‖²_F / ‖X‖²_F of the top q features "
        "(features centred; ranking on all samples)\n",
        file=stdout,
    )
    print("| q | reconstruction error | PEV |\n|---:|---:|---:|", file=stdout)
    shown = sorted({m for m in (1, 2, 3, 5, 10, 20, 30, 40, 50, 100, 200, 500) if m <= q} | {q})
    for m in range(1, q + 1) if all_rows else shown:
        print(f"| {m} | {curve[m - 1]:.5f} | {1 - curve[m - 1]:.5f} |", file=stdout)
    if csv:
        import pandas as pd

        table = pd.DataFrame(
            {"reconstruction_error": curve, "pev": 1 - curve},
            index=pd.Index(np.arange(1, q + 1), name="n_features"),
        )
        write_table(table, csv, overwrite=overwrite, inputs=inputs)
        print(f"curve written to {csv}", file=stdout)


def evaluate(
    data: str,
    result: str | None = None,
    *,
    method: str | None = None,
    params: Mapping[str, Any] | None = None,
    protocol: str = "loo",
    folds: int = 10,
    seed: int = 0,
    classifier: str = "svm",
    C: float = 1.0,
    neighbors: int = 3,
    selection: str | None = None,
    max_features: int = 50,
    standardize: bool = True,
    parallel: str = "auto",
    reconstruction: bool = False,
    output: str | None = None,
    csv: str | None = None,
    all_rows: bool = False,
    overwrite: bool = False,
    scheduler: str = "threads",
    memory_limit: str | None = None,
    variable: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    label: str | None = None,
    rechunk_to: str | None = None,
    memory_budget: Any = None,
    drop_unlabelled: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
):
    """Cross-validate a selection (or its reconstruction error); print and optionally write it.

    Returns the :class:`~fsdask.evaluate.EvaluationResult` (None with ``reconstruction``).
    Output locations are checked before anything is computed.
    """
    from fsdask.errors import ParameterError
    from fsdask.evaluate import evaluate as cv_evaluate
    from fsdask.evaluate import evaluate_result, write_evaluation
    from fsdask.io.outputs import check_output, same_location
    from fsdask.results import write_table

    stdout = stdout or sys.stdout
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
    if (result is None) == (method is None):
        raise ParameterError(
            "give either --method NAME (refit in the protocol) or a RESULT store to evaluate, "
            "not both and not neither"
        )
    if result is not None and selection == "inside":
        raise ParameterError(
            "a saved RESULT was ranked on all samples: only --selection once applies; "
            "use --method NAME to refit inside each fold"
        )
    check_count(max_features, "--max-features", 1)
    inputs = tuple(x for x in (data, result) if x is not None)
    if output and csv and same_location(output, csv):
        raise ParameterError(
            f"--output {output} and --csv {csv} name the same place; give two paths"
        )
    if output:
        check_output(output, so, kind="evaluation", overwrite=overwrite, inputs=inputs)
    if csv:
        check_output(csv, kind="csv", overwrite=overwrite, inputs=inputs)
    ds = open_data(data, so, read)
    if reconstruction:
        _reconstruction(
            ds,
            result,
            method,
            params,
            so,
            max_features=max_features,
            all_rows=all_rows,
            csv=csv,
            overwrite=overwrite,
            inputs=inputs,
            scheduler=scheduler,
            memory_limit=memory_limit,
            stdout=stdout,
        )
        return None
    common = dict(
        protocol=protocol,
        n_splits=folds,
        classifier=classifier,
        C=C,
        n_neighbors=neighbors,
        n_features=max_features,
        random_state=seed,
        standardize=standardize,
        scheduler=scheduler,
    )
    if result is not None:
        from fsdask.results import open_result

        res = evaluate_result(ds, None, open_result(result, storage_options=so), **common)
    else:
        res = cv_evaluate(
            ds,
            None,
            method,
            dict(params or {}),
            selection=selection or "inside",
            parallel=parallel,
            **common,
        )
    print(res.to_markdown(rows="all" if all_rows else None), file=stdout)
    print(f"top features (first fold): {', '.join(res.top_features(10))}", file=stdout)
    print(
        f"{res.method}: best error {res.best_error:.4f} ({res.best_n_errors}/{res.n_samples}) with the top "
        f"{res.best_n_features} feature(s); {res.wall_time_s:.1f} s",
        file=stdout,
    )
    print(f"protocol: {res.label}", file=stdout)
    relevant = ds.attrs.get("relevant_features")
    if relevant is not None and len(relevant):
        from fsdask.evaluate import false_discovery_rate

        k = len(relevant)
        fdr = [false_discovery_rate(r[:k], relevant) for r in res.fold_rankings if r.size >= k]
        if fdr:
            print(
                f"truth ({k} relevant features in the dataset's attrs): false-discovery rate of the top {k}, "
                f"mean over {len(fdr)} ranking(s): {np.mean(fdr):.3f}",
                file=stdout,
            )
    if csv:
        write_table(res.curve, csv, overwrite=overwrite, inputs=inputs)
        print(f"curve written to {csv}", file=stdout)
    if output:
        path = write_evaluation(res, output, storage_options=so, overwrite=overwrite, inputs=inputs)
        print(f"evaluation written to {path}", file=stdout)
    return res


def run(args: argparse.Namespace) -> int:
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
        storage_options=storage_options(args),
        **data_options(args),
    )
    return 0
