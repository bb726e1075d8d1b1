"""2 worker processes against 1: the speed-up of each method's block pass on a LocalCluster.

One float32 store of ``--n`` samples × ``--p`` features in ``--blocks`` feature blocks
(N(0, 1) noise, two classes), written once; then, for each kernel, a 1-process and a
2-process ``LocalCluster`` (``threads_per_worker=1``, ``processes=True``) on that same store,
alternating, best of ``--repeat`` (≥ 3) rounds (``benchmarks/_harness.py``: load before /
after, commit, command; figures taken at load > 0.5 are marked ``(loaded)``).  Every
measurement is its own subprocess that starts its cluster, runs the kernel once untimed
(warm cache, workers' imports) and then times one run, so cluster start-up is not timed.

Kernels (each is one pass over the feature blocks, or one iteration of the method):

* ``filter``: ``Filter("ttest").fit`` — the screen and the class moments in one pass;
* ``hsic_A``: the SparseHSIC pass that builds A = X H Δᵀ/(n − 1) (``hsic_matrix``);
* ``qalpha``: ``QAlpha(variant="supervised", max_iter=1).fit`` — the initial pass and one
  iteration;
* ``qalpha_power``: the same with the default (unsupervised) ``variant="power"``;
* ``pca``: ``JolliffeI(n_features_to_select=20).fit`` — the PCA baselines' factor of X
  (the sample Gram or TSQR) and the loadings;
* ``logo``: ``Logo(max_iter=1, certify=False).fit`` — one outer iteration.  At the default
  memory budget (``fsdask.memory-budget``, 1 GiB) the 200 × 400 000 X (640 MB as float64)
  fits, so Logo reads X once and iterates in the client's threads: the workers only read,
  and a second worker has little to gain;
* ``logo_chunked``: the same with ``memory_budget="64MiB"``, the route of an X larger than
  the budget, where every product with X and Z̄ is a sweep on the workers;
* ``cpfs_gram``: the CPFS Gram pass (``gram_factor`` of the centred X).

And two ceilings, the speed-up this machine gives work with nothing serial in it: ``io_floor``
(``X.sum()``: read and decompress every block) and ``blas_floor`` (per feature block, a task
of 40 products S Sᵀ of a 600 × 2048 float64 S — the shape of Q-α's Gram batches — on no data).
A kernel that only reads cannot beat the first, one that only multiplies the second; a
method mixes the two, so its target is a share of the lower of them: ≥ 0.9 × that ceiling.

Prints the speed-up t(1 process) / t(2 processes) per kernel (target ≥ 0.9 × the ceiling of
the same run), with the cores each figure kept busy (CPU seconds of the client and of every worker process, all threads,
over wall time: a kernel whose BLAS or numba threads already fill the machine in 1 process
cannot gain from a second one) and the client's own CPU seconds (work that stays on the
client whatever the number of workers), and writes
``--results`` (default examples/results/workers_speedup.txt).

Run:  python benchmarks/workers_speedup.py [--quick] [--kernels filter logo ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Bench, add_args  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNELS = (
    "filter",
    "hsic_A",
    "qalpha",
    "qalpha_power",
    "logo",
    "logo_chunked",
    "cpfs_gram",
    "pca",
)
#: what 2 processes can gain on this machine at best, through the same cluster and harness:
#: the store read alone, and one BLAS product per block (no I/O, no fsdask)
CEILINGS = ("io_floor", "blas_floor")
#: a method's speed-up should reach this share of the lower ceiling measured in the same run
TARGET_SHARE = 0.9


def make_store(path: str, n: int, p: int, blocks: int) -> None:
    import dask.array as da
    import xarray as xr

    import fsdask

    width = -(-p // blocks)
    X = da.random.RandomState(0).standard_normal((n, p), chunks=(n, width)).astype(np.float32)
    y = np.arange(n) % 2
    # a few relevant features, so the methods have work to do
    X = da.concatenate([X[:, :5] + y[:, None].astype(np.float32), X[:, 5:]], axis=1).rechunk(
        (n, width)
    )
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y)},
        coords={"sample": np.arange(n), "feature": np.arange(p)},
    )
    fsdask.write_dataset(ds, path, chunk_bytes=n * width * 4)


def kernel(name: str, X, y: np.ndarray):
    """A callable running one block pass of ``name`` on the dask array X."""
    import fsdask

    if name == "filter":
        return lambda: fsdask.Filter("ttest").fit(X, y)
    if name == "hsic_A":
        from fsdask.methods.hsic import hsic_matrix, response_factor

        delta = response_factor(y)[0]
        return lambda: hsic_matrix(X, delta).compute()
    if name == "qalpha":
        return lambda: fsdask.QAlpha(variant="supervised", max_iter=1).fit(X, y)
    if name == "qalpha_power":
        return lambda: fsdask.QAlpha(max_iter=1).fit(X)
    if name == "pca":
        return lambda: fsdask.JolliffeI(n_features_to_select=20).fit(X)
    if name == "logo":
        return lambda: fsdask.Logo(max_iter=1, certify=False).fit(X, y)
    if name == "logo_chunked":
        return lambda: fsdask.Logo(max_iter=1, certify=False, memory_budget="64MiB").fit(X, y)
    if name == "io_floor":
        return lambda: X.sum().compute()
    if name == "blas_floor":
        import dask

        def products(_):
            S = np.random.default_rng(0).normal(size=(600, 2048))
            return sum(S @ S.T for _ in range(40))

        tasks = [dask.delayed(products)(i) for i in range(X.numblocks[1])]
        return lambda: dask.compute(*tasks)
    if name == "cpfs_gram":
        from fsdask.linalg import gram_factor

        Xf = X.astype(np.float64)
        return lambda: gram_factor(Xf - Xf.mean(axis=0))
    raise ValueError(name)


def _cpu_seconds() -> float:
    """User + system CPU seconds of the calling process, all its threads."""
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def child(args) -> None:
    import warnings

    from distributed import Client, LocalCluster

    import fsdask
    from fsdask.cluster import quiet_distributed

    quiet_distributed()
    warnings.simplefilter("ignore")  # max_iter=1 fits warn that they did not converge
    ds = fsdask.open_dataset(args.store)
    X, y = ds["X"].data, ds["y"].values
    with (
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        run = kernel(args.kernel, X, y)
        run()  # warm: page cache, worker imports, numba compilation
        w0, t0, c0 = client.run(_cpu_seconds), time.perf_counter(), time.process_time()
        run()
        wall, own = time.perf_counter() - t0, time.process_time() - c0
        w1 = client.run(_cpu_seconds)
        # CPU of the client and of every worker process (all their threads: BLAS, numba)
        cpu = own + sum(w1[a] - w0[a] for a in w1 if a in w0)
        out = {"time": wall, "cpu": cpu, "client_cpu": own}
    print("RESULT " + json.dumps(out), flush=True)


def measure(store: str, name: str, workers: int):
    def fn() -> dict:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                "--store",
                store,
                "--kernel",
                name,
                "--workers",
                str(workers),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        raise RuntimeError(f"{name} on {workers} worker(s) failed:\n{r.stderr[-2000:]}")

    return fn


def _cores(t) -> str:
    """Cores kept busy during a figure (CPU of client and workers / wall time): a 1-process
    figure near the machine's core count leaves a second process nothing to gain; and the
    client's CPU in it: work the client does whatever the number of workers."""
    return f"{t.cpu / t.seconds:.2f} cores busy, the client {t.report['client_cpu']:.2f} s CPU"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small store, for a smoke run")
    ap.add_argument("--n", type=int, default=None, help="samples (default 200; 40 with --quick)")
    ap.add_argument(
        "--p", type=int, default=None, help="features (default 400 000; 4 000 with --quick)"
    )
    ap.add_argument("--blocks", type=int, default=8, help="feature blocks of the store")
    ap.add_argument(
        "--kernels", nargs="+", default=[*CEILINGS, *KERNELS], choices=[*CEILINGS, *KERNELS]
    )
    add_args(ap, "workers_speedup")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--kernel", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    n = args.n or (40 if args.quick else 200)
    p = args.p or (4_000 if args.quick else 400_000)
    bench = Bench("workers_speedup", args.results)
    with tempfile.TemporaryDirectory(prefix="fsdask-workers-") as tmp:
        store = os.path.join(tmp, "x.zarr")
        make_store(store, n, p, args.blocks)
        bench.line(
            f"store: {n} × {p} float32, {args.blocks} feature blocks; LocalCluster threads_per_worker=1, "
            "1 process vs 2 processes, cluster start-up not timed"
        )
        ceiling = None
        for name in [k for k in CEILINGS if k in args.kernels] + [
            k for k in args.kernels if k not in CEILINGS
        ]:  # the ceilings first: each kernel is judged against them
            t = bench.alternate(
                {"1": measure(store, name, 1), "2": measure(store, name, 2)},
                repeat=args.repeat,
                warm=False,
            )
            speedup = t["1"].seconds / t["2"].seconds
            if name in CEILINGS:
                ceiling = min(ceiling or speedup, speedup)
                verdict = "(this machine's ceiling)"
            elif ceiling is None:
                verdict = "(no ceiling measured in this run)"
            else:
                share = speedup / ceiling
                met = "met" if share >= TARGET_SHARE else "missed"
                verdict = (
                    f"= {share:.2f} × the ceiling {ceiling:.2f}× (target ≥ {TARGET_SHARE}: {met})"
                )
            bench.line(
                f"{name:12s} 1 process {t['1']} ({_cores(t['1'])}), 2 processes {t['2']} "
                f"({_cores(t['2'])}): speed-up {bench.ratio(t['1'], t['2'])} {verdict}"
            )
    bench.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
