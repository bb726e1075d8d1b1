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
from fsdask.methods.hsic import r1d, rho_path

TRIALS = 100
RHOS = (0.01, 0.015, 0.02, 0.03)
TRUE = [4, 9, 14]  # 0-based: the thesis' features 5, 10, 15

#: readings of §3.4.1 tried: (label, generator arguments, how A is formed)
READINGS = [
    ("**as implemented**: ε variance 0.01, ỹ standardised, A = X H ỹ/(n−1)", {}, {}),
    ("ε ~ N(0, 0.01) read as a standard deviation (variance 10⁻⁴)", {"noise_var": 1e-4}, {}),
    ("features standardised too (standardize=True)", {}, {"std_x": True}),
    ("raw y, A = X H y/(n−1)", {}, {"std_y": False}),
    ("raw y, A = X H y (no normalisation)", {}, {"std_y": False, "scale": "1"}),
    ("ỹ standardised, A = X H ỹ (no normalisation)", {}, {"scale": "1"}),
    ("raw y, A = X H y/n", {}, {"std_y": False, "scale": "n"}),
    ("X read as 60 samples × 50 features", {"n_samples": 60, "n_features": 50}, {}),
    ("'unit uniform' read as U[−1, 1]", {}, {"symmetric": True}),
    ("*not a reading*: 100 samples instead of 50", {"n_samples": 100}, {}),
]


def reading_A(gen: dict, how: dict, trial: int) -> np.ndarray:
    """A (m × 1) of one trial under one reading, formed directly in NumPy."""
    s = zarkoob_regression(random_state=trial, **{"n_samples": 50, "n_features": 60, **gen})
    X, y = s.X.values.astype(np.float64), s.y.astype(np.float64)
    if how.get("symmetric"):  # same draws mapped to U[−1, 1]; y rebuilt with the same ε
        eps = y - (np.sin(X[:, 4]) + np.sin(X[:, 9]) + X[:, 14] ** 2)
        X = 2 * X - 1
        y = np.sin(X[:, 4]) + np.sin(X[:, 9]) + X[:, 14] ** 2 + eps
    n = X.shape[0]
    Xc = X - X.mean(0)
    if how.get("std_x"):
        Xc /= X.std(0, ddof=1)
    yc = y - y.mean()
    if how.get("std_y", True):
        yc /= y.std(ddof=1)
    return (Xc.T @ yc / {"n-1": n - 1, "n": n, "1": 1}[how.get("scale", "n-1")])[:, None]


def selected(A: np.ndarray, rho: float) -> np.ndarray:
    """SparsePM (γ = 1.1, one component) on A: the selected rows."""
    sel = np.zeros(A.shape[0], bool)
    for r in r1d(A, 1, 1.1, rho):
        sel |= r.M
    return sel


def rates(As: list[np.ndarray], rho: float) -> tuple[np.ndarray, float, float]:
    """% of trials selecting each true feature, max % of any other, mean |M|."""
    S = np.array([selected(A, rho) for A in As])
    f = S.mean(0) * 100
    return f[TRUE], float(np.delete(f, TRUE).max()), float(S.sum(1).mean())


def readings_table() -> list[list]:
    """For every reading: the rates at ρ = 0.015, the best ρ of a grid (others ≤ 3 %), the
    largest ρ selecting 5, 10, 15 in every trial (and what else it then selects), and the
    threshold-free share of trials in which 5, 10, 15 are the three largest |A_i|."""
    rows = []
    for label, gen, how in READINGS:
        As = [reading_A(gen, how, t) for t in range(TRIALS)]
        t15, o15, m15 = rates(As, 0.015)
        scale = np.median([float((A**2).max()) for A in As])
        best = None
        for rho in np.geomspace(1e-4 * scale, scale, 121):
            tr, oth, _ = rates(As, rho)
            if oth <= 3 and (best is None or tr.min() > best[1].min()):
                best = (rho, tr)
        rho_all = min(float((A[TRUE, 0] ** 2).min()) for A in As) * (1 - 1e-9)
        t_all, o_all, m_all = rates(As, rho_all)
        top3 = np.mean([set(np.argsort(-np.abs(A[:, 0]))[:3]) == set(TRUE) for A in As]) * 100
        pct = lambda v: " / ".join(f"{x:.0f}" for x in v)  # noqa: E731
        rows.append([label, f"{pct(t15)}; others ≤ {o15:.0f}; size of M {m15:.1f}",
                     f"{best[0]:.3g}: {pct(best[1])}" if best else "—",
                     f"{rho_all:.3g}: others ≤ {o_all:.0f}; size of M {m_all:.1f}", f"{top3:.0f}"])
    return rows


READINGS_INTRO = """
### Why not 100 %: readings of §3.4.1 tried (100 trials each, SparsePM γ = 1.1)

With one response column SparsePM's row test (3.6) is A_i² > ρ, so every reading is a
threshold on |A_i| ∝ the sample covariance (or correlation) of feature i with y; the
scalings only move the threshold.  The last column needs no ρ at all: in a trial where
some noise feature has a larger |A_i| than one of 5, 10, 15, no ρ can select the three
without it.

"""

READINGS_NOTE = """
Reading the table: under the readings that keep the text's 50 samples × 60 features and
U[0, 1] (rows 1–7) features 5, 10, 15 are the three largest |A_i| in only 82–89 % of the
trials, so no ρ gives "5, 10, 15 always, others ≤ 3 %": the largest ρ that keeps all three
in all 100 trials also selects the most frequent noise feature in 19–26 % of the trials,
and the best ρ with
others ≤ 3 % selects 5 and 10 in only 93–96 % of the trials.  The scalings (rows 1, 4–7)
only move the ρ at which this happens; at ρ = 0.015 they select almost nothing or almost
everything, except ours.  U[−1, 1] loses feature 15 (x² is uncorrelated with x there).
The only readings that come close contradict the text: 60 samples × 50 features (the
transposed reading of "a 60 × 50 matrix") gives 99 / 100 / 100 with others ≤ 3 %, and
100 samples gives the thesis' outcome exactly.  Our setup is therefore not the cause of
the gap: at n = 50 with a linear kernel on y the claim is not reproducible; it may have
been run with more samples than the text says.
"""


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
         "mean size of M", "thesis (ρ ≈ 0.015)"],
        rows,
        notes=["X ~ U[0,1], 50 samples × 60 features, ε ~ N(0, 0.01) read as a variance; "
               "generator fsdask.datasets.zarkoob_regression(random_state=trial), trials 0–99.",
               "Feature numbers are the thesis' 1-based ones (fsdask indices 4, 9, 14).",
               "A = X H ỹ/(n − 1) with ỹ the standardised y (linear kernel), γ = 1.1, one component. "
               "With one response column, the row test (3.6) reduces to A_i² > ρ: the selection is the "
               "features whose covariance with the standardised y exceeds √ρ ≈ 0.122 (ρ = 0.015)."],
        extra=READINGS_INTRO
              + "| reading | ρ = 0.015: % 5 / 10 / 15; max % other; mean size of M | best ρ with others ≤ 3 %: % 5 / 10 / 15 "
              "| largest ρ with 5, 10, 15 in all 100 trials: other features then | % trials with 5, 10, 15 the 3 largest absolute A_i |\n"
              + "|---|---|---|---|---|\n" + "".join("| " + " | ".join(map(str, r)) + " |\n" for r in readings_table())
              + READINGS_NOTE
              + "\n### ρ path (trial-wise counts on a 40-point grid, every 4th shown)\n\n"
              + "| ρ | mean count | min | max |\n|---|---|---|---|\n"
              + "".join(f"| {a} | {b} | {c} | {d} |\n" for a, b, c, d in path_rows) + plot)


if __name__ == "__main__":
    main()
