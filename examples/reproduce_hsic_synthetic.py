"""Zarkoob (2010) §3.4.1: y = sin(X₅) + sin(X₁₀) + X₁₅² + ε, 50 samples × 60 features.

Linear kernel on y (standardised; A = X H ỹ/(n − 1)), ρ = 0.015, γ = 1.1, 100 trials.
Thesis: features 5, 10 and 15 selected in all 100 trials, every other feature in at most
3 % of them.  Also records the ρ path of trial 0 (count and objective (3.4) vs ρ) and the
selection frequencies at a few other ρ, to show how sensitive the result is to ρ.

This example needs no shared data.  Run:  python examples/reproduce_hsic_synthetic.py
"""

from __future__ import annotations

import numpy as np

from _common import results_dir, write_results_md

import fsdask
import fsdask.errors
from fsdask.datasets import zarkoob_regression
from fsdask.methods.hsic import rho_path

TRIALS = 100
RHOS = (0.01, 0.015, 0.02, 0.03)


def main() -> None:
    freq = {rho: np.zeros(60) for rho in RHOS}
    sizes = {rho: [] for rho in RHOS}
    paths = []
    for t in range(TRIALS):
        s = zarkoob_regression(n_samples=50, n_features=60, random_state=t)
        X, y = s.X.values.astype(np.float64), s.y
        for rho in RHOS:
            try:
                est = fsdask.SparseHSIC(gamma=1.1, rho=rho, response="continuous", rho_grid=None).fit(X, y)
                sup = est.get_support()
            except fsdask.errors.ParameterError:  # ρ above max A_i²: nothing selected
                sup = np.zeros(60, bool)
            freq[rho] += sup
            sizes[rho].append(int(sup.sum()))
            if rho == 0.015:
                A = est.hsic_A_
        paths.append(rho_path(A, np.geomspace(1e-3, 0.2, 40), gamma=1.1))
    rows = []
    for rho in RHOS:
        f = freq[rho] / TRIALS * 100
        others = np.delete(f, [4, 9, 14])
        rows.append([rho, f"{f[4]:.0f} / {f[9]:.0f} / {f[14]:.0f}", f"{others.max():.0f}",
                     f"{int(np.argmax(np.where(np.isin(np.arange(60), [4, 9, 14]), -1, f))) + 1}",
                     f"{np.mean(sizes[rho]):.2f}",
                     "100 / 100 / 100, others ≤ 3" if rho == 0.015 else ""])
    counts = np.array([p["n_selected"] for p in paths])
    grid = paths[0]["rho"]
    path_rows = [[f"{r:.4g}", f"{counts[:, i].mean():.2f}", int(counts[:, i].min()), int(counts[:, i].max())]
                 for i, r in enumerate(grid) if i % 4 == 0]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 3.2), dpi=90)
        ax.semilogx(grid, counts.mean(0), "k-", label="mean over 100 trials")
        ax.fill_between(grid, counts.min(0), counts.max(0), color="0.85", label="min–max")
        ax.axvline(0.015, ls="--", color="C3", label="ρ = 0.015")
        ax.set_xlabel("ρ"), ax.set_ylabel("selected features"), ax.legend(fontsize=8)
        ax.set_title("§3.4.1: number of selected features vs ρ", fontsize=9)
        fig.tight_layout()
        fig.savefig(results_dir() / "hsic_synthetic_rho_path.png")
        plot = "\n![ρ path](hsic_synthetic_rho_path.png)\n"
    except ImportError:
        plot = ""
    write_results_md(
        "hsic_synthetic",
        "SparseHSIC — Zarkoob 2010 §3.4.1 synthetic regression (100 trials)",
        ["ρ", "% trials selecting 5 / 10 / 15", "max % any other feature", "most frequent other (1-based)",
         "mean |M|", "thesis (ρ ≈ 0.015)"],
        rows,
        notes=["X ~ U[0,1], 50 samples × 60 features, ε ~ N(0, 0.01) read as a variance; "
               "generator fsdask.datasets.zarkoob_regression(random_state=trial), trials 0–99.",
               "Feature numbers are the thesis' 1-based ones (fsdask indices 4, 9, 14).",
               "A = X H ỹ/(n − 1) with ỹ the standardised y (linear kernel), γ = 1.1, one component. "
               "With one response column, the row test (3.6) reduces to A_i² > ρ: the selection is the "
               "features whose covariance with the standardised y exceeds √ρ ≈ 0.122 (ρ = 0.015)."],
        extra="\n### ρ path (trial-wise counts on a 40-point grid, every 4th shown)\n\n"
              + "| ρ | mean count | min | max |\n|---|---|---|---|\n"
              + "".join(f"| {a} | {b} | {c} | {d} |\n" for a, b, c, d in path_rows) + plot)


if __name__ == "__main__":
    main()
