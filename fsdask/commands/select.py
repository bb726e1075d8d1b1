"""``fsdask select URL --method NAME --output RESULT``: run one selection method."""

from __future__ import annotations

import argparse
import sys
import time

from fsdask.commands import add_scheduler, add_storage_options, parse_kv, storage_options


def add_parser(sub) -> argparse.ArgumentParser:
    from fsdask.methods import REGISTRY
    p = sub.add_parser("select", help="run a feature-selection method on a dataset",
                       description="Fit a method on a Zarr dataset and write the result (weight, rank, "
                                   "selected over feature) atomically as a Zarr store.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="methods: " + ", ".join(REGISTRY) +
                              "\nparameters are the estimator's keyword arguments, e.g. "
                              "--param k=6 --param n_features_to_select=50")
    p.add_argument("url", help="input dataset (made by `fsdask ingest`)")
    p.add_argument("--method", required=True, help="method name (see below)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                   help="estimator parameter, repeatable; values are parsed as YAML (3, 0.5, true, [1,2])")
    p.add_argument("--output", "-o", required=True, help="result store to write (local path or URL)")
    p.add_argument("--top", type=int, default=20, help="how many top features to print (default 20)")
    p.add_argument("--csv", help="also write the ranked table to this CSV file")
    p.add_argument("--no-overwrite", action="store_true", help="fail if the output exists")
    add_scheduler(p)
    add_storage_options(p)
    return p


def safe_url(url: str) -> str:
    """A URL with any user:password@ part removed, for provenance."""
    from fsdask.io.store import safe_url as _safe
    return _safe(url)


def write_csv(result, path: str) -> None:
    """The ranked table as CSV, written to a temporary file and renamed into place."""
    import os

    import numpy as np
    order = np.argsort(result["rank"].values, kind="stable")
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as fh:
            fh.write("rank,feature,weight,selected\n")
            for i in order:
                fh.write(f"{int(result['rank'].values[i])},{result['feature'].values[i]},"
                         f"{float(result['weight'].values[i]):.10g},{int(bool(result['selected'].values[i]))}\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def print_top(result, k: int, relevant: set | None = None, file=None) -> None:
    from fsdask.results import top_table
    file = file or sys.stdout
    print(f"{'rank':>6}  {'feature':<24} {'weight':>12}  selected" + ("  relevant" if relevant else ""), file=file)
    for r, f, w, s in top_table(result, k):
        mark = ("  yes" if f in relevant else "   -") if relevant is not None else ""
        print(f"{r:>6}  {f:<24} {w:>12.6g}  {'yes' if s else ' - '}     {mark}", file=file)


def run(args: argparse.Namespace) -> int:
    from fsdask.cluster import progress, scheduler
    from fsdask.io import open_dataset
    from fsdask.methods import get_method
    from fsdask.results import write_result

    so = storage_options(args)
    params = parse_kv(args.param)
    est = get_method(args.method, **params)
    ds = open_dataset(args.url, storage_options=so)
    t0 = time.perf_counter()
    with scheduler(args.scheduler, memory_limit=args.memory_limit, worker_timeout=args.worker_timeout) as client:
        with progress(client, enabled=not args.no_progress):
            est.fit(ds)
    result = est.result_
    result.attrs["input_store"] = safe_url(args.url)
    result.attrs["scheduler"] = args.scheduler
    path = write_result(result, args.output, storage_options=so, overwrite=not args.no_overwrite)
    if args.csv:
        write_csv(result, args.csv)
    print_top(result, args.top)
    print(f"\n{args.method}: {int(result['selected'].sum())} of {result.sizes['feature']} features selected "
          f"in {time.perf_counter() - t0:.1f} s; result written to {path}"
          + (f", table to {args.csv}" if args.csv else ""))
    return 0
