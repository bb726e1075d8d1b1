"""``fsdask select URL --method NAME --output RESULT``: run one selection method."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any, Mapping

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


def add_parser(sub) -> argparse.ArgumentParser:
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
    p.add_argument("--no-overwrite", action="store_true", help=argparse.SUPPRESS)  # the default now
    add_scheduler(p)
    add_storage_options(p)
    add_data_options(p)
    return p


def select(
    url: str,
    *,
    method: str,
    output: str,
    params: Mapping[str, Any] | None = None,
    csv: str | None = None,
    top: int = 20,
    overwrite: bool = False,
    scheduler: str = "threads",
    memory_limit: str | None = None,
    progress: bool = True,
    variable: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    label: str | None = None,
    rechunk_to: str | None = None,
    memory_budget: Any = None,
    drop_unlabelled: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    checkpoint_every: Any = None,
    resume: bool | None = None,
    stdout=None,
) -> str:
    """Fit ``method`` on the dataset at ``url``, write the result to ``output``; return its path.

    Every output location is checked before the fit starts; the CSV table is written before
    the result store, so a failing command never leaves a result behind.

    ``checkpoint_every`` (``5`` iterations or ``"60s"``) checkpoints iterative fits to
    ``<output>.fsdask-checkpoint``; an existing checkpoint there is resumed unless
    ``resume=False`` (``--restart``); it is removed once the result is published.
    """
    from fsdask import results
    from fsdask.cluster import progress as show_progress
    from fsdask.cluster import scheduler as run_on
    from fsdask.errors import ParameterError
    from fsdask.io import open_dataset
    from fsdask.io.outputs import check_output, same_location
    from fsdask.io.store import safe_url
    from fsdask.methods import get_method

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
    check_count(top, "--top")
    est = get_method(method, **dict(params or {}))
    ds = open_dataset(url, storage_options=so, **read)
    check_output(output, so, kind="result", overwrite=overwrite, inputs=(url,))
    if csv:
        if same_location(csv, output):
            raise ParameterError(
                f"--csv {csv} and --output {output} name the same place; give two paths"
            )
        check_output(csv, kind="csv", overwrite=overwrite, inputs=(url,))
    ckpt = _checkpoint(output, checkpoint_every, resume)
    t0 = time.perf_counter()
    with run_on(scheduler, memory_limit=memory_limit) as client:
        with show_progress(client, enabled=progress), ckpt:
            est.fit(ds)
    result = est.result_
    result.attrs["input_store"] = safe_url(url)
    result.attrs["input_verified"] = bool(ds.attrs.get("verified", False))
    result.attrs["scheduler"] = safe_url(scheduler)
    if csv:
        results.write_csv(result, csv, overwrite=overwrite, inputs=(url,))
    path = results.write_result(
        result, output, storage_options=so, overwrite=overwrite, inputs=(url,)
    )
    if ckpt_path(output) and os.path.isfile(ckpt_path(output)):
        os.remove(ckpt_path(output))  # the result is published: the checkpoint has served
    results.print_top(result, top, file=stdout)
    print(
        f"\n{method}: {int(result['selected'].sum())} of {result.sizes['feature']} features selected "
        f"in {time.perf_counter() - t0:.1f} s; result written to {path}"
        + (f", table to {csv}" if csv else ""),
        file=stdout,
    )
    return path


def ckpt_path(output: str) -> str | None:
    """Where the checkpoint of the fit writing ``output`` lives (None for remote outputs)."""
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


def run(args: argparse.Namespace) -> int:
    select(
        args.url,
        method=args.method,
        output=args.output,
        params=parse_kv(args.param),
        csv=args.csv,
        top=args.top,
        overwrite=args.overwrite,
        scheduler=args.scheduler,
        memory_limit=args.memory_limit,
        progress=not args.no_progress,
        storage_options=storage_options(args),
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        **data_options(args),
    )
    return 0
