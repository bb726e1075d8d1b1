"""CPFS at scale (issue 17): run under `flock /work/.bench.lock`.

1. ``nips_words`` (1500 × 7605): ``fsdask.cpfs_path(X)`` at its defaults (glmnet-style
   λ_min ratio, stop at ``max_features`` or when the reconstruction stops improving);
   target ≤ 2 min.  Prints where and why the path stopped.
2. A synthetic low-rank 500 × 100 000 Zarr store (rank 20, lazily generated, written in
   feature blocks): ``CPFS(n_features_to_select=100)`` with the active-set solver (no
   p × p Gram: KKT scans on the rank-r factor B); target ≤ 60 s.

Both run every other parameter at its default, as a user would; ``--tol`` (the relative
duality gap at every λ, default the estimators' 1e-4) measures another solve, and every
line then names it.

    flock /work/.bench.lock python benchmarks/cpfs_scale.py [nips|synthetic|all]

Each run is a single timing (minutes long), with the machine's state recorded by
``benchmarks/_harness.py`` (load before/after, commit, command; load > 0.5 → "(loaded)");
the result file examples/results/cpfs_scale.txt is written by the script.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Bench, add_args  # noqa: E402

import fsdask  # noqa: E402
from fsdask.datasets.shared import load_npz, shared_data_path  # noqa: E402


def _tol(tol: float | None) -> tuple[dict, str]:
    """The keyword for ``tol`` (none at the default) and how a result line names it."""
    return ({}, "at its defaults") if tol is None else ({"tol": tol}, f"with tol={tol:g}")


def nips(bench: Bench, tol: float | None) -> None:
    """``cpfs_path(X)`` at its defaults (``--tol`` may loosen the solve)."""
    if not (shared_data_path() / "nips_words.npz").exists():
        bench.line("skipping nips: ../shared/data/nips_words.npz absent")
        return
    X, _, info = load_npz("nips_words")
    kw, how = _tol(tol)
    t, path = bench.once(lambda: fsdask.cpfs_path(X, **kw))
    a = path.attrs
    lines = [
        f"nips_words {X.shape[0]}×{X.shape[1]}: cpfs_path(X) {how} (λ_min ratio "
        f"{a['lambda_min_ratio']:g}, max_features {a['max_features']}): {t} (single run), target ≤ 120 s",
        f"stopped: {a['path_stop']} — {a['path_stop_reason']}; rank of X {a['rank']}; worst relative duality gap "
        f"{float(path['path_gap'].max()):.2e}",
        f"{'λ':>11} {'active':>6} {'rel.gap':>9} {'KKT max ‖∇f_i‖₁/λ (zero rows)':>30} {'iter':>5} {'KKT rounds':>10} {'s':>6}",
    ]
    for k in range(path.sizes["lambda"]):

        def g(v, k=k):
            return path[v].values[k]

        lines.append(
            f"{g('lambda'):11.4g} {int(g('path_n_active')):6d} {g('path_gap'):9.2e} {g('path_kkt_max_ratio'):30.6f} "
            f"{int(g('path_n_iter')):5d} {int(g('path_kkt_rounds')):10d} {g('path_seconds'):6.1f}"
        )
    words = np.asarray(info["feature_names"])[np.argsort(path["rank"].values)[:30]]
    lines.append("first 30 words: " + ", ".join(words))
    for line in lines:
        bench.line(line)


def synthetic(
    bench: Bench, tol: float | None, n: int = 500, p: int = 100_000, rank: int = 20, q: int = 100
) -> None:
    rng = np.random.default_rng(0)
    L = rng.normal(size=(n, rank))
    block = 10_000

    def make(block_id):
        r = np.random.default_rng(1000 + block_id[1])
        W = r.normal(size=(rank, block)) * r.uniform(0.2, 2.0, size=block)
        return (L @ W).astype(np.float32)

    X = da.map_blocks(make, dtype=np.float32, chunks=((n,), (block,) * (p // block)))
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "lowrank.zarr")
        import xarray as xr

        tw, _ = bench.once(
            lambda: fsdask.write_dataset(
                xr.Dataset({"X": (("sample", "feature"), X)}), url, block=block
            )
        )
        ds = fsdask.open_dataset(url)
        kw, how = _tol(tol)
        t, est = bench.once(lambda: fsdask.CPFS(n_features_to_select=q, **kw).fit(ds))
        a = est.result_.attrs
        bench.line(
            f"synthetic low-rank {n}×{p} (rank {rank}, float32 Zarr store written in {tw}): "
            f"CPFS(n_features_to_select={q}) {how}: {int(est.support_.sum())} features "
            f"selected in {t} (single run), target ≤ 60 s"
        )
        bench.line(
            f"factor rank {a['rank']}, λ_q = {est.lambda_:.4g} (λ_max {est.lambda_max_:.4g}), relative duality gap "
            f"{a['duality_gap']:.2e}, KKT max ‖∇f_i‖₁/λ over zero rows {a['kkt_max_ratio_inactive']:.6f}, "
            f"{a['n_kkt_scans']} KKT scans, Gram in memory: {a['gram_in_memory']}, "
            f"λ values solved {est.result_.sizes['lambda']}, active rows along the path "
            f"{[int(v) for v in est.result_['path_n_active'].values]}, FISTA iterations "
            f"{int(est.result_['path_n_iter'].sum())}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("which", nargs="?", default="all", choices=["nips", "synthetic", "all"])
    ap.add_argument(
        "--tol",
        type=float,
        default=None,
        help="relative duality gap at every λ (default: the estimators' own, 1e-4)",
    )
    add_args(ap, "cpfs_scale", repeat=1)
    args = ap.parse_args()
    bench = Bench("cpfs_scale", args.results)
    if args.which in ("nips", "all"):
        nips(bench, args.tol)
    if args.which in ("synthetic", "all"):
        synthetic(bench, args.tol)
    bench.write()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
