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
lymphoma_alizadeh96 is made two-class as code 1 (46 samples, DLBCL) vs the other 50.
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

M_LIST = [1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 75, 100]
K_INSIDE = 100
DATASETS = [  # name, thesis' SHS-SVM, thesis baseline, table
    ("leukemia_golub", "98.61%", "Golub 98.61 / FC-SVM 98.61", "3.1"),
    ("colon_alon", "85%", "Golub 87.1 / FC-SVM 85.48", "3.1"),
    ("lymphoma_alizadeh96", "96.88%", "Golub 92.71 / FC-SVM 96.88", "3.1"),
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


def main() -> None:
    shared_data_dir()
    import fsdask
    from fsdask.evaluate import evaluate

    rows, summary = [], []
    for name, paper, paper_base, table in DATASETS[:1] if QUICK else DATASETS:
        X, y, info = load(name)
        if name == "lymphoma_alizadeh96":
            y = (y != 0).astype(np.int64)
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
            paper_err = n * (100 - thesis) / 100  # the thesis prints rates: errors over n
            v = supervised_verdict(paper_err, e_once, e_in, n)
            why = (
                f"genes chosen once on all samples as the thesis most likely did; honest (inside LOO): "
                f"{acc_in:.2f}%; {e_once} vs {paper_err:.1f} errors: {count_rule(paper_err, n)}; "
                "'better' only if the inside-LOO figure is better too"
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
            "lymphoma_alizadeh96: code 1 (46, DLBCL) vs the 50 others (the thesis does not say which split).",
            "lung: the thesis used Bhattacharjee's 203 samples; ours is the 56-sample 4-class subset — "
            "not comparable.",
            f"protocol {protocol()}: "
            + ("only the first data set (--quick)." if QUICK else "all data sets."),
            "Figures taken on a shared, heavily loaded 2-core machine.",
        ],
    )


if __name__ == "__main__":
    main()
