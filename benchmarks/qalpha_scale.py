"""Q-α at scale: every variant (k = 6, 10 iterations) end to end from Zarr at 10⁵ and 10⁶
features × 100 samples (issue 17: ≤ 60 s at 10⁶ on 2 cores, one pass per iteration,
growth 10⁵ → 10⁶ ≤ 10.5×, peak RSS ≤ 1 GB).

Stores: ``qalpha_clusters`` (§6 model) with 100 samples in 4 clusters, ``R = n/200``
planted relevant features (cluster structure, variances ≤ .02) and ``n − R`` irrelevant
ones drawn the same way and permuted sample-wise; float32, written chunk by chunk with
``write_synthetic`` (64 MiB feature blocks).  Each fit runs in its own subprocess
(threads scheduler) so its peak RSS (``VmHWM``, :func:`_harness.peak_rss`) is its own,
after an untimed one-iteration warm-up fit (it reads all of X and runs every kernel of the
timed fit at a tenth of its cost); the I/O floor (``X.sum()``) and the fits alternate,
best of ``--repeat`` (≥ 3) rounds, through ``benchmarks/_harness.py`` (load before/after,
commit, command; load > 0.5 → "(loaded)").  ``power-float64`` is the power variant with
``fsdask.gram-precision`` set to ``"float64"`` (double Gram products; the default takes
them in the float32 store's precision), timed in the same rounds.  Printed per size and variant: wall time, its ratio to the floor, iterations,
passes over the data (and passes per iteration), converged, recovery of the planted
features (|top-R ∩ planted| / R), peak RSS, and the 10× growth ratio of the time.  Beside
the I/O floor, a compute floor in the same rounds: the BLAS work of one Gram pass (WᵀW of the
n rows m_i ⊗ Qᵀm_i, 600 wide at k = 6, q = 100, in the precision the fit takes for the
float32 store, one BLAS thread per core as in a fit), which every iteration needs once.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Bench, add_args, peak_rss  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build(n: int, path: str) -> float:
    from fsdask.datasets import qalpha_clusters, write_synthetic

    if os.path.exists(path):
        return 0.0
    t = time.perf_counter()
    R = max(20, n // 200)
    write_synthetic(
        qalpha_clusters(4, n_points=100, n_relevant=R, n_irrelevant=n - R, random_state=0), path
    )
    return time.perf_counter() - t


def _cpu() -> float:
    """CPU seconds (user + system) of this process so far: less sensitive than wall time to a shared machine."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def fit_one(path: str, max_iter: int, tol: float, variant: str = "power") -> dict:
    import warnings

    import numpy as np

    import fsdask

    warnings.simplefilter("ignore")
    ds = fsdask.open_dataset(path)
    n = ds["X"].shape[1]
    R = max(20, n // 200)
    if variant == "floor":
        ds["X"].data.sum().compute()  # warm
        t, c0 = time.perf_counter(), _cpu()
        ds["X"].data.sum().compute()
        return {
            "time": time.perf_counter() - t,
            "cpu": _cpu() - c0,
            "peak_rss_mb": peak_rss() / 2**20,
        }

    import dask

    # "power-float64": the power variant with the Gram's products in double — the
    # non-default fsdask.gram-precision, timed beside the default for the float32 store
    precision = "float64" if variant.endswith("-float64") else "data"
    variant = variant.removesuffix("-float64")

    def fit(iters=max_iter):
        return fsdask.QAlpha(
            k=6, variant=variant, max_iter=iters, tol=tol, supervised=variant == "supervised"
        ).fit(ds)

    with dask.config.set({"fsdask.gram-precision": precision}):
        fit(1)  # warm: one iteration reads all of X and runs every kernel of the timed fit
        t, c0 = time.perf_counter(), _cpu()
        est = fit()
        wall, cpu = time.perf_counter() - t, _cpu() - c0
    top = np.argsort(-est.scores_)[:R]
    return {
        "n": n,
        "time": wall,
        "cpu": cpu,
        "n_iter": est.n_iter_,
        "passes": est.n_passes_ + 1,  # + the input check (NaN/Inf, constant features)
        "converged": bool(est.converged_),
        "recovery": len(set(top) & set(range(R))) / R,
        "peak_rss_mb": peak_rss() / 2**20,
        "alpha_positive": float((est.scores_ > 0).mean()),
        "gram_dtype": est.result_.attrs["gram_dtype"],
    }


def gram_floor(path: str, n: int, k: int = 6, q: int = 100) -> dict:
    """Seconds of the BLAS work one Gram pass of the power variant cannot avoid: WᵀW of the
    n Khatri–Rao rows m_i ⊗ Qᵀm_i (qk wide), in the fit's batches from random data, in the
    precision a fit of the store at ``path`` takes them (:meth:`Execution.gram_dtype`), run
    as a fit runs them — one thread per core, one BLAS thread each (fsdask.linalg.threads)."""
    from concurrent.futures import ThreadPoolExecutor

    import dask.system
    import numpy as np
    from threadpoolctl import threadpool_limits

    import fsdask
    from fsdask.linalg.execution import Execution
    from fsdask.linalg.tsqr import khatri_rao_gram_block
    from fsdask.methods.qalpha.tall import features_per_batch as _batch

    dt = Execution().gram_dtype(fsdask.open_dataset(path)["X"].dtype)
    b = _batch(q * k)  # the features per batch a fit takes for this Gram

    rng = np.random.default_rng(0)
    m, p = rng.normal(size=(b, q)), rng.normal(size=(b, k))
    cores = dask.system.CPU_COUNT  # the threaded scheduler's worker count

    def share(batches: int) -> np.ndarray:
        G = np.zeros((q * k, q * k))
        for _ in range(batches):
            G += khatri_rao_gram_block(m, p, dt)
        return G

    batches = -(-n // b)
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(cores) as pool:
        share(1)  # warm
        t, c0 = time.perf_counter(), _cpu()
        sum(pool.map(share, [batches // cores + (i < batches % cores) for i in range(cores)]))
        return {"time": time.perf_counter() - t, "cpu": _cpu() - c0, "dtype": str(dt)}


def dense_one(path: str, n: int, n_iter: int) -> dict:

    import numpy as np

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import qalpha_dense as dense

    import fsdask

    X = fsdask.open_dataset(path)["X"][:, :n].values.astype(np.float64)
    t = time.perf_counter()
    dense.qalpha_dense(X, 6, "power", n_iter=n_iter)
    wall = time.perf_counter() - t
    return {
        "n": n,
        "wall_s": wall,
        "n_iter": n_iter,
        "peak_rss_mb": peak_rss() / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument(
        "--variants",
        default="power,basic,ritz,laplacian,gap,supervised,kernel,power-float64",
        help="Q-α variants; 'power-float64' is power with fsdask.gram-precision=float64",
    )
    ap.add_argument("--dir", default="/tmp/fsdask-qalpha-bench")
    ap.add_argument("--max-iter", type=int, default=10)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--dense-sizes", default="2500,5000,10000,20000")
    ap.add_argument("--dense-mem-gb", type=float, default=8.0)
    add_args(ap, "qalpha_scale")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, path, n = args.worker
        if kind == "dense":
            out = dense_one(path, int(n), args.max_iter)
        elif kind == "gram":
            out = gram_floor(path, int(n))
        else:
            out = fit_one(path, args.max_iter, args.tol, kind)
        print(json.dumps(out))
        return
    bench = Bench("qalpha_scale", args.results)
    os.makedirs(args.dir, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = args.variants.split(",")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def worker(kind, path, n=0, last=None):
        def run():
            out = json.loads(
                subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        kind,
                        path,
                        str(n),
                        "--max-iter",
                        str(args.max_iter),
                        "--tol",
                        str(args.tol),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.splitlines()[-1]
            )
            if last is not None:
                last[kind] = out
            return out

        return run

    times: dict = {}
    for n in sizes:
        path = os.path.join(args.dir, f"clusters_{n}.zarr")
        tb = build(n, path)
        bench.line(f"n={n:,}: store {path} (built in {tb:.1f} s, single run; 0 = reused)")
        last: dict = {}
        t = bench.alternate(
            {k: worker(k, path, n, last) for k in ["floor", "gram", *variants]},
            args.repeat,
            warm=False,
        )
        times[n] = t
        fl = t["floor"]
        bench.line(f"n={n:>9,}  floor (X.sum) {fl}, peak RSS {last['floor']['peak_rss_mb']:.0f} MB")
        tg = t["gram"]
        bench.line(
            f"n={n:>9,}  Gram floor: one pass's WᵀW (BLAS syrk in the fit's batches and "
            f"precision, {last['gram']['dtype']}, random rows) "
            f"{tg} (CPU {tg.cpu:.1f} s); × {args.max_iter} iterations = "
            f"{args.max_iter * tg.seconds:.1f} s of each fit below"
        )
        for v in variants:
            r = last[v]
            bench.line(
                f"n={n:>9,}  {v:<13} {t[v]} = {Bench.ratio(t[v], fl)} floor (CPU {t[v].cpu:.1f} s)  "
                f"iters {r['n_iter']:3d}  passes {r['passes']:3d} ({r['passes'] / max(r['n_iter'], 1):.2f}/iteration)  "
                f"converged {r['converged']!s:5}  recovery {r['recovery']:.2f}  α>0 {r['alpha_positive']:.3f}  "
                f"peak RSS {r['peak_rss_mb']:7.0f} MB  Gram products {r['gram_dtype']}"
            )
        if {"power", "power-float64"} <= set(variants):
            bench.line(
                f"n={n:>9,}  power, Gram products in the data's precision / in float64: "
                f"{Bench.ratio(t['power'], t['power-float64'])} (same rounds)"
            )
    for a, b in zip(sizes, sizes[1:]):
        for v in variants:
            ta, tb_ = times[a][v], times[b][v]
            bench.line(
                f"{v:<10} time ratio n {a:,} → {b:,}: {Bench.ratio(tb_, ta)} (target ≤ 10.5×)"
            )
    bench.line("dense O(n²) reference (explicit G, power variant, same iterations; single runs):")
    path = os.path.join(args.dir, f"clusters_{max(sizes)}.zarr")
    for n in [int(s) for s in args.dense_sizes.split(",") if s.strip() and int(s) > 0]:
        need = 3 * n * n * 8 / 2**30
        if need > args.dense_mem_gb:
            bench.line(
                f"  n={n:>9,}: G and its factors need ≈{need:.0f} GiB > {args.dense_mem_gb} GiB — does not fit"
            )
            break
        t, res = bench.once(worker("dense", path, n))
        bench.line(
            f"  n={n:>9,}: {t} for {args.max_iter} iterations, peak RSS {res['peak_rss_mb']:6.0f} MB"
        )
    bench.write()


if __name__ == "__main__":
    main()
