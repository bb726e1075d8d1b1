"""SparseHSIC at scale: end-to-end time against the I/O floor, peak memory at two sizes,
and pyHSICLasso on the same data.

Store: float32 X of ``--samples`` × ``--features`` (default 200 × 1 000 000, "10⁶ features
by 200 samples", ≈ 763 MiB in 64 MiB feature blocks), N(0, 1) noise with planted features:

* categorical response y_cat ∈ {0, 1, 2}: features 10, 20, 30, 40, 50 (+ the last feature)
  are shifted by 0.8·(class-dependent pattern);
* continuous response y_cont = x₆₀ + x₇₀ − x₈₀ + 0.5·ε.

Every measurement runs in its own subprocess (threads scheduler) so its peak RSS
(``ru_maxrss``) is its own:

* floor: ``X.sum().compute()`` — one streaming pass (best of ``--repeat``);
* SparseHSIC(n_features_to_select=6, n_components=2) with y_cat (the planted class patterns point in different directions of the 3-column A: one rank-one component holds only some of them), and with y_cont (n_features_to_select=3);
* the same at ``--small`` features (default 250 000, the first columns of the same store
  re-chunked identically) to show the peak memory does not grow with the number of
  features except for the O(m·c) matrix A;
* pyHSICLasso (``--hsiclasso-python``, a separate venv; never a dependency of fsdask) on
  the first d features for d in ``--hsiclasso-sizes``, each with a timeout.

Run:  flock /work/.bench.lock python benchmarks/hsic_scale.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CAT = [10, 20, 30, 40, 50]
CONT = [60, 70, 80]


def planted(n: int, p: int) -> tuple[dict[int, np.ndarray], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2024)
    y_cat = np.arange(n) % 3
    rng.shuffle(y_cat)
    pattern = np.array([[1, -1, 0], [0, 1, -1], [1, 0, -1], [-1, 1, 0], [1, 1, -2]], float)
    cols = {}
    for j, pat in zip(CAT, pattern):
        cols[j] = rng.standard_normal(n) + 0.8 * pat[y_cat]
    cols[p - 1] = rng.standard_normal(n) + 0.8 * pattern[0][y_cat]
    for j in CONT:
        cols[j] = rng.standard_normal(n)
    y_cont = cols[60] + cols[70] - cols[80] + 0.5 * rng.standard_normal(n)
    return cols, y_cat, y_cont


def make_store(path: str, n: int, p: int) -> None:
    import dask
    import xarray as xr

    import fsdask
    from fsdask._validation import feature_block_size
    from fsdask.io.ingest import lazy_from_blocks

    cols, y_cat, y_cont = planted(n, p)
    block = min(p, feature_block_size(n, 4))

    def make_block(j0: int, j1: int) -> np.ndarray:
        xb = np.random.default_rng([11, j0]).standard_normal((n, j1 - j0), dtype=np.float32)
        for j, c in cols.items():
            if j0 <= j < j1:
                xb[:, j - j0] = c
        return xb

    X = lazy_from_blocks(make_block, n, p, block)
    ds = xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y_cat), "y_cont": ("sample", y_cont)})
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        fsdask.write_dataset(ds, path, block=block, overwrite=True)
    print(f"write    {n} × {p} float32 ({n * p * 4 / 2**20:.0f} MiB), blocks of {block} features: "
          f"{time.perf_counter() - t0:.1f} s", flush=True)


# ---- child measurements -------------------------------------------------------------
def child(kind: str, store: str, p: int, repeat: int) -> dict:
    import resource

    import dask

    import fsdask
    ds = fsdask.open_dataset(store)
    if p < ds.sizes["feature"]:
        ds = ds.isel(feature=slice(0, p))
    X = ds["X"]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best, out = float("inf"), {}
    with dask.config.set(scheduler="threads"):
        for _ in range(repeat):
            t0 = time.perf_counter()
            if kind == "floor":
                X.data.sum().compute()
            elif kind == "cat":
                est = fsdask.SparseHSIC(n_features_to_select=6, n_components=2, rho_grid=None).fit(X, ds["y"].values)
            elif kind == "cont":
                est = fsdask.SparseHSIC(n_features_to_select=3, rho_grid=None).fit(X, ds["y_cont"].values)
            best = min(best, time.perf_counter() - t0)
    if kind != "floor":
        out["found"] = est.get_support(indices=True).tolist()
        out["rho"] = est.rho_
        out["A_MiB"] = est.hsic_A_.nbytes / 2**20
    out.update(time=best, peak_MiB=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               start_MiB=base / 1024)
    return out


def run_child(kind: str, store: str, p: int, repeat: int) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--out", store, "--features", str(p), "--repeat", str(repeat)]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


HSICLASSO_SCRIPT = r"""
import json, sys, time, resource, numpy as np, zarr
from pyHSICLasso import HSICLasso
store, d, kind, k = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
g = zarr.open_group(store, mode="r")
X = np.asarray(g["X"][:, :d], dtype=np.float64)
y = np.asarray(g["y"][:] if kind == "cat" else g["y_cont"][:])
t0 = time.perf_counter()
h = HSICLasso()
h.input(X, y.astype(np.float64) if kind == "cont" else y.astype(np.int64) + 1)
if kind == "cat":
    h.classification(k, n_jobs=2)
else:
    h.regression(k, n_jobs=2)
t = time.perf_counter() - t0
print(json.dumps({"time": t, "found": sorted(int(i) for i in h.get_index()),
                  "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_hsiclasso(python: str, store: str, d: int, kind: str, k: int, timeout: float) -> dict:
    try:
        res = subprocess.run([python, "-c", HSICLASSO_SCRIPT, store, str(d), kind, str(k)],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    if res.returncode:
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {res.returncode}: {last[:200]}"}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--features", type=int, default=1_000_000)
    ap.add_argument("--small", type=int, default=250_000)
    ap.add_argument("--out", default=os.path.join(HERE, "out", "hsic_scale.zarr"))
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--hsiclasso-python", default="/tmp/hsiclasso-venv/bin/python")
    ap.add_argument("--hsiclasso-sizes", default="1000,10000")
    ap.add_argument("--hsiclasso-timeout", type=float, default=900)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.out, args.features, args.repeat)))
        return
    n, p = args.samples, args.features
    if not (args.reuse and os.path.exists(args.out)):
        make_store(args.out, n, p)
    relevant_cat, relevant_cont = CAT + [p - 1], CONT
    print(f"planted  categorical (3 classes): {relevant_cat}; continuous: {relevant_cont}")
    rows = []
    for size in (p, args.small):
        rep = args.repeat if size == p else 1
        floor = run_child("floor", args.out, size, rep)
        print(f"[{size} features] floor (X.sum, threads): {floor['time']:.2f} s "
              f"({n * size * 4 / 2**20 / floor['time']:.0f} MiB/s), peak RSS {floor['peak_MiB']:.0f} MiB", flush=True)
        for kind, rel in (("cat", relevant_cat), ("cont", relevant_cont)):
            r = run_child(kind, args.out, size, rep)
            rel_in = [j for j in rel if j < size]
            print(f"[{size} features] SparseHSIC {kind:<4}: {r['time']:.2f} s = {r['time'] / floor['time']:.2f}× floor; "
                  f"peak RSS {r['peak_MiB']:.0f} MiB (A {r['A_MiB']:.1f} MiB); found {r['found']} "
                  f"({len(set(r['found']) & set(rel_in))}/{len(rel_in)} planted)", flush=True)
            rows.append((size, kind, r, floor))
    if os.path.exists(args.hsiclasso_python):
        for d in [int(s) for s in args.hsiclasso_sizes.split(",")]:
            for kind, rel, k in (("cat", relevant_cat, 6), ("cont", relevant_cont, 3)):
                r = run_hsiclasso(args.hsiclasso_python, args.out, d, kind, k, args.hsiclasso_timeout)
                if "error" in r:
                    print(f"[{d} features] pyHSICLasso {kind}: {r['error']}", flush=True)
                    continue
                rel_in = [j for j in rel if j < d]
                print(f"[{d} features] pyHSICLasso {kind:<4}: {r['time']:.2f} s, peak RSS {r['peak_MiB']:.0f} MiB; "
                      f"found {r['found']} ({len(set(r['found']) & set(rel_in))}/{len(rel_in)} planted)", flush=True)
                s = run_child(kind, args.out, d, 1)
                print(f"[{d} features] SparseHSIC  {kind:<4}: {s['time']:.2f} s; found {s['found']} "
                      f"({len(set(s['found']) & set(rel_in))}/{len(rel_in)} planted)", flush=True)
    else:
        print(f"pyHSICLasso skipped: {args.hsiclasso_python} absent "
              "(python3 -m venv /tmp/hsiclasso-venv && /tmp/hsiclasso-venv/bin/pip install pyhsiclasso zarr)")


if __name__ == "__main__":
    main()
