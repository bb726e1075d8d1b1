"""Q-α at scale: power-embedded Q-α (k = 6) end to end from Zarr at 10⁴, 10⁵, 10⁶ features.

Stores: ``qalpha_clusters`` (§6 model) with 100 samples in 4 clusters, ``R = n/200``
planted relevant features (cluster structure, variances ≤ .02) and ``n − R`` irrelevant
ones drawn the same way and permuted sample-wise; float32, written chunk by chunk with
``write_synthetic`` (64 MiB feature blocks).  Each fit runs in its own subprocess
(threads scheduler) so its peak RSS (``ru_maxrss``) is its own.  Printed per size: wall
time, iterations, passes over the data, converged, recovery of the planted features
(|top-R ∩ planted| / R), peak RSS, and the 10× growth ratio of the time.

The dense O(n²) version (tests/qalpha_dense.py: explicit G = (MMᵀ)∘(PPᵀ), ARPACK for its
leading eigenvector) is timed on the first n features for growing n until G would not fit
in ``--dense-mem-gb``: the crossover.

Run:  flock /work/.bench.lock python benchmarks/qalpha_scale.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build(n: int, path: str) -> float:
    from fsdask.datasets import qalpha_clusters, write_synthetic
    if os.path.exists(path):
        return 0.0
    t = time.perf_counter()
    R = max(20, n // 200)
    write_synthetic(qalpha_clusters(4, n_points=100, n_relevant=R, n_irrelevant=n - R, random_state=0), path)
    return time.perf_counter() - t


def _cpu() -> float:
    """CPU seconds (user + system) of this process so far: less sensitive than wall time to a shared machine."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def fit_one(path: str, max_iter: int, tol: float) -> dict:
    import resource
    import warnings
    import numpy as np
    import fsdask
    warnings.simplefilter("ignore")
    ds = fsdask.open_dataset(path)
    n = ds["X"].shape[1]
    R = max(20, n // 200)
    t, c0 = time.perf_counter(), _cpu()
    est = fsdask.QAlpha(k=6, variant="power", max_iter=max_iter, tol=tol, supervised=False).fit(ds)
    wall, cpu = time.perf_counter() - t, _cpu() - c0
    top = np.argsort(-est.scores_)[:R]
    return {"n": n, "wall_s": wall, "cpu_s": cpu, "load1": os.getloadavg()[0], "n_iter": est.n_iter_,
            "passes": est.n_passes_ + 1,   # + the input check (NaN/Inf, constant features)
            "converged": bool(est.converged_), "recovery": len(set(top) & set(range(R))) / R,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "alpha_positive": float((est.scores_ > 0).mean())}


def dense_one(path: str, n: int, n_iter: int) -> dict:
    import resource
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import qalpha_dense as dense
    import fsdask
    X = fsdask.open_dataset(path)["X"][:, :n].values.astype(np.float64)
    t = time.perf_counter()
    dense.qalpha_dense(X, 6, "power", n_iter=n_iter)
    wall = time.perf_counter() - t
    return {"n": n, "wall_s": wall, "n_iter": n_iter,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--dir", default="/tmp/fsdask-qalpha-bench")
    ap.add_argument("--max-iter", type=int, default=10)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--dense-sizes", default="2500,5000,10000,20000")
    ap.add_argument("--dense-mem-gb", type=float, default=8.0)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, path, n = args.worker
        out = fit_one(path, args.max_iter, args.tol) if kind == "fit" else dense_one(path, int(n), args.max_iter)
        print(json.dumps(out))
        return
    os.makedirs(args.dir, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rows = []
    for n in sizes:
        path = os.path.join(args.dir, f"clusters_{n}.zarr")
        tb = build(n, path)
        res = json.loads(subprocess.run([sys.executable, __file__, "--worker", "fit", path, "0",
                                         "--max-iter", str(args.max_iter), "--tol", str(args.tol)],
                                        env=env, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
        res["build_s"] = tb
        rows.append(res)
        print(f"n={n:>9,}  fit {res['wall_s']:7.1f} s (CPU {res['cpu_s']:7.1f} s, load {res['load1']:.1f})  iters {res['n_iter']:3d}  passes {res['passes']:3d}  "
              f"converged {res['converged']!s:5}  recovery {res['recovery']:.2f}  α>0 {res['alpha_positive']:.3f}  "
              f"peak RSS {res['peak_rss_mb']:7.0f} MB  (store built in {tb:.1f} s)", flush=True)
    for a, b in zip(rows, rows[1:]):
        print(f"time ratio n {a['n']:,} → {b['n']:,}: {b['wall_s'] / a['wall_s']:.2f}×  "
              f"(per iteration {b['wall_s'] / b['n_iter'] / (a['wall_s'] / a['n_iter']):.2f}×; "
              f"CPU time {b['cpu_s'] / a['cpu_s']:.2f}×)")
    print("dense O(n²) reference (explicit G, same iterations):")
    path = os.path.join(args.dir, f"clusters_{max(sizes)}.zarr")
    for n in [int(s) for s in args.dense_sizes.split(",") if s.strip() and int(s) > 0]:
        need = 3 * n * n * 8 / 2**30
        if need > args.dense_mem_gb:
            print(f"  n={n:>9,}: G and its factors need ≈{need:.0f} GiB > {args.dense_mem_gb} GiB — does not fit")
            break
        res = json.loads(subprocess.run([sys.executable, __file__, "--worker", "dense", path, str(n),
                                         "--max-iter", str(args.max_iter)],
                                        env=env, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
        print(f"  n={n:>9,}: {res['wall_s']:7.1f} s for {args.max_iter} iterations, peak RSS {res['peak_rss_mb']:6.0f} MB",
              flush=True)


if __name__ == "__main__":
    main()
