"""``select``: fit one selection method on a dataset and write its result."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any, Mapping, Sequence

from fsdask.api.common import check_count, running
from fsdask.api.spec import DATA_READS, command
from fsdask.io.options import ReadOptions


@command(outputs=("output", "csv"), inputs=("url",), reads=DATA_READS, result="output")
def select(
    url: str,
    *,
    method: str,
    output: str,
    params: Mapping[str, Any] | None = None,
    csv: str | None = None,
    top: int = 20,
    overwrite: bool = False,
    write_var: bool | Sequence[str] = False,
    scheduler: str = "threads",
    memory_limit: str | None = None,
    progress: bool = True,
    read: ReadOptions | None = None,
    storage_options: Mapping[str, Any] | None = None,
    checkpoint_every: Any = None,
    resume: bool | None = None,
    as_json: bool = False,
    confidence: Mapping[str, Any] | None = None,
    stdout=None,
    max_samples: int | None = None,
) -> str:
    """Fit ``method`` on the dataset at ``url``, write the result to ``output``; return its path.

    Every output location is checked before the fit starts; the CSV table is written before
    the result store, so a failing command never leaves a result behind.

    Parameters
    ----------
    url : str
        The input dataset.
    method, params, max_samples
        A name of :data:`fsdask.methods.REGISTRY`, the estimator's keyword arguments and its
        ``max_samples`` (qalpha, logo, laplacian_score: a seeded, class-stratified subsample).
    output : str
        The result store to write (local path or URL).
    csv, top
        Also write the ranked table to this CSV file; how many top features to print.
    overwrite, write_var
        Replace an fsdask result (or table) of the same kind at ``output`` / ``csv``. Write
        into the input AnnData-on-Zarr too (:func:`fsdask.write_var`; names: may replace).
    scheduler, memory_limit, progress
        Where to run (:func:`fsdask.cluster.scheduler`) and whether to show progress.
    read, storage_options
        How to read a dataset other tools wrote; fsspec storage options.
    checkpoint_every : int or str, optional
        Checkpoint iterative fits every ``5`` iterations or ``"60s"`` to
        ``<output>.fsdask-checkpoint``; it is removed once the result is published.
    resume : bool, optional
        Continue from (True) or ignore (False) an existing checkpoint; None: continue when one
        exists.
    as_json : bool
        Print one JSON object (:func:`summary`) instead of the table.
    confidence : mapping of :func:`confident`'s keywords (``stability=100``, ``fdr=0.05``)
    stdout : file, optional
        Where to print (default: ``sys.stdout``).

    Returns
    -------
    str
        The path of the result written.
    """
    from fsdask.io import open_dataset
    from fsdask.methods import get_method
    from fsdask.methods.quadratic import with_max_samples

    stdout = stdout or sys.stdout
    so = dict(storage_options or {})
    check_count(top, "--top")
    est = with_max_samples(get_method(method, **dict(params or {})), max_samples)
    est = confident(est, **dict(confidence or {}))
    ds = open_dataset(url, storage_options=so, **_read_for(est, read).as_dict())
    _check_outputs(url, output, csv, so, overwrite, (est.method_name, write_var, read))
    ckpt = _checkpoint(output, checkpoint_every, resume)
    t0 = time.perf_counter()
    _fit(est, ds, scheduler, memory_limit, progress, ckpt)
    result = est.result_
    path = _publish(result, url, ds, scheduler, output, csv, so, overwrite, write_var)
    _report(result, method, top, path, csv, time.perf_counter() - t0, as_json, stdout)
    return path


def _read_for(est, read: ReadOptions | None) -> ReadOptions:
    """The read options for ``est``: sample blocks as stored (``layout="auto"``) only for
    the methods linear in the samples (``streams_samples``), else feature blocks."""
    read = read or ReadOptions()
    return read if getattr(est, "streams_samples", False) else read.replace(layout="features")


def _fit(est, ds, scheduler: str, memory_limit: str | None, progress: bool, ckpt) -> None:
    """Fit where asked, showing progress: dask's tasks and the fit's own lines (its cost,
    its iterations and the time they may take)."""
    with running(scheduler, memory_limit, progress), ckpt:
        est.fit(ds)


def confident(
    est,
    *,
    stability: int | None = None,
    stability_threshold: float = 0.6,
    fdr: float | None = None,
    fdr_method: str = "bh",
    permutations: int | None = None,
    **unknown: Any,
):
    """``est`` wrapped for ``--fdr`` (:class:`fsdask.FDR`) then ``--stability``
    (:class:`fsdask.Stability`); unchanged without them (``select(confidence=…)``).

    Parameters
    ----------
    est : Selector
    stability, stability_threshold : int, float
        Stability selection over ``stability`` subsamples: the result holds the selection
        frequencies and the stable set at the threshold.
    fdr, fdr_method, permutations : float, str, int
        Select at false discovery rate ``fdr`` (``"bh"`` or ``"by"``; ``permutations`` for
        the permutation null).  With ``stability`` too, each subsample's selection is the
        FDR selection.

    Returns
    -------
    Selector
    """
    from fsdask.errors import ParameterError
    from fsdask.stability import FDR, Stability

    if unknown:
        raise ParameterError(
            f"confidence: unknown key(s) {', '.join(map(repr, unknown))}; valid: stability, "
            "stability_threshold, fdr, fdr_method, permutations"
        )
    if permutations is not None and fdr is None:
        raise ParameterError("--permutations is the null of --fdr; give --fdr Q too")
    if fdr is not None and not (isinstance(fdr, (int, float)) and 0 < fdr < 1):
        raise ParameterError(f"--fdr {fdr}: a false discovery rate in (0, 1), e.g. --fdr 0.05")
    if fdr is not None:
        est = FDR(est, q=fdr, method=fdr_method, n_permutations=permutations)
    if stability is not None:
        est = Stability(est, n_resamples=stability, threshold=stability_threshold)
    return est


def confidence_line(result) -> str | None:
    """One line on the result's stated confidence (stable set and bound, or FDR), or None."""
    a = result.attrs
    n_sel = int(result["selected"].sum())
    if "error_bound" in a:
        bound = a["error_bound"]
        return (
            f"stable set: {n_sel} feature(s) selected in >= {a['stability_threshold']:g} of "
            f"{a['n_resamples']} subsamples; expected false selections <= "
            + (f"{bound:.3g}" if bound >= 0 else "(no bound: threshold <= 0.5)")
        )
    if "fdr_q" in a:
        return f"{n_sel} feature(s) selected at FDR {a['fdr_q']:g} ({a['fdr_method'].upper()})"
    return None


def summary(
    result, *, method: str, top: int, output: str, csv: str | None, seconds: float
) -> dict[str, Any]:
    """What ``fsdask select --json`` prints: the run and its top features, JSON-able.

    Parameters
    ----------
    result : xarray.Dataset
        The result written.
    method, top, output, csv
        As given to :func:`select` (``output``: the path written).
    seconds : float
        The fit's wall time.

    Returns
    -------
    dict
        ``command``, ``method``, ``output``, ``csv``, ``n_features``, ``n_selected``,
        ``seconds``, ``n_iter``, ``converged`` and ``top`` (:func:`fsdask.results.top_records`).
    """
    from fsdask.results import top_records

    attrs = result.attrs
    return {
        "command": "select",
        "method": method,
        "output": output,
        "csv": csv,
        "n_features": int(result.sizes["feature"]),
        "n_selected": int(result["selected"].sum()),
        "seconds": round(float(seconds), 3),
        # the result's attributes say -1 / "n/a" for methods without iterations
        "n_iter": int(attrs["n_iter"]) if int(attrs.get("n_iter", -1)) >= 0 else None,
        "converged": attrs["converged"] if isinstance(attrs.get("converged"), bool) else None,
        "top": top_records(result, top),
    }


def _check_outputs(
    url: str, output: str, csv: str | None, so: dict, overwrite: bool, var: tuple = (None, False)
) -> None:
    """Refuse, before the fit, an output place that may not be written; ``var``: (method
    name, ``write_var``, read options) — the input is an output place with ``write_var``."""
    from fsdask.errors import ParameterError
    from fsdask.io.outputs import check_output, same_location
    from fsdask.io.writeback import check_write_var

    if var[1] is not False:
        names = () if var[1] is True else var[1]
        opts = var[2] or ReadOptions()
        check_write_var(url, var[0], overwrite=names, storage_options=so, variable=opts.variable)
    check_output(output, so, kind="result", overwrite=overwrite, inputs=(url,))
    if csv:
        if same_location(csv, output):
            raise ParameterError(
                f"--csv {csv} and --output {output} name the same place; give two paths"
            )
        check_output(csv, kind="csv", overwrite=overwrite, inputs=(url,))


def _publish(result, url, ds, scheduler, output, csv, so, overwrite, write_var=False) -> str:
    """Record the provenance, write the var columns into the input (``write_var``), the
    table then the result; drop the served checkpoint."""
    from fsdask import results
    from fsdask.io.store import safe_url
    from fsdask.io.writeback import write_var as write_columns

    result.attrs["input_store"] = safe_url(url)
    result.attrs["input_verified"] = bool(ds.attrs.get("verified", False))
    result.attrs["scheduler"] = safe_url(scheduler)
    if write_var is not False:  # recorded in the result: where its selection was written
        names = () if write_var is True else write_var
        written = write_columns(url, result, overwrite=names, storage_options=so)
        result.attrs["var_columns_written"] = written
    if csv:
        results.write_csv(result, csv, overwrite=overwrite, inputs=(url,))
    path = results.write_result(
        result, output, storage_options=so, overwrite=overwrite, inputs=(url,)
    )
    if ckpt_path(output) and os.path.isfile(ckpt_path(output)):
        os.remove(ckpt_path(output))  # the result is published: the checkpoint has served
    return path


def _report(result, method, top, path, csv, seconds, as_json, stdout) -> None:
    from fsdask import results

    if as_json:
        record = summary(result, method=method, top=top, output=path, csv=csv, seconds=seconds)
        print(json.dumps(record), file=stdout)
        return

    results.print_top(result, top, file=stdout)
    if result.attrs.get("var_columns_written"):
        written = ", ".join(result.attrs["var_columns_written"])
        print(f"\nvar columns {written} written into {result.attrs['input_store']}", file=stdout)
    print(
        f"\n{method}: {int(result['selected'].sum())} of {result.sizes['feature']} features selected "
        f"in {seconds:.1f} s; result written to {path}" + (f", table to {csv}" if csv else ""),
        file=stdout,
    )
    line = confidence_line(result)
    if line:
        print(line, file=stdout)


def ckpt_path(output: str) -> str | None:
    """Where the checkpoint of the fit writing ``output`` lives.

    Parameters
    ----------
    output : str
        The result's location.

    Returns
    -------
    str or None
        ``<output>.fsdask-checkpoint`` as a local path; None for a remote ``output``.
    """
    from fsdask.io.location import Location

    loc = Location.of(output)
    return loc.abspath + ".fsdask-checkpoint" if loc.is_local else None


def _checkpoint(output: str, every: Any, resume: bool | None):
    """The checkpointing context of a fit: on with ``every`` or when a checkpoint exists (and is not ignored)."""
    from fsdask.checkpoint import checkpointing
    from fsdask.errors import ParameterError

    path = ckpt_path(output)
    if path is None:
        if every is not None or resume:
            raise ParameterError(
                f"--checkpoint-every/--resume need a local --output (the checkpoint is "
                f"stored next to it); {output} is remote"
            )
        return contextlib.nullcontext()
    if every is None and not (resume is not False and os.path.exists(path)) and not resume:
        return contextlib.nullcontext()
    return checkpointing(path, "60s" if every is None else every, resume=resume is not False)
