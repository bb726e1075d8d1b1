"""Logo at scale (issue 4): wall times on this machine, printed as a table.

Cases (run all by default; each streams its data into a Zarr store first, not timed):

* ``spiral20k`` — Fermat's spiral + 20 000 irrelevant features (460 × 20 002), end to end
  from Zarr, threads (the paper: 372 s);
* ``breast`` — breast_vantveer (78 × 24 481) from Zarr, σ = 5, λ = 1 (the paper: 22 s);
* ``spiral1m`` — the spiral + 1 000 000 irrelevant features from Zarr on a LocalCluster of
  2 workers × 1 thread limited to 2 GB each (the paper ran out of memory);
* ``skrebate`` — ReliefF and MultiSURF (scikit-rebate) on the same spiral sizes, run with
  ``--skrebate-python`` (a separate venv), each under a time limit.

Every figure carries the machine's state (``benchmarks/_harness.py``: commit, command, CPU
count, 1-minute load before/after; load > 0.5 → "(loaded)", never a result); the I/O floor
(``X.sum()`` of the same store) and the fit alternate, warm, best of ``--repeat`` (≥ 3) for
spiral20k and breast; spiral1m is a single run next to its floor.  The script writes
examples/results/logo_scale.txt (header first); each case's row is also printed as JSON.

Run under the machine-wide benchmark lock::

    flock /work/.bench.lock python benchmarks/logo_scale.py --case spiral20k breast
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _harness import Bench, Timing, add_args  # noqa: E402

BENCH: Bench | None = None
REPEAT = 3


def _store(tmp: Path, n_irrelevant: int) -> tuple[str, float]:
    from fsdask.datasets import fermat_spiral, write_synthetic

    path = tmp / f"spiral_{n_irrelevant}.zarr"
    t = time.perf_counter()
    if not path.exists():
        write_synthetic(fermat_spiral(n_irrelevant, random_state=0), path)
    return str(path), time.perf_counter() - t


def _fit(store: str, **params):
    from fsdask import Logo
    from fsdask.io import open_dataset

    t = time.perf_counter()
    ds = open_dataset(store)
    est = Logo(**params).fit(ds)
    return est, time.perf_counter() - t


def _timed(store: str, **params) -> tuple[object, Timing, Timing]:
    """The fit and the floor of its store, alternating, warm, best of REPEAT."""
    from fsdask.io import open_dataset

    out = {}

    def fit():
        out["est"] = _fit(store, **params)[0]

    def floor():
        open_dataset(store)["X"].data.sum().compute()

    t = BENCH.alternate({"floor": floor, "fit": fit}, REPEAT)
    return out["est"], t["fit"], t["floor"]


def _report(name, est, secs: Timing, floor: Timing, relevant=(0, 1)):
    ranks = [int(est.ranking_[j]) for j in relevant]
    BENCH.line(
        f"{name}: {secs} ({'single run' if secs.runs == 1 else f'best of {secs.runs}'}), floor {floor} "
        f"→ {Bench.ratio(secs, floor)} floor; ranks of the relevant features {ranks}"
    )
    row = {
        "case": name,
        "seconds": round(secs.seconds, 2),
        "loaded": secs.loaded,
        "load1": round(secs.load, 2),
        "foreign_cores": round(secs.foreign, 2),
        "floor_seconds": round(floor.seconds, 3),
        "commit": BENCH.commit,
        "n_iter": est.n_iter_,
        "converged": bool(est.converged_),
        "ranks_of_relevant": ranks,
        "n_selected": int(est.get_support().sum()),
        "n_rejoined": est.result_.attrs["n_rejoined"],
        "active_sizes": est.result_["active_size"].values.tolist(),
        "delta_trace": [round(d, 5) for d in est.result_.attrs["delta_trace"]],
    }
    print(json.dumps(row), flush=True)
    return row


def case_spiral20k(tmp: Path):
    store, wt = _store(tmp, 20_000)
    print(f"# wrote spiral 460 × 20002 in {wt:.1f} s", flush=True)
    est, secs, floor = _timed(store, sigma=2.0, lam=1.0, theta=0.01)
    return _report("spiral 460×20002, threads, from Zarr (paper 372 s)", est, secs, floor)


def case_breast(tmp: Path):
    import xarray as xr

    from fsdask.datasets.shared import load_npz
    from fsdask.io import write_dataset

    X, y, info = load_npz("breast_vantveer")
    path = tmp / "breast.zarr"
    if not path.exists():
        ds = xr.Dataset(
            {"X": (("sample", "feature"), np.asarray(X, dtype=np.float32)), "y": ("sample", y)}
        )
        write_dataset(ds, str(path))
    est, secs, floor = _timed(str(path), sigma=5.0, lam=1.0, theta=0.01)
    return _report(
        "breast_vantveer 78×24481, threads, from Zarr (paper 22 s)", est, secs, floor, relevant=()
    )


def case_spiral1m(tmp: Path):
    import dask
    from distributed import Client, LocalCluster

    store, wt = _store(tmp, 1_000_000)
    print(f"# wrote spiral 460 × 1000002 in {wt:.1f} s", flush=True)
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            memory_limit="2GB",
            processes=True,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        with dask.config.set(scheduler=client):
            from fsdask.io import open_dataset

            floor = BENCH.alternate(
                {"floor": lambda: open_dataset(store)["X"].data.sum().compute()}, REPEAT
            )["floor"]
            secs, est = BENCH.once(lambda: _fit(store, sigma=2.0, lam=1.0, theta=0.01)[0])
    return _report("spiral 460×1000002, LocalCluster 2 workers × 2 GB, from Zarr", est, secs, floor)


SKREBATE = r"""
import sys, time, json, numpy as np, zarr
from skrebate import ReliefF, MultiSURF
path, algo = sys.argv[1], sys.argv[2]
g = zarr.open_group(path, mode="r")
X = np.asarray(g["X"][:], dtype=np.float64); y = np.asarray(g["y"][:])
est = ReliefF(n_neighbors=10, n_jobs=1) if algo == "ReliefF" else MultiSURF(n_jobs=1)
t = time.perf_counter(); est.fit(X, y); secs = time.perf_counter() - t
order = np.argsort(-est.feature_importances_, kind="stable")
rank = np.empty_like(order); rank[order] = np.arange(1, order.size + 1)
print(json.dumps({"algo": algo, "seconds": round(secs, 2), "ranks_of_relevant": [int(rank[0]), int(rank[1])]}))
"""


def case_skrebate(tmp: Path, python: str, sizes: list[int], limit: float):
    script = tmp / "skrebate_run.py"
    script.write_text(SKREBATE)
    rows = []
    for n_irr in sizes:
        store, _ = _store(tmp, n_irr)
        for algo in ("ReliefF", "MultiSURF"):
            try:
                p = subprocess.run(
                    [python, str(script), store, algo],
                    capture_output=True,
                    text=True,
                    timeout=limit,
                )
                out = (
                    p.stdout.strip().splitlines()[-1]
                    if p.returncode == 0
                    else f"error: {p.stderr[-300:]}"
                )
            except subprocess.TimeoutExpired:
                out = f"did not finish within {limit:.0f} s"
            row = {"case": f"skrebate {algo} spiral 460×{n_irr + 2}", "result": out}
            BENCH.line(json.dumps(row))
            rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--case",
        nargs="+",
        default=["spiral20k", "breast", "spiral1m"],
        choices=["spiral20k", "breast", "spiral1m", "skrebate"],
    )
    ap.add_argument(
        "--tmp", default=None, help="folder for the Zarr stores (default: a temporary folder)"
    )
    ap.add_argument("--skrebate-python", default="/tmp/skr/bin/python")
    ap.add_argument("--skrebate-sizes", default="50,500,5000,20000")
    ap.add_argument("--skrebate-limit", type=float, default=900.0, help="seconds per skrebate run")
    add_args(ap, "logo_scale")
    args = ap.parse_args(argv)
    global BENCH, REPEAT
    BENCH, REPEAT = Bench("logo_scale", args.results), args.repeat
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    tmpctx = tempfile.TemporaryDirectory(prefix="logo_scale_") if args.tmp is None else None
    tmp = Path(args.tmp or tmpctx.name)
    tmp.mkdir(parents=True, exist_ok=True)
    for case in args.case:
        if case == "spiral20k":
            case_spiral20k(tmp)
        elif case == "breast":
            case_breast(tmp)
        elif case == "spiral1m":
            case_spiral1m(tmp)
        elif case == "skrebate":
            case_skrebate(
                tmp,
                args.skrebate_python,
                [int(s) for s in args.skrebate_sizes.split(",")],
                args.skrebate_limit,
            )
    BENCH.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
