"""CPFS at scale (issue 6): run under `flock /work/.bench.lock`.

1. ``nips_words`` (1500 × 7605): a full path of 20 λ values (λ_max … λ_max·ratio) with the
   active-set solver; target ≤ 2 min on the 2-core machine.
2. A synthetic low-rank 500 × 100 000 Zarr store (rank 20, lazily generated, written in
   feature blocks): 100 features selected with the active-set solver (no p × p Gram:
   KKT scans on the rank-r factor B); target ≤ 10 min.

    flock /work/.bench.lock python benchmarks/cpfs_scale.py [nips|synthetic|all]
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import fsdask  # noqa: E402
from fsdask.datasets.shared import load_npz, shared_data_path  # noqa: E402


def nips(ratio: float = 0.05) -> None:
    if not (shared_data_path() / "nips_words.npz").exists():
        print("skipping nips: ../shared/data/nips_words.npz absent")
        return
    X, _, info = load_npz("nips_words")
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    t0, c0 = time.perf_counter(), time.process_time()
    path = fsdask.cpfs_path(X, n_lambdas=20, lambda_min_ratio=ratio, tol=1e-4, max_iter=3000)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"nips_words {X.shape[0]}×{X.shape[1]}: 20-λ path (λ_max → {ratio}·λ_max) in {dt:.1f} s wall, "
          f"{cpu:.1f} s CPU (all threads; machine load {os.getloadavg()[0]:.1f}); "
          f"rank {path.attrs['rank']}; active rows along the path: {list(path['path_n_active'].values)}; "
          f"worst relative duality gap {float(path['path_gap'].max()):.2e}; "
          f"per-λ seconds {[round(float(s), 1) for s in path['path_seconds'].values]}")
    words = np.asarray(info["feature_names"])[np.argsort(path["rank"].values)[:30]]
    print("first 30 words:", ", ".join(words))


def synthetic(n: int = 500, p: int = 100_000, rank: int = 20, q: int = 100) -> None:
    rng = np.random.default_rng(0)
    L = rng.normal(size=(n, rank))
    block = 10_000

    def make(block_id):
        r = np.random.default_rng(1000 + block_id[1])
        W = r.normal(size=(rank, block)) * r.uniform(0.2, 2.0, size=block)
        return (L @ W).astype(np.float32)

    X = da.map_blocks(make, dtype=np.float32, chunks=((n,), (block,) * (p // block)))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        url = str(Path(tmp) / "lowrank.zarr")
        import xarray as xr
        fsdask.write_dataset(xr.Dataset({"X": (("sample", "feature"), X)}), url, block=block)
        ds = fsdask.open_dataset(url)
        t_write = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        est = fsdask.CPFS(n_features_to_select=q, n_lambdas=20, lambda_min_ratio=1e-3, tol=1e-4, max_iter=3000,
                          energy_tol=1e-10).fit(ds)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        a = est.result_.attrs
        print(f"synthetic low-rank {n}×{p} (rank {rank}, float32 store written in {t_write:.1f} s): "
              f"{int(est.support_.sum())} features selected in {dt:.1f} s wall, {cpu:.1f} s CPU "
              f"(load {os.getloadavg()[0]:.1f}); factor rank {a['rank']}, "
              f"λ_q = {est.lambda_:.4g} (λ_max {est.lambda_max_:.4g}), relative duality gap {a['duality_gap']:.2e}, "
              f"{a['n_kkt_scans']} KKT scans, Gram in memory: {a['gram_in_memory']}, "
              f"λ values solved {est.result_.sizes['lambda']}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which in ("nips", "all"):
        nips()
    if which in ("synthetic", "all"):
        synthetic()
