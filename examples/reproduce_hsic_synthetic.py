"""Zarkoob (2010) §3.4.1: y = sin(X₅) + sin(X₁₀) + X₁₅² + ε, 50 samples × 60 features.

Linear kernel on y (standardised; A = X H ỹ/(n − 1)), ρ = 0.015, γ = 1.1, 100 trials.
Thesis: features 5, 10 and 15 selected in all 100 trials, every other feature in at most
3 % of them.  Also records the ρ path of trial 0 (count and objective (3.4) vs ρ) and the
selection frequencies at a few other ρ, to show how sensitive the result is to ρ.

This example needs no shared data.  Run:  python examples/reproduce_hsic_synthetic.py
"""

from __future__ import annotations

import numpy as np
from _common import count_rule, count_verdict, entry, save_figure, write_results_md, write_summary

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


def readings_table() -> tuple[list[list], list[dict]]:
    """For every reading: the rates at ρ = 0.015, the best ρ of a grid (others ≤ 3 %), the
    largest ρ selecting 5, 10, 15 in every trial (and what else it then selects), and the
    threshold-free share of trials in which 5, 10, 15 are the three largest |A_i|.
    Returns the table rows and the same numbers per reading (for the computed reading note)."""
    rows, nums = [], []
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
        rows.append(
            [
                label,
                f"{pct(t15)}; others ≤ {o15:.0f}; size of M {m15:.1f}",
                f"{best[0]:.3g}: {pct(best[1])}" if best else "—",
                f"{rho_all:.3g}: others ≤ {o_all:.0f}; size of M {m_all:.1f}",
                f"{top3:.0f}",
            ]
        )
        nums.append(
            {
                "label": label,
                "t15": t15,
                "o15": o15,
                "best": best[1] if best else np.zeros(3),
                "best_rho": best[0] if best else None,
                "o_all": o_all,
                "top3": top3,
            }
        )
    return rows, nums


def _span(values, fmt="{:.0f}") -> str:
    lo, hi = min(values), max(values)
    return (
        fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"
    )


def readings_note(nums: list[dict]) -> str:
    """What the readings table shows, computed from its numbers."""
    text_readings = nums[
        :7
    ]  # 50 samples × 60 features, U[0, 1]: the text's setting under 7 scalings
    tops = [r["top3"] for r in text_readings]
    thesis = lambda r: r["best"].min() >= 100  # noqa: E731  (5, 10, 15 always, others ≤ 3 %)
    out = [
        f"Reading the table (computed): under the readings that keep the text's 50 samples × 60 features "
        f"and U[0, 1] (rows 1–7) features 5, 10, 15 are the three largest |A_i| in {_span(tops)} % of the "
        "trials"
    ]
    if max(tops) < 100:
        out.append(
            ', so no ρ gives "5, 10, 15 always, others ≤ 3 %": the largest ρ that keeps all three in '
            f"all {TRIALS} trials also selects the most frequent noise feature in "
            f"{_span([r['o_all'] for r in text_readings])} % of the trials, and the best ρ with others "
            f"≤ 3 % selects 5 / 10 / 15 in at best {_span([r['best'].min() for r in text_readings])} % "
            "of the trials (lowest of the three)."
        )
    else:
        out.append("; some reading of the text's setting reaches the thesis' outcome.")
    ours = text_readings[0]
    out.append(
        f" At ρ = 0.015 our reading selects {' / '.join(f'{x:.0f}' for x in ours['t15'])} % with others "
        f"≤ {ours['o15']:.0f} %."
    )
    sym = next(r for r in nums if "U[−1, 1]" in r["label"])
    out.append(
        f" U[−1, 1] (x² uncorrelated with x there) selects feature 15 in {sym['best'][2]:.0f} % at its best ρ."
    )
    for r in nums[7:]:
        if "U[−1, 1]" in r["label"]:
            continue
        out.append(
            f" {r['label'].replace('*', '')}: best ρ {' / '.join(f'{x:.0f}' for x in r['best'])} % with others "
            f"≤ 3 %, at ρ = 0.015 {' / '.join(f'{x:.0f}' for x in r['t15'])} % (others ≤ {r['o15']:.0f} %)"
            + (
                " — the thesis' outcome"
                if thesis(r) and r["o15"] <= 3 and r["t15"].min() >= 100
                else " — the thesis' outcome at a re-tuned ρ"
                if thesis(r)
                else ""
            )
            + "."
        )
    if not any(thesis(r) for r in text_readings):
        out.append(
            " Conclusion: at n = 50 × 60 with a linear kernel on y the claim is not reproduced under any "
            "reading tried"
            + (
                "; only readings that contradict the text's sizes reach it"
                if any(thesis(r) for r in nums[7:])
                else ""
            )
            + "."
        )
    return "".join(out) + "\n"


READINGS_INTRO = """
### Why not 100 %: readings of §3.4.1 tried (100 trials each, SparsePM γ = 1.1)

With one response column SparsePM's row test (3.6) is A_i² > ρ, so every reading is a
threshold on |A_i| ∝ the sample covariance (or correlation) of feature i with y; the
scalings only move the threshold.  The last column needs no ρ at all: in a trial where
some noise feature has a larger |A_i| than one of 5, 10, 15, no ρ can select the three
without it.

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
                est = fsdask.SparseHSIC(
                    gamma=1.1, rho=rho, response="continuous", rho_grid=None, standardize=False
                ).fit(X, y)
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
        rows.append(
            [
                rho,
                f"{f[4]:.0f} / {f[9]:.0f} / {f[14]:.0f}",
                f"{others.max():.0f}",
                f"{int(np.argmax(np.where(np.isin(np.arange(60), [4, 9, 14]), -1, f))) + 1}",
                f"{np.mean(sizes[rho]):.2f}",
                "100 / 100 / 100, others ≤ 3" if rho == 0.015 else "",
            ]
        )
    counts = np.array([p["n_selected"] for p in paths])
    grid = paths[0]["rho"]
    path_rows = [
        [f"{r:.4g}", f"{counts[:, i].mean():.2f}", int(counts[:, i].min()), int(counts[:, i].max())]
        for i, r in enumerate(grid)
        if i % 4 == 0
    ]
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
        save_figure(fig, "hsic_synthetic_rho_path.png")
    except ImportError:
        pass
    r_rows, r_nums = readings_table()
    f15 = freq[0.015] / TRIALS * 100
    t15, o15 = f15[TRUE], float(np.delete(f15, TRUE).max())
    # counts over the trials against the thesis' 100 % (each relevant) and ≤ 3 % (each other)
    ok = count_verdict(t15.min() * TRIALS / 100, TRIALS, TRIALS, lower_is_better=False) == "match"
    ok = ok and (o15 <= 3 or count_verdict(o15 * TRIALS / 100, 3 * TRIALS / 100, TRIALS) == "match")
    near = sum(r["best"].min() >= 100 for r in r_nums[:7])
    write_summary(
        "hsic_synthetic",
        [
            entry(
                "Zarkoob §3.4.1 (synthetic regression, ρ = 0.015, 100 trials): % trials selecting 5 / 10 / 15",
                "100 / 100 / 100, others ≤ 3 %",
                f"{' / '.join(f'{x:.0f}' for x in t15)}, others ≤ {o15:.0f} %",
                "match" if ok else "worse",
                f"{count_rule(TRIALS, TRIALS, 'trials')}; {near} of 7 readings of the text's setting "
                "reach the thesis' outcome at any ρ; see the readings table",
            )
        ],
    )
    write_results_md(
        "hsic_synthetic",
        "SparseHSIC — Zarkoob 2010 §3.4.1 synthetic regression (100 trials)",
        [
            "ρ",
            "% trials selecting 5 / 10 / 15",
            "max % any other feature",
            "most frequent other (1-based)",
            "mean size of M",
            "thesis (ρ ≈ 0.015)",
        ],
        rows,
        notes=[
            "X ~ U[0,1], 50 samples × 60 features, ε ~ N(0, 0.01) read as a variance; "
            "generator fsdask.datasets.zarkoob_regression(random_state=trial), trials 0–99.",
            "Feature numbers are the thesis' 1-based ones (fsdask indices 4, 9, 14).",
            "A = X H ỹ/(n − 1) with ỹ the standardised y (linear kernel), γ = 1.1, one component. "
            "With one response column, the row test (3.6) reduces to A_i² > ρ: the selection is the "
            "features whose covariance with the standardised y exceeds √ρ ≈ 0.122 (ρ = 0.015).",
        ],
        extra=READINGS_INTRO
        + "| reading | ρ = 0.015: % 5 / 10 / 15; max % other; mean size of M | best ρ with others ≤ 3 %: % 5 / 10 / 15 "
        "| largest ρ with 5, 10, 15 in all 100 trials: other features then | % trials with 5, 10, 15 the 3 largest absolute A_i |\n"
        + "|---|---|---|---|---|\n"
        + "".join("| " + " | ".join(map(str, r)) + " |\n" for r in r_rows)
        + "\n"
        + readings_note(r_nums)
        + "\n### ρ path (trial-wise counts on a 40-point grid, every 4th shown)\n\n"
        + "| ρ | mean count | min | max |\n|---|---|---|---|\n"
        + "".join(f"| {a} | {b} | {c} | {d} |\n" for a, b, c, d in path_rows),
    )


if __name__ == "__main__":
    main()
