"""SparseHSIC at scale: end-to-end time against the I/O floor of the same store, peak
memory at two sizes, and pyHSICLasso on the same data.

Stores: float32 X of ``--sizes`` (default 200 × 300 000 and 100 × 1 000 000, the sizes of
issue 17; 64 MiB feature blocks), N(0, 1) noise with planted features:

* categorical response y_cat ∈ {0, 1, 2}: features 10, 20, 30, 40, 50 (+ the last feature)
  are shifted by 0.8·(class-dependent pattern);
* continuous response y_cont = x₆₀ + x₇₀ − x₈₀ + 0.5·ε.

Every measurement runs in its own subprocess (threads scheduler) so its peak RSS
(``VmHWM``, :func:`_harness.peak_rss`) is its own; each subprocess warms its cache with one untimed run, and the
floor and the fits alternate, best of ``--repeat`` (≥ 3) rounds (``benchmarks/_harness.py``:
load before/after, commit, command; a figure taken at load > 0.5 is marked ``(loaded)``):

* floor: ``X.sum().compute()`` on this very store — one streaming pass (best of
  ``--repeat``), as in ``benchmarks/io_floor.py``;
* SparseHSIC(n_features_to_select=6, n_components=2) with y_cat (the planted class
  patterns point in different directions of the 3-column A: one rank-one component holds
  only some of them), and SparseHSIC(n_features_to_select=3) with y_cont, each also with a
  fixed ``rho`` (the ρ the first found), and ``SparseHSIC()`` at its defaults (ρ = "auto",
  the noise level) with each response; the ratio to the floor (target ≤ 1.5) and the time
  of the one pass that builds A;
* with ``--pyhsiclasso PYTHON`` (an interpreter of a separate venv with pyHSICLasso and
  zarr; never a dependency of fsdask), pyHSICLasso on the first d features for d in
  ``--pyhsiclasso-sizes``, each with a timeout and an address-space cap, next to
  SparseHSIC on the same d features.

Everything printed also goes to ``--results`` (default examples/results/hsic_scale.txt).

Run:  flock /work/.bench.lock .venv/bin/python benchmarks/hsic_scale.py
      [--pyhsiclasso /tmp/hsiclasso-venv/bin/python]
      (python3 -m venv /tmp/hsiclasso-venv && /tmp/hsiclasso-venv/bin/pip install pyhsiclasso zarr)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Bench, add_args, peak_rss  # noqa: E402

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


def make_store(path: str, n: int, p: int) -> str:
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
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y_cat), "y_cont": ("sample", y_cont)}
    )
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        fsdask.write_dataset(ds, path, block=block, overwrite=True)
    return (
        f"write    {n} × {p} float32 ({n * p * 4 / 2**20:.0f} MiB), blocks of {block} features: "
        f"{time.perf_counter() - t0:.1f} s"
    )


# ---- child measurements -------------------------------------------------------------
def child(kind: str, store: str, p: int, repeat: int, rho: float | None = None) -> dict:

    import dask

    import fsdask
    from fsdask.methods.hsic import hsic_matrix, response_factor

    ds = fsdask.open_dataset(store)
    if p < ds.sizes["feature"]:
        ds = ds.isel(feature=slice(0, p))
    X = ds["X"]
    base = peak_rss()
    best, cpu, out, est = float("inf"), float("inf"), {}, None
    with dask.config.set(scheduler="threads"):
        for it in range(repeat + 1):  # the first run warms the cache and is not timed
            est = None  # release the previous fit's per-feature outputs before the next one
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            if kind == "floor":
                X.data.sum().compute()
            elif kind == "apass":  # the one pass that builds A (categorical Δ), alone
                hsic_matrix(X.data, response_factor(ds["y"].values)[0]).compute()
            elif kind == "cat":
                est = fsdask.SparseHSIC(n_features_to_select=6, n_components=2).fit(
                    X, ds["y"].values
                )
            elif kind == "cont":
                est = fsdask.SparseHSIC(n_features_to_select=3).fit(X, ds["y_cont"].values)
            elif kind == "cat_rho":
                est = fsdask.SparseHSIC(rho=rho, n_components=2).fit(X, ds["y"].values)
            elif kind == "cont_rho":
                est = fsdask.SparseHSIC(rho=rho).fit(X, ds["y_cont"].values)
            elif kind == "cat_default":  # what a user runs: every parameter at its default
                est = fsdask.SparseHSIC().fit(X, ds["y"].values)
            elif kind == "cont_default":
                est = fsdask.SparseHSIC().fit(X, ds["y_cont"].values)
            if it:
                best = min(best, time.perf_counter() - t0)
                cpu = min(cpu, time.process_time() - c0)
    if est is not None:
        out["found"] = est.get_support(indices=True).tolist()
        out["rho"] = est.rho_
        out["A_MiB"] = est.hsic_A_.nbytes / 2**20
        out["outputs_MiB"] = (
            est.result_.nbytes
            + sum(
                getattr(est, a).nbytes
                for a in (
                    "scores_",
                    "ranking_",
                    "support_",
                    "components_",
                    "active_features_",
                    "hsic_A_",
                )
            )
        ) / 2**20
    out.update(
        time=best,
        cpu=cpu,
        peak_MiB=peak_rss() / 2**20,
        start_MiB=base / 2**20,
    )
    return out


def run_child(kind: str, store: str, p: int, repeat: int, rho: float | None = None) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--out",
        store,
        "--features",
        str(p),
        "--repeat",
        str(repeat),
    ]
    if rho is not None:
        cmd += ["--rho", repr(rho)]
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
                  "peak_MiB": int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024}))
"""


def run_hsiclasso(
    python: str, store: str, d: int, kind: str, k: int, timeout: float, mem_gb: float
) -> dict:
    import resource

    def cap():  # an address-space cap so a run that cannot fit fails alone (MemoryError)
        lim = int(mem_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    t0 = time.perf_counter()
    try:
        res = subprocess.run(
            [python, "-c", HSICLASSO_SCRIPT, store, str(d), kind, str(k)],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=cap,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"stopped by the {timeout:.0f} s timeout (time)"}
    if res.returncode:
        err = res.stderr.strip().splitlines() or ["?"]
        mem = any(
            "MemoryError" in line or "Unable to allocate" in line or "Cannot allocate" in line
            for line in err
        )
        why = (
            f"out of memory under the {mem_gb:g} GiB address-space cap"
            if mem
            else f"exit {res.returncode}"
        )
        return {"error": f"failed after {time.perf_counter() - t0:.0f} s, {why}: {err[-1][:160]}"}
    return json.loads(res.stdout.strip().splitlines()[-1])


def measure(bench: Bench, store: str, n: int, p: int, repeat: int) -> None:
    """Floor, the A pass and the four fits on one store, alternating (each child warms itself)."""
    relevant = {"cat": CAT + [p - 1], "cont": CONT}
    last: dict = {}

    def job(kind, rho=None):
        def run():
            last[kind] = run_child(kind, store, p, 1, rho)
            return last[kind]

        return run

    # the fixed ρ of the rho fits: the ρ the n_features_to_select fits find (measured once, untimed)
    rhos = {k: run_child(k, store, p, 0)["rho"] for k in ("cat", "cont")}
    fns = {"floor": job("floor"), "apass": job("apass")}
    for k in ("cat", "cont"):
        fns[k] = job(k)
        fns[k + "_rho"] = job(k + "_rho", rhos[k])
        fns[k + "_default"] = job(k + "_default")
    t = bench.alternate(fns, repeat, warm=False)
    fl = t["floor"]
    tag = f"[{n} × {p}]"
    bench.line(
        f"{tag} floor (X.sum, threads): {fl} ({n * p * 4 / 2**20 / fl.seconds:.0f} MiB/s, CPU {fl.cpu:.2f} s), "
        f"peak RSS {last['floor']['peak_MiB']:.0f} MiB"
    )
    bench.line(
        f"{tag} the one pass building A (categorical, alone): {t['apass']} = {Bench.ratio(t['apass'], fl)} floor"
    )
    for kind in ("cat", "cat_rho", "cat_default", "cont", "cont_rho", "cont_default"):
        r, rel = last[kind], relevant[kind.split("_")[0]]
        how = (
            f"rho={rhos[kind.split('_')[0]]:.4g}"
            if kind.endswith("_rho")
            else f"defaults, rho='auto' → {r['rho']:.3g}"
            if kind.endswith("_default")
            else "n_features_to_select"
        )
        bench.line(
            f"{tag} SparseHSIC {kind:<8} ({how}): {t[kind]} = {Bench.ratio(t[kind], fl)} floor "
            f"(CPU {t[kind].cpu:.2f} s); peak RSS {r['peak_MiB']:.0f} MiB (A {r['A_MiB']:.1f} MiB, per-feature "
            f"outputs incl. A {r['outputs_MiB']:.0f} MiB, interpreter + imports {r['start_MiB']:.0f} MiB); "
            f"found {r['found']} ({len(set(r['found']) & set(rel))}/{len(rel)} planted)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sizes", default="200x300000,100x1000000", help="samples×features of each store"
    )
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory of the stores")
    ap.add_argument("--reuse", action="store_true", help="reuse existing stores under --out")
    add_args(ap, "hsic_scale")
    ap.add_argument(
        "--pyhsiclasso",
        metavar="PYTHON",
        default=None,
        help="interpreter of a venv with pyHSICLasso and zarr; runs the comparison",
    )
    ap.add_argument("--pyhsiclasso-sizes", default="10000,50000,100000")
    ap.add_argument("--pyhsiclasso-timeout", type=float, default=1800)
    ap.add_argument("--pyhsiclasso-mem-gb", type=float, default=14)
    ap.add_argument("--features", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rho", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.out, args.features, args.repeat, args.rho)))
        return
    bench = Bench("hsic_scale", args.results)
    say = bench.line
    say(f"planted  categorical (3 classes): {CAT} + the last feature; continuous: {CONT}")
    stores = []
    for size in args.sizes.split(","):
        n, p = (int(v) for v in size.lower().split("x"))
        store = os.path.join(args.out, f"hsic_scale_{n}x{p}.zarr")
        if not (args.reuse and os.path.exists(store)):
            say(make_store(store, n, p) + " (single run)")
        measure(bench, store, n, p, args.repeat)
        stores.append((store, n, p))
    if args.pyhsiclasso is not None:
        pyhsiclasso(args, bench, *stores[-1])
    else:
        say(
            "pyHSICLasso skipped (no --pyhsiclasso PYTHON; python3 -m venv /tmp/hsiclasso-venv && "
            "/tmp/hsiclasso-venv/bin/pip install pyhsiclasso zarr)"
        )
    bench.write()


def pyhsiclasso(args, bench: Bench, store: str, n: int, p: int) -> None:
    """pyHSICLasso next to SparseHSIC on the first d features (single runs, each in a subprocess)."""
    say = bench.line
    relevant_cat, relevant_cont = CAT + [p - 1], CONT

    def load() -> str:
        return f"load {os.getloadavg()[0]:.2f}"

    failed = None
    for d in [int(v) for v in args.pyhsiclasso_sizes.split(",")]:
        for kind, rel, k in (("cat", relevant_cat, 6), ("cont", relevant_cont, 3)):
            rel_in = [j for j in rel if j < d]
            if failed:  # both responses build the same d feature kernels: a larger run fails too
                say(f"[{d} features] pyHSICLasso {kind:<4}: not run ({failed})")
                continue
            s = run_child(kind, store, d, 1)
            say(
                f"[{d} features] SparseHSIC  {kind:<4}: {s['time']:.2f} s, peak RSS {s['peak_MiB']:.0f} MiB; "
                f"found {s['found']} ({len(set(s['found']) & set(rel_in))}/{len(rel_in)} planted); {load()}"
            )
            r = run_hsiclasso(
                args.pyhsiclasso,
                store,
                d,
                kind,
                k,
                args.pyhsiclasso_timeout,
                args.pyhsiclasso_mem_gb,
            )
            if "error" in r:
                say(f"[{d} features] pyHSICLasso {kind:<4}: {r['error']}; {load()}")
                failed = f"pyHSICLasso {kind} failed at {d} features"
                continue
            say(
                f"[{d} features] pyHSICLasso {kind:<4}: {r['time']:.2f} s (after loading X), main-process peak RSS "
                f"{r['peak_MiB']:.0f} MiB; found {r['found']} ({len(set(r['found']) & set(rel_in))}/"
                f"{len(rel_in)} planted); {load()}"
            )


if __name__ == "__main__":
    main()
