"""I/O floor of a streaming pass, and what each baseline filter costs on top of it.

Writes a float32 store of ``--samples`` × ``--features`` (default 100 × 1 000 000, i.e.
"10⁶ features by 100 samples", ≈ 400 MB, 64 MiB feature blocks) chunk by chunk with
``lazy_from_blocks`` + ``write_dataset``, then prints

* the floor: one streaming pass over X (``X.sum()``) with the threaded scheduler and with a
  2-process ``LocalCluster``;
* the wall time of ``fsdask.Filter(score).fit(ds)`` for every filter (threads), and its
  ratio to the threaded floor.  The target is ≤ 1.5× the floor.  For ttest, f and pearson
  a second line adds the first read of ``pvalues_`` (p-values are evaluated then).

Run (one benchmark at a time on a shared machine):

    flock /work/.bench.lock python benchmarks/io_floor.py
    flock /work/.bench.lock python benchmarks/io_floor.py --samples 1000000 --features 100
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Bench, add_args  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--features", type=int, default=1_000_000)
    ap.add_argument("--chunk-mb", type=float, default=64.0)
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "out", "io_floor.zarr")
    )
    ap.add_argument(
        "--reuse", action="store_true", help="reuse an existing store of the right shape"
    )
    add_args(ap, "io_floor")
    ap.add_argument("--filters", default="variance,pearson,fisher,f,ttest,snr,fold_change,ks")
    ap.add_argument("--no-cluster", action="store_true", help="skip the LocalCluster floor")
    args = ap.parse_args()

    import dask
    import xarray as xr

    import fsdask
    from fsdask._validation import feature_block_size
    from fsdask.io.ingest import lazy_from_blocks

    bench = Bench("io_floor", args.results)
    n, p = args.samples, args.features
    chunk_bytes = int(args.chunk_mb * 2**20)
    block = min(p, feature_block_size(n, 4, chunk_bytes))
    y = np.arange(n) % 2
    reuse = False
    if args.reuse and os.path.exists(args.out):
        try:
            reuse = tuple(fsdask.open_dataset(args.out)["X"].shape) == (n, p)
        except Exception:
            reuse = False
    if not reuse:

        def make_block(j0: int, j1: int) -> np.ndarray:
            rng = np.random.default_rng([7, j0])
            xb = (
                rng.standard_normal((n, j1 - j0), dtype=np.float32) + 5.0
            )  # positive-ish intensities
            xb[y == 1, : max(1, (j1 - j0) // 100)] += 1.0
            return xb

        X = lazy_from_blocks(make_block, n, p, block)
        ds = xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y)})
        shutil.rmtree(args.out, ignore_errors=True)
        with dask.config.set(scheduler="threads"):
            t, _ = bench.once(
                lambda: fsdask.write_dataset(ds, args.out, block=block, overwrite=True)
            )
        bench.line(
            f"write   {n} × {p} float32 ({n * p * 4 / 2**20:.0f} MiB, {-(-p // block)} blocks of {block} "
            f"features) chunk by chunk: {t} (single run)"
        )
    ds = fsdask.open_dataset(args.out)
    Xd = ds["X"].data
    bench.line(
        f"store   {Xd.nbytes / 2**20:.0f} MiB in {Xd.npartitions} chunks, "
        f"{sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(args.out) for f in fs) / 2**20:.0f} "
        "MiB on disk"
    )

    def floor():
        return Xd.sum().compute()

    def fit(score, pvalues=False):
        def run():
            f = fsdask.Filter(score).fit(ds)
            return f.pvalues_ if pvalues else f

        return run

    fns = {"floor": floor}
    for score in args.filters.split(","):
        fns[score] = fit(score)
        if score in ("ttest", "f", "pearson"):  # p-values are evaluated on the first read
            fns[score + " + pvalues_"] = fit(score, True)
    with dask.config.set(scheduler="threads"):
        t = bench.alternate(fns, args.repeat)
    fl = t.pop("floor")
    bench.line(
        f"floor   threads ({os.cpu_count()} cores): {fl}  ({Xd.nbytes / 2**20 / fl.seconds:.0f} MiB/s), "
        f"CPU {fl.cpu:.2f} s"
    )
    if not args.no_cluster:
        from fsdask.cluster import scheduler

        with scheduler("local:2"):
            cl = bench.alternate({"floor": floor}, args.repeat)["floor"]
        bench.line(
            f"floor   LocalCluster, 2 processes: {cl}  ({Xd.nbytes / 2**20 / cl.seconds:.0f} MiB/s)"
        )
    bench.line(f"{'filter':<20} {'threads':>16} {'× floor':>14} {'CPU (s)':>8}")
    for name, tm in t.items():
        r = tm.seconds / fl.seconds
        bench.line(
            f"{name:<20} {str(tm):>16} {Bench.ratio(tm, fl):>14} {tm.cpu:8.2f}"
            f"{'' if r <= 1.5 else '   > 1.5× floor'}"
        )
    bench.write()


if __name__ == "__main__":
    main()
