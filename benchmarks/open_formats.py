"""Reading data other tools wrote, straight from the source vs from an ingested fsdask store.

Part 1 — a ``--cells`` × ``--genes`` sparse AnnData (``--density`` non-zero, float32 CSR,
written by the ``anndata`` package as ``.h5ad`` and as AnnData-on-Zarr).  A Filter (Fisher
score) and a SparseHSIC run straight from each, and from the same data ingested into an
fsdask store: wall time and peak RSS (each run in its own process, so the set-up does not
count), against the dense matrix size.  Targets: peak RSS ≤ 1 GB, time ≤ 2× the ingested store.

Part 2 — a ``--store-gb`` float32 store written by zarr-python chunked by samples
(``--rows-per-chunk`` samples × all features per chunk): a Filter on a 2-process
LocalCluster with ``--worker-memory`` workers (the store is re-blocked through a rechunked
copy; its cost is printed by fsdask); peak per-worker RSS (polled every 0.2 s).

The header records the commit, the command, CPU count and the load average before and
after.  Run on a quiet machine, one benchmark at a time:

    flock /work/.bench.lock python benchmarks/open_formats.py
    python benchmarks/open_formats.py --small          # a smoke run (reduced sizes)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import Bench, peak_rss  # noqa: E402


class _Tee:
    """stdout that also keeps every printed line for the result file."""

    def __init__(self, bench: Bench, out):
        self.bench, self.out, self.buf = bench, out, ""

    def write(self, text: str) -> int:
        self.out.write(text)
        self.buf += text
        *done, self.buf = self.buf.split("\n")
        self.bench.lines.extend(done)
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def header(args) -> str:
    """The run's parameters (commit, command and machine state are in the Bench header)."""
    return (
        f"# cells {args.cells}, genes {args.genes}, density {args.density}; store {args.store_gb} GB, "
        f"{args.rows_per_chunk} samples per chunk; workers {args.worker_memory}"
    )


# ---- data ---------------------------------------------------------------------------------------


def sparse_counts(n: int, p: int, density: float, seed: int = 0):
    """CSR float32 with ``density·p`` non-zeros per row; 20 genes shift with the 3 cell types."""
    import scipy.sparse

    rng = np.random.default_rng(seed)
    k = max(1, int(round(density * p)))
    indptr = np.arange(n + 1, dtype=np.int64) * k
    indices = np.empty(n * k, dtype=np.int32)
    for i0 in range(0, n, 500):  # row batches keep the set-up's temporaries small (~200 MB)
        i1 = min(n, i0 + 500)
        idx = np.argpartition(rng.random((i1 - i0, p), dtype=np.float32), k, axis=1)[:, :k]
        indices[i0 * k : i1 * k] = np.sort(idx, axis=1).ravel()
    data = rng.poisson(2.0, size=n * k).astype(np.float32) + 1
    y = np.arange(n) % 3
    rows = np.repeat(np.arange(n), k)
    data[(indices < 20) & (y[rows] == 1)] += 3
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(n, p)), y


def make_anndata(args, d: str) -> None:
    import anndata
    import pandas as pd

    X, y = sparse_counts(args.cells, args.genes, args.density)
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical(np.array(["B", "T", "NK"])[y])},
        index=[f"cell{i}" for i in range(args.cells)],
    )
    var = pd.DataFrame(index=[f"gene{j}" for j in range(args.genes)])
    a = anndata.AnnData(X=X, obs=obs, var=var)
    a.write_h5ad(os.path.join(d, "cells.h5ad"))
    a.write_zarr(os.path.join(d, "cells_anndata.zarr"))
    import fsdask

    fsdask.ingest(
        os.path.join(d, "cells.h5ad"), os.path.join(d, "cells_fsdask.zarr"), label="cell_type"
    )


def make_row_store(args, d: str) -> str:
    """A float32 store chunked by samples, written by zarr-python (a foreign store)."""
    import zarr

    p = args.row_features
    n = max(
        args.rows_per_chunk,
        int(args.store_gb * 1e9 / (4 * p)) // args.rows_per_chunk * args.rows_per_chunk,
    )
    path = os.path.join(d, "by_samples.zarr")
    g = zarr.open_group(path, mode="w", zarr_format=3)
    X = g.create_array(
        "X",
        shape=(n, p),
        chunks=(args.rows_per_chunk, p),
        dtype="f4",
        dimension_names=("sample", "feature"),
    )
    y = np.arange(n) % 2
    for i0 in range(0, n, args.rows_per_chunk):
        i1 = min(n, i0 + args.rows_per_chunk)
        rng = np.random.default_rng([3, i0])
        b = rng.standard_normal((i1 - i0, p), dtype=np.float32)
        b[y[i0:i1] == 1, :10] += 1.0
        X[i0:i1] = b
    g.create_array("y", data=y, dimension_names=("sample",))
    return path


# ---- measured runs (each in its own process) ----------------------------------------------------


def child(mode: str, path: str, method: str) -> None:

    import fsdask

    t0 = time.perf_counter()
    ds = fsdask.open_dataset(path, label="obs:cell_type" if mode != "ingested" else None)
    if method == "filter":
        est = fsdask.Filter("fisher", n_features_to_select=50)
    else:
        est = fsdask.SparseHSIC(n_features_to_select=50, rho_grid=None)
    with __import__("dask").config.set(scheduler="threads"):
        est.fit(ds)
    wall = time.perf_counter() - t0
    rss = peak_rss()
    top = [
        str(f) for f in est.result_["feature"].values[np.argsort(est.result_["rank"].values)[:5]]
    ]
    print(json.dumps({"wall_s": wall, "peak_rss": rss, "top": top}))


def run_child(mode: str, path: str, method: str) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, path, method], capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"{mode} {method} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def part1(args, d: str) -> None:
    dense = args.cells * args.genes * 4
    print(
        f"\n## Part 1: {args.cells} cells × {args.genes} genes, {args.density:.0%} non-zero, CSR float32 "
        f"(dense would be {dense / 1e9:.2f} GB)\n"
    )
    print("| source | method | wall s | peak RSS GB | × ingested time | top-5 equal to ingested |")
    print("|---|---|---:|---:|---:|---|")
    for method in ("filter", "hsic"):
        ref = run_child("ingested", os.path.join(d, "cells_fsdask.zarr"), method)
        for mode, name in (
            ("ingested", "cells_fsdask.zarr"),
            ("h5ad", "cells.h5ad"),
            ("anndata-zarr", "cells_anndata.zarr"),
        ):
            r = ref if mode == "ingested" else run_child(mode, os.path.join(d, name), method)
            print(
                f"| {mode} | {method} | {r['wall_s']:.1f} | {r['peak_rss'] / 1e9:.2f} | "
                f"{r['wall_s'] / ref['wall_s']:.2f} | {r['top'] == ref['top']} |",
                flush=True,
            )


def part2(args, d: str) -> None:
    import logging

    import psutil
    from distributed import Client, LocalCluster

    import fsdask

    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    path = make_row_store(args, d)
    import zarr

    arr = zarr.open_group(path, mode="r")["X"]
    print(
        f"\n## Part 2: {arr.shape[0]} × {arr.shape[1]} float32 ({arr.nbytes / 1e9:.2f} GB) chunked "
        f"{arr.chunks} (by samples); Filter on LocalCluster(2 processes, {args.worker_memory} each)\n"
    )
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.worker_memory,
            dashboard_address=":0",
        ) as lc,
        Client(lc) as client,
    ):
        peak: dict = {}
        stop = threading.Event()

        def poll():
            while not stop.is_set():
                try:
                    for w, rss in client.run(lambda: psutil.Process().memory_info().rss).items():
                        peak[w] = max(peak.get(w, 0), rss)
                except Exception:
                    pass
                stop.wait(0.2)

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        t0 = time.perf_counter()
        ds = fsdask.open_dataset(path, rechunk_to=os.path.join(d, "rechunked.zarr"))
        t_open = time.perf_counter() - t0
        est = fsdask.Filter("ttest", n_features_to_select=10).fit(ds)
        wall = time.perf_counter() - t0
        stop.set()
        th.join()
    top = sorted(int(f) for f in np.flatnonzero(est.get_support()))
    print(
        f"open (incl. rechunked copy) {t_open:.1f} s; total with Filter {wall:.1f} s; "
        f"planted features 0–9 found: {top == list(range(10))}"
    )
    for w, rss in sorted(peak.items()):
        print(f"peak RSS of worker {w}: {rss / 1e9:.2f} GB")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cells", type=int, default=20_000)
    ap.add_argument("--genes", type=int, default=30_000)
    ap.add_argument("--density", type=float, default=0.05)
    ap.add_argument("--store-gb", type=float, default=2.0)
    ap.add_argument("--rows-per-chunk", type=int, default=1000)
    ap.add_argument("--row-features", type=int, default=25_000)
    ap.add_argument("--worker-memory", default="1GB")
    ap.add_argument("--small", action="store_true", help="smoke run: 2 000 × 3 000, 0.05 GB store")
    ap.add_argument("--part", choices=("1", "2", "both"), default="both")
    ap.add_argument("--dir", default=os.path.join(HERE, "out", "open_formats"))
    ap.add_argument(
        "--results",
        default=os.path.join(HERE, "..", "examples", "results", "open_formats.txt"),
        help="result file written by this run (header: commit, command, machine state)",
    )
    args = ap.parse_args()
    if args.small:
        args.cells, args.genes, args.store_gb, args.rows_per_chunk, args.row_features = (
            2000,
            3000,
            0.05,
            100,
            2500,
        )
    import contextlib

    bench = Bench("open_formats", args.results)
    with contextlib.redirect_stdout(_Tee(bench, sys.stdout)):
        timing, _ = bench.once(lambda: run(args))
        print(
            f"\n# whole run: {timing} (single run; other processes used {timing.foreign:.2f} cores)"
        )
    bench.write()


def run(args) -> None:
    print(header(args))
    os.makedirs(args.dir, exist_ok=True)
    d = os.path.join(
        args.dir, f"run-{os.getpid()}"
    )  # a directory this run makes, removed at its end
    os.makedirs(d)
    try:
        if args.part in ("1", "both"):
            make_anndata(args, d)
            part1(args, d)
        if args.part in ("2", "both"):
            part2(args, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"\n# load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
