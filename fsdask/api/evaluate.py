"""``evaluate``: cross-validated error of a selection as a function of the number of
top-ranked features (or, unsupervised, the reconstruction error of the top features)."""

from __future__ import annotations

import sys
from typing import Any, Mapping

import numpy as np

from fsdask.api.common import check_count, open_data, running
from fsdask.api.spec import DATA_READS, command
from fsdask.io.options import ReadOptions


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


def _reconstruction_curve(ds, result, method, params, so, max_features) -> tuple[str, np.ndarray]:
    """(method name, reconstruction error of the top 1..q features), ranked on all samples."""
    from fsdask.evaluate import reconstruction_curve

    order, name, _ = _ranking(ds, result, method, params, so)
    q = min(max_features, order.size)
    return name, reconstruction_curve(ds["X"], order[:q])


def _print_reconstruction(name: str, curve: np.ndarray, all_rows: bool, stdout) -> None:
    q = curve.size
    print(
        f"**{name}** — normalised reconstruction error ‖X − X_S X_S⁺ X‖²_F / ‖X‖²_F of the top q features "
        "(features centred; ranking on all samples)\n",
        file=stdout,
    )
    print("| q | reconstruction error | PEV |\n|---:|---:|---:|", file=stdout)
    shown = sorted({m for m in (1, 2, 3, 5, 10, 20, 30, 40, 50, 100, 200, 500) if m <= q} | {q})
    for m in range(1, q + 1) if all_rows else shown:
        print(f"| {m} | {curve[m - 1]:.5f} | {1 - curve[m - 1]:.5f} |", file=stdout)


def _write_reconstruction(curve: np.ndarray, csv: str, overwrite: bool, inputs, stdout) -> None:
    import pandas as pd

    from fsdask.results import write_table

    table = pd.DataFrame(
        {"reconstruction_error": curve, "pev": 1 - curve},
        index=pd.Index(np.arange(1, curve.size + 1), name="n_features"),
    )
    write_table(table, csv, overwrite=overwrite, inputs=inputs)
    print(f"curve written to {csv}", file=stdout)


@command(outputs=("output", "csv"), inputs=("data", "result"), reads=DATA_READS)
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
    progress: bool = True,
    read: ReadOptions | None = None,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
):
    """Cross-validate a selection (or its reconstruction error); print and optionally write it.

    Output locations are checked before anything is computed.

    Parameters
    ----------
    data : str
        The dataset: a store :func:`fsdask.open_dataset` reads, or a ``.npz`` file.
    result, method, params
        A result of ``select`` whose ranking is evaluated, or the selector (registry name and
        parameters) refitted in the protocol: one of the two.
    protocol, folds, seed, classifier, C, neighbors, selection, max_features, standardize, parallel
        The protocol (:func:`fsdask.evaluate.evaluate`).
    reconstruction : bool
        Print the reconstruction error of the top features instead of a classifier's error.
    output, csv, all_rows, overwrite
        Where to write the evaluation store and the error curve; print every row; replace
        fsdask outputs of the same kind.
    scheduler, memory_limit, progress
        Where to run (:func:`fsdask.cluster.scheduler`, the folds included) and whether to
        show progress.
    read, storage_options, stdout
        How to read a dataset other tools wrote; fsspec options; where to print.

    Returns
    -------
    EvaluationResult or None
        The :class:`~fsdask.evaluate.EvaluationResult`; None with ``reconstruction``.
    """
    stdout = stdout or sys.stdout
    so = dict(storage_options or {})
    inputs = _check(data, result, method, selection, max_features, output, csv, so, overwrite)
    ds = open_data(data, so, read)
    if reconstruction:
        with running(scheduler, memory_limit, progress):
            name, curve = _reconstruction_curve(ds, result, method, params, so, max_features)
        _print_reconstruction(name, curve, all_rows, stdout)
        if csv:
            _write_reconstruction(curve, csv, overwrite, inputs, stdout)
        return None
    refit = dict(selection=selection or "inside", parallel=parallel)
    common = dict(protocol=protocol, n_splits=folds, classifier=classifier, C=C)
    common.update(n_neighbors=neighbors, n_features=max_features, random_state=seed)
    common.update(standardize=standardize)
    with running(scheduler, memory_limit, progress):
        res = _cross_validate(ds, result, method, params, so, refit, common)
    _print(res, ds, all_rows, stdout)
    _write(res, output, csv, so, overwrite, inputs, stdout)
    return res


def _cross_validate(ds, result, method, params, so, refit: dict, common: dict):
    """The evaluation of a saved result's ranking, or of ``method`` refitted in the protocol."""
    if result is not None:
        from fsdask.evaluate import evaluate_result
        from fsdask.results import open_result

        return evaluate_result(ds, None, open_result(result, storage_options=so), **common)
    from fsdask.evaluate import evaluate as cv_evaluate

    return cv_evaluate(ds, None, method, dict(params or {}), **refit, **common)


def _check(data, result, method, selection, max_features, output, csv, so, overwrite) -> tuple:
    """Refuse contradictory options and unwritable outputs; return the inputs."""
    from fsdask.errors import ParameterError
    from fsdask.io.outputs import check_output, same_location

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
    return inputs


def _print(res, ds, all_rows: bool, stdout) -> None:
    """The curve, the best error, the protocol and (with planted truth) the false-discovery rate."""
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


def _write(res, output, csv, so, overwrite: bool, inputs: tuple, stdout) -> None:
    from fsdask.evaluate import write_evaluation
    from fsdask.results import write_table

    if csv:
        write_table(res.curve, csv, overwrite=overwrite, inputs=inputs)
        print(f"curve written to {csv}", file=stdout)
    if output:
        path = write_evaluation(res, output, storage_options=so, overwrite=overwrite, inputs=inputs)
        print(f"evaluation written to {path}", file=stdout)
