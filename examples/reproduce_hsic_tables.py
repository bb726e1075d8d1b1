"""Zarkoob (2010) Tables 3.1 and 3.2: best LOO correct rate of SparseHSIC + linear SVM.

The thesis varies ρ "so that the number of genes varies between 1 and the total" and reports
the best LOO correct rate; it does not say whether genes were re-selected inside each LOO
fold.  We report both protocols, labelled:

* **once** (as the thesis most likely did): for every m in M_LIST, ρ is bisected on *all*
  samples for exactly m genes (SparseHSIC(n_features_to_select=m)), then a linear SVM (C=1,
  standardised features) is cross-validated by LOO on those genes.  Optimistic.
* **inside** (honest): in every LOO fold SparseHSIC(n_features_to_select=K_INSIDE) is fit on the
  training samples, and the SVM is fed its top m genes (|u| order inside the SparsePM row set,
  i.e. a nested approximation of the ρ path) for m in M_LIST.

Baseline: the univariate BSS/WSS (F) filter with the same classifier and protocols (the
thesis' multi-class baseline; for two classes it ranks like Golub's SNR / fold change only
approximately — see examples/results/filters_loo.md for those).

Δ: class indicators with entries 1/n_c; γ = 1.1; one component; features only centred.

**The thesis' ρ sweep, every gene count** (two-class sets): with two classes the centred
indicator columns of Δ are collinear, so A = X H Δᵀ/(n − 1) has rank one, A_i = a_i w with
a_i ∝ the difference of the class means of gene i; then SparsePM's row rule keeps the rows
with |a_i| above a threshold set by ρ, and the ρ path is nested: every ρ selects the top m
genes of one ranking by |a_i|.  So "ρ varied so that the number of genes varies between 1 and
the total" is the LOO curve over every m of that ranking; we compute it for every m up to
SWEEP_EVERY and on a log grid from there to the total (the script checks that SparseHSIC's
selection at each m of M_LIST is that ranking's top m).

lymphoma_alizadeh96 (96 samples, as the thesis' 96ths show: 96.88 % = 93/96) is made
two-class both ways, since the thesis does not say how: code 1 (46, DLBCL) vs the other 50,
and the three lymphomas of Alizadeh et al. (DLBCL 46 + FL 9 + CLL 11 = 66; codes 1, 7, 9,
identified by their sizes — the source gives no names) vs the 30 normal and cell-line samples.
The thesis' Table 3.2 lung set is Bhattacharjee's 203 samples; we have only the 56-sample,
4-class subset (lung_bhattacharjee_subset), so that row is not comparable.

    python examples/reproduce_hsic_tables.py [--quick]
"""

from __future__ import annotations

import time

import numpy as np
from _common import (
    QUICK,
    count_rule,
    entry,
    load,
    protocol,
    shared_data_dir,
    supervised_verdict,
    write_results_md,
    write_summary,
)
from _peers import loo_svm_errors_nested

M_LIST = [1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 75, 100]
K_INSIDE = 100
#: the ρ sweep: every gene count up to SWEEP_EVERY, then SWEEP_LOG log-spaced counts to the total
SWEEP_EVERY, SWEEP_LOG = (100, 10) if QUICK else (1000, 40)
#: the two binary readings of the 9-class lymphoma_alizadeh96 codes: (label, positive codes)
LYMPHOMA_SPLITS = {
    "lymphoma_alizadeh96": ("code 1 (DLBCL, 46) vs the other 50", (0,)),
    "lymphoma_alizadeh96/malignant": (
        "DLBCL + FL + CLL (codes 1, 7, 9: 66) vs the 30 normal / cell-line samples",
        (0, 6, 8),
    ),
}
DATASETS = [  # name, thesis' SHS-SVM, thesis baseline, table
    ("leukemia_golub", "98.61%", "Golub 98.61 / FC-SVM 98.61", "3.1"),
    ("colon_alon", "85%", "Golub 87.1 / FC-SVM 85.48", "3.1"),
    ("lymphoma_alizadeh96", "96.88%", "Golub 92.71 / FC-SVM 96.88", "3.1"),
    ("lymphoma_alizadeh96/malignant", "96.88%", "Golub 92.71 / FC-SVM 96.88", "3.1"),
    ("prostate_singh", "95.1%", "Golub 95.1 / FC-SVM 95.1", "3.1"),
    ("srbct_khan", "100.0%", "BSS/WSS 100.0", "3.2"),
    ("lung_bhattacharjee_subset", "94.09% (203 samples)", "BSS/WSS 94.09 (203 samples)", "3.2"),
]


def best(res) -> tuple[float, int, int]:
    c = res.curve
    i = int(np.argmin(c["error_rate"].values))
    return (
        100 * (1 - float(c["error_rate"].values[i])),
        int(c.index[i]),
        int(c["n_errors"].values[i]),
    )


def sweep_counts(p: int) -> list[int]:
    """Every gene count 1 … SWEEP_EVERY, then SWEEP_LOG log-spaced counts up to p."""
    head = list(range(1, min(SWEEP_EVERY, p) + 1))
    tail = np.unique(np.geomspace(SWEEP_EVERY, p, SWEEP_LOG).astype(int)) if p > SWEEP_EVERY else []
    return head + [int(m) for m in tail if m > head[-1]]


def mean_difference_order(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Genes by |a_i|, the row norm of the rank-one two-class A (∝ |μ₁ − μ₀|), largest first."""
    return np.argsort(-np.abs(X[y == 1].mean(0) - X[y == 0].mean(0)), kind="stable")


def rho_sweep(X, y: np.ndarray) -> dict:
    """The thesis' ρ sweep on a two-class set: LOO errors at every gene count of
    :func:`sweep_counts` along the |a_i| ranking, its best point, and whether SparseHSIC's own
    selection at every m of M_LIST is that ranking's top m (the nesting argued above)."""
    import fsdask

    Xd = np.asarray(X, dtype=np.float64)
    order = mean_difference_order(Xd, y)
    nested = all(
        set(np.flatnonzero(fit.support_)) == set(order[:m])
        for m in M_LIST
        for fit in [
            fsdask.SparseHSIC(n_features_to_select=m, rho_grid=None, standardize=False).fit(Xd, y)
        ]
    )
    ms = sweep_counts(Xd.shape[1])
    curve = loo_svm_errors_nested(Xd, y, order, ms)
    b = int(np.argmin(curve))
    return {"ms": ms, "curve": curve, "m": ms[b], "errors": int(curve[b]), "nested": nested}


def two_class(name: str, y: np.ndarray) -> np.ndarray:
    """y of a two-class reading (LYMPHOMA_SPLITS) or y itself."""
    return np.isin(y, LYMPHOMA_SPLITS[name][1]).astype(np.int64) if name in LYMPHOMA_SPLITS else y


def main() -> None:
    shared_data_dir()
    import fsdask
    from fsdask.evaluate import evaluate

    rows, summary, sweeps = [], [], []
    for name, paper, paper_base, table in DATASETS[:1] if QUICK else DATASETS:
        X, y, info = load(name.split("/")[0])
        y = two_class(name, np.asarray(y))
        n, p = X.shape
        t0 = time.perf_counter()
        # "once": exact ρ for every m, fit on all samples
        once = []
        for m in M_LIST:
            if m > p:
                continue
            r = evaluate(
                X,
                y,
                fsdask.SparseHSIC(n_features_to_select=m, rho_grid=None, standardize=False),
                protocol="loo",
                classifier="svm",
                n_features=[m],
                selection="once",
            )
            once.append((100 * (1 - r.best_error), m, r.best_n_errors))
        acc_once, m_once, e_once = max(once, key=lambda t: (t[0], -t[1]))
        sweep = rho_sweep(X, y) if np.unique(y).size == 2 else None
        if sweep is not None:
            sweeps.append((name, n, paper, sweep))
        ins = evaluate(
            X,
            y,
            fsdask.SparseHSIC(n_features_to_select=K_INSIDE, rho_grid=None, standardize=False),
            protocol="loo",
            classifier="svm",
            n_features=M_LIST,
            selection="inside",
        )
        acc_in, m_in, e_in = best(ins)
        f_once = best(
            evaluate(
                X, y, "f", protocol="loo", classifier="svm", n_features=M_LIST, selection="once"
            )
        )
        f_in = best(
            evaluate(
                X, y, "f", protocol="loo", classifier="svm", n_features=M_LIST, selection="inside"
            )
        )
        dt = time.perf_counter() - t0
        rows.append(
            [
                f"{name} ({n}×{p}, T{table})",
                paper,
                f"{acc_once:.2f}% ({e_once} err, {m_once} genes)",
                "—"
                if sweep is None
                else f"{100 * (1 - sweep['errors'] / n):.2f}% ({sweep['errors']} err, "
                f"{sweep['m']} genes)",
                f"{acc_in:.2f}% ({e_in} err, top {m_in})",
                paper_base,
                f"{f_once[0]:.2f}% ({f_once[2]} err, {f_once[1]})",
                f"{f_in[0]:.2f}% ({f_in[2]} err, {f_in[1]})",
                f"{dt:.0f}",
            ]
        )
        print(rows[-1], flush=True)
        thesis = float(paper.split("%")[0])
        if name == "lung_bhattacharjee_subset":
            v, why = "not comparable", "the thesis used 203 samples, ours is the 56-sample subset"
        else:
            e_best = e_once
            if sweep is not None:  # the thesis' protocol: best over the whole ρ sweep
                acc_once, e_best = 100 * (1 - sweep["errors"] / n), sweep["errors"]
            paper_err = n * (100 - thesis) / 100  # the thesis prints rates: errors over n
            v = supervised_verdict(paper_err, e_best, e_in, n)
            why = (
                "genes chosen once on all samples as the thesis most likely did"
                + ("" if sweep is None else ", ρ swept over every gene count")
                + f"; honest (inside LOO): {acc_in:.2f}%; {e_best} vs {paper_err:.1f} errors: "
                + f"{count_rule(paper_err, n)}; 'better' only if the inside-LOO figure is better too"
                + (f"; split: {LYMPHOMA_SPLITS[name][0]}" if name in LYMPHOMA_SPLITS else "")
            )
        summary.append(
            entry(f"Zarkoob Table {table} SHS-SVM, {name}", paper, f"{acc_once:.2f}%", v, why)
        )
    write_summary("hsic_tables", summary)
    write_results_md(
        "hsic_tables",
        "SparseHSIC — Zarkoob 2010 Tables 3.1 / 3.2 (best LOO correct rate, linear SVM)",
        [
            "dataset",
            "thesis SHS-SVM",
            "ours: once (exact ρ per m)",
            "ours: once, ρ swept over every gene count",
            "ours: inside LOO (top m of K=100)",
            "thesis baselines",
            "BSS/WSS-SVM once",
            "BSS/WSS-SVM inside",
            "time (s)",
        ],
        rows,
        notes=[
            f"m (genes) ∈ {M_LIST}; best over m reported, as in the thesis (errors and m in brackets).",
            "once = genes chosen on all samples, only the SVM cross-validated (optimistic; the thesis' "
            "protocol is not stated); inside = genes re-selected in every LOO training fold (honest).",
            "Linear SVM C = 1 on features standardised inside each fold (fsdask.evaluate).",
            "SparseHSIC: γ = 1.1, Δ = class indicators with entries 1/n_c, A = X H Δᵀ/(n−1), one component, "
            "ρ bisected for m genes (n_features_to_select).",
            "ρ swept (two-class sets): with two classes A = X H Δᵀ/(n−1) has rank one, so the ρ path "
            "is nested along |a_i| ∝ |μ₁ − μ₀| and every gene count is one ρ; counts 1 … "
            f"{SWEEP_EVERY} all, then {SWEEP_LOG} log-spaced to the total (thesis: 'ρ varied so that "
            "the number of genes varies between 1 and the total').  SparseHSIC's own selection "
            "equals that ranking's top m at every m of the first list: "
            + ", ".join(f"{nm} {'yes' if sw['nested'] else 'NO'}" for nm, _, _, sw in sweeps)
            + ".",
            "Sweep curves (LOO errors at m genes, every 10th count to 100 and the log grid): "
            + "; ".join(
                f"{nm}: "
                + ", ".join(
                    f"{m}:{e}"
                    for m, e in zip(sw["ms"], sw["curve"])
                    if (m <= 100 and m % 10 == 0) or m > SWEEP_EVERY or m in (1, 2, 5)
                )
                for nm, _, _, sw in sweeps
            ),
            "lymphoma_alizadeh96 (96 samples, as the thesis' rates in 96ths show) both ways, the "
            "thesis does not say which split: "
            + "; ".join(f"{k}: {v[0]}" for k, v in LYMPHOMA_SPLITS.items())
            + ".",
            "lung: the thesis used Bhattacharjee's 203 samples; ours is the 56-sample 4-class subset — "
            "not comparable.",
            f"protocol {protocol()}: "
            + ("only the first data set (--quick)." if QUICK else "all data sets."),
            "Figures taken on a shared, heavily loaded 2-core machine.",
        ],
    )


if __name__ == "__main__":
    main()
