"""Larger than memory: every method on a float32 store about twice the workers' total memory.

A 2-process LocalCluster (``--workers`` × ``--memory-limit``, one thread each; default
2 × 1 GB) fits each method on a ``--samples`` × ``--features`` float32 store (default
100 × 10⁷ = 4 GB, ``--block-mib`` 64 MiB feature blocks; N(0, 1) with the first 10
features shifted in class 1).  While a fit runs, a thread polls every worker's RSS
(``client.run(psutil.Process().memory_info)``) every ``--poll`` seconds; printed per method:
wall time (single run), peak RSS per worker, how many workers were replaced (a killed worker
comes back under a new pid) and the outcome (ok, or the exception's name and message).

CPFS refuses this size before reading X (its KKT scans cost 2·p²·min(n, p) flops: days at
10⁷; see ``max_scan_flops``), so ``cpfs_passes`` runs the passes CPFS makes over X before its
scans — centring, duplicate hashes, the n × n Gram, the factor product ``UᵀX`` — on the
workers, with the r × p factor reduced to its energy instead of gathered on the client.

The fits attach by address (``fsdask.cluster.scheduler("tcp://…")``), never through a Client
in the dask config (it breaks nanny restarts).  The store is written by this script (unless
``--store`` names an existing one) and removed at the end unless ``--keep``.

Run (on a quiet machine):  flock /work/.bench.lock .venv/bin/python benchmarks/out_of_core.py
Smoke run:  python benchmarks/out_of_core.py --features 300000 --memory-limit 700MB --methods ttest,cpfs_passes
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Bench, add_args  # noqa: E402

SIGNAL = 10
#: parameters besides the defaults (a selection size for the methods that need one)
PARAMS = {
    "hsic": {"n_features_to_select": SIGNAL},
    "cpfs": {"n_features_to_select": SIGNAL},
    "qalpha": {"random_state": 0},
}
#: methods whose ``max_iter`` --max-iter caps: Q-α at its defaults runs up to 100 iterations
#: of two passes each (about 30 min at 10⁷ features); Logo converges in ~20–30 and stays whole
ITERATIVE = ("qalpha",)


def make_store(path: str, n: int, p: int, block: int) -> None:
    """N(0, 1) float32, first SIGNAL features shifted by 1.5 in class 1; written block by block."""
    import dask.array as da

    import fsdask
    from fsdask.cluster import scheduler

    y = np.repeat([0, 1], [n // 2, n - n // 2])
    shift = np.zeros(p, np.float32)
    shift[:SIGNAL] = 1.5
    X = da.random.default_rng(0).standard_normal(
        (n, p), chunks=(n, max(1, block // (4 * n))), dtype=np.float32
    )
    X = X + da.from_array(y[:, None].astype(np.float32)) * da.from_array(
        shift[None, :], chunks=(1, X.chunks[1])
    )
    with scheduler("threads"):
        fsdask.ingest(X, path, y=y, chunk_bytes=block)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


class Peak:
    """Polls every worker's RSS in a thread; ``peak`` maps worker address → max bytes seen."""

    def __init__(self, client, every: float):
        self.client, self.every = client, every
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for w, rss in self.client.run(_rss, on_error="ignore").items():
                    self.peak[w] = max(self.peak.get(w, 0), rss)
            except Exception:  # a worker being restarted; the next poll sees its successor
                pass
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def cpfs_passes(X) -> str:
    """CPFS's worker passes over X, as in ``CPFS._prepare``; the factor checked by its energy."""
    from fsdask.linalg.reductions import map_features, row_dot, sum_over_blocks
    from fsdask.linalg.tsqr import _gram_term
    from fsdask.methods.cpfs import centred_block, duplicate_columns

    Xc = map_features(centred_block, X, out_rows=X.shape[0], dtype=np.float64, scale=False)
    dup = duplicate_columns(X)
    K = np.asarray(sum_over_blocks(_gram_term, Xc, shape=(X.shape[0],) * 2).compute())
    w, U = np.linalg.eigh(K)
    energy = float((row_dot(Xc, U) ** 2).sum().compute())  # ‖UᵀXc‖² = trace K
    return f"ok, {int(dup.sum())} duplicate columns; ‖UᵀXc‖² / trace K = {energy / np.trace(K):.6f}"


def main() -> None:
    import fsdask
    from fsdask.methods import REGISTRY

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--features", type=int, default=10_000_000)
    ap.add_argument("--block-mib", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument(
        "--methods",
        default=",".join([*REGISTRY, "cpfs_passes"]),
        help="comma-separated registry names, and cpfs_passes",
    )
    ap.add_argument(
        "--store", default=None, help="an existing store to use (default: write one in a temp dir)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the store this script wrote")
    ap.add_argument("--poll", type=float, default=0.2, help="seconds between RSS polls")
    ap.add_argument(
        "--max-iter",
        type=int,
        default=None,
        help="cap Q-α's iterations: bounds the time only — "
        "every iteration holds the same blocks, so the memory figures are those of a full fit "
        "(default: each method's own max_iter)",
    )
    add_args(ap, "out_of_core", repeat=1)
    args = ap.parse_args()

    from dask.utils import format_bytes, parse_bytes
    from distributed import Client, LocalCluster

    from fsdask.cluster import quiet_distributed, scheduler
    from fsdask.errors import ParameterError

    bench = Bench("out_of_core", args.results)
    made = None
    store = args.store
    if store is None:
        import tempfile

        made = tempfile.mkdtemp(prefix="fsdask-ooc-")
        store = os.path.join(made, "x.zarr")
        t, _ = bench.once(
            lambda: make_store(store, args.samples, args.features, args.block_mib * 2**20)
        )
        bench.line(
            f"store: {args.samples} × {args.features} float32, {args.block_mib} MiB blocks, written in {t} (single run)"
        )
    ds = fsdask.open_dataset(store)
    limit = parse_bytes(args.memory_limit)
    bench.line(
        f"X: {format_bytes(ds['X'].nbytes)} in {len(ds['X'].data.chunks[1])} blocks; cluster: "
        f"{args.workers} workers × {format_bytes(limit)} (total {format_bytes(args.workers * limit)})"
    )

    quiet_distributed()
    cluster = LocalCluster(
        n_workers=args.workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        memory_limit=args.memory_limit,
    )
    client = Client(cluster, set_as_default=False)
    try:
        for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
            client.wait_for_workers(args.workers, timeout=120)
            pids = set(client.run(os.getpid).values())
            params = dict(PARAMS.get(name, {}))
            if args.max_iter is not None and name in ITERATIVE:
                params["max_iter"] = args.max_iter
            est = None if name == "cpfs_passes" else fsdask.get_method(name, **params)
            with Peak(client, args.poll) as peak:

                def fit(est=est):
                    try:
                        with scheduler(client.scheduler.address):
                            if est is None:
                                return cpfs_passes(ds["X"].data)
                            res = est.fit(ds).result_
                        top = np.argsort(-res["weight"].values)[:SIGNAL]
                        return f"ok, {int(np.isin(top, np.arange(SIGNAL)).sum())}/{SIGNAL} planted in the top {SIGNAL}"
                    except ParameterError as exc:  # refused by its shape, before X is read
                        return f"refused: {exc}"
                    except Exception as exc:  # reported, the next method still runs
                        return f"FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"

                t, outcome = bench.once(fit)
            replaced = len(pids - set(client.run(os.getpid).values()))
            peaks = ", ".join(format_bytes(v) for _, v in sorted(peak.peak.items()))
            capped = f" (max_iter={params['max_iter']})" if "max_iter" in params else ""
            bench.line(
                f"{name + capped:16s} {t} (single run); peak RSS per worker: {peaks} "
                f"(limit {format_bytes(limit)}); workers replaced: {replaced}; {outcome}"
            )
    finally:
        client.close()
        cluster.close()
        if made and not args.keep:
            shutil.rmtree(made, ignore_errors=True)
    bench.write()


if __name__ == "__main__":
    main()
