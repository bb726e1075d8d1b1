"""CPFS at scale (issue 6): run under `flock /work/.bench.lock`.

1. ``nips_words`` (1500 × 7605): a full path of 20 λ values (λ_max … λ_max·ratio) with the
   active-set solver; target ≤ 2 min on the 2-core machine.
2. A synthetic low-rank 500 × 100 000 Zarr store (rank 20, lazily generated, written in
   feature blocks): 100 features selected with the active-set solver (no p × p Gram:
   KKT scans on the rank-r factor B); target ≤ 10 min.

    flock /work/.bench.lock python benchmarks/cpfs_scale.py [nips|synthetic|all]

Each part prints its figures and stores them in examples/results/cpfs_scale.txt.
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


OUT = Path(__file__).resolve().parents[1] / "examples" / "results" / "cpfs_scale.txt"


def report(section: str, lines: list[str]) -> None:
    """Print ``lines`` and store them as ``section`` of examples/results/cpfs_scale.txt (other sections kept)."""
    for line in lines:
        print(line, flush=True)
    sections: dict[str, str] = {}
    if OUT.exists():
        for chunk in OUT.read_text().split("\n## ")[1:]:
            name, _, body = chunk.partition("\n")
            sections[name.strip()] = body.rstrip("\n")
    sections[section] = "\n".join(lines)
    head = "# benchmarks/cpfs_scale.py output (figures taken on the machine and load stated in each line)\n"
    OUT.write_text(head + "".join(f"\n## {k}\n{sections[k]}\n" for k in ("nips", "synthetic") if k in sections))


def machine() -> str:
    return f"{os.cpu_count()} cores, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"


def nips(ratio: float = 0.05, tol: float = 1e-4) -> None:
    """λ grid: λ_max = max_i 2‖(XᵀX)_i‖₁ (the KKT condition at A = 0), 20 values geometric down to
    ``ratio``·λ_max (0.05: about 330 of 7605 words active, the last λ values dominate the time)."""
    if not (shared_data_path() / "nips_words.npz").exists():
        print("skipping nips: ../shared/data/nips_words.npz absent")
        return
    X, _, info = load_npz("nips_words")
    before = machine()
    t0, c0 = time.perf_counter(), time.process_time()
    path = fsdask.cpfs_path(X, n_lambdas=20, lambda_min_ratio=ratio, tol=tol, max_iter=3000)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    lines = [f"nips_words {X.shape[0]}×{X.shape[1]}: 20-λ path (λ_max → {ratio}·λ_max, geometric), stopping rule "
             f"relative duality gap ≤ {tol:g} at every λ, in {dt:.1f} s wall, {cpu:.1f} s CPU (all threads); "
             f"machine before: {before}; after: {machine()}",
             f"rank of X {path.attrs['rank']}; worst relative duality gap {float(path['path_gap'].max()):.2e}",
             f"{'λ':>11} {'active':>6} {'rel.gap':>9} {'KKT max ‖∇f_i‖₁/λ (zero rows)':>30} {'iter':>5} {'KKT rounds':>10} {'s':>6}"]
    for k in range(path.sizes["lambda"]):
        g = lambda v: path[v].values[k]  # noqa: E731
        lines.append(f"{g('lambda'):11.4g} {int(g('path_n_active')):6d} {g('path_gap'):9.2e} {g('path_kkt_max_ratio'):30.6f} "
                     f"{int(g('path_n_iter')):5d} {int(g('path_kkt_rounds')):10d} {g('path_seconds'):6.1f}")
    words = np.asarray(info["feature_names"])[np.argsort(path["rank"].values)[:30]]
    lines.append("first 30 words: " + ", ".join(words))
    report("nips", lines)


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
        before = machine()
        t0, c0 = time.perf_counter(), time.process_time()
        est = fsdask.CPFS(n_features_to_select=q, n_lambdas=20, lambda_min_ratio=1e-3, tol=1e-4, max_iter=3000,
                          energy_tol=1e-10).fit(ds)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        a = est.result_.attrs
        report("synthetic", [
            f"synthetic low-rank {n}×{p} (rank {rank}, float32 Zarr store written in {t_write:.1f} s): "
            f"{int(est.support_.sum())} features selected in {dt:.1f} s wall, {cpu:.1f} s CPU; machine before: "
            f"{before}; after: {machine()}",
            f"factor rank {a['rank']}, λ_q = {est.lambda_:.4g} (λ_max {est.lambda_max_:.4g}), relative duality gap "
            f"{a['duality_gap']:.2e}, KKT max ‖∇f_i‖₁/λ over zero rows {a['kkt_max_ratio_inactive']:.6f}, "
            f"{a['n_kkt_scans']} KKT scans, Gram in memory: {a['gram_in_memory']}, "
            f"λ values solved {est.result_.sizes['lambda']}, active rows along the path "
            f"{[int(v) for v in est.result_['path_n_active'].values]}"])

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which in ("nips", "all"):
        nips()
    if which in ("synthetic", "all"):
        synthetic()
