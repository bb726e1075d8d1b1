"""Wolf & Shashua (JMLR 2005) Table 1: "brain" and "breast met." with unsupervised Q-α (k = 6).

Leave-one-out linear-SVM errors vs the number of selected genes.  Q-α is unsupervised
(labels are never shown to it), so it ranks the genes once on all samples (as in the
paper); the SVM is trained in every LOO fold.  Baselines as in Table 1: RAW (all genes) and
PCA-N (N principal components, fitted inside each fold), plus the majority-class error; and
the table's supervised competitors SNR (Golub et al. 1999) and SVM-RFE (Guyon et al. 2002),
which see labels and so rank the genes inside each LOO fold, on its training samples only.
"breast met." uses only the first 7,000 genes, as the paper did.

The paper does not say how its SVM was set up, so the Q-α curve is shown under four
readings side by side (genes standardised on the training fold or not, C = 1 or 100), and
the non-convergence after 100 iterations is checked by running on to 1000 iterations and
comparing the top genes (full protocol).

Run: python examples/reproduce_qalpha_table1.py [--quick]
(--quick: fewer gene counts, PCA5/PCA20 only, one SVM reading, no convergence re-run)
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _common import (
    QUICK,
    count_rule,
    count_tolerance,
    count_verdict,
    entry,
    load,
    protocol,
    rank_among,
    rank_text,
    rank_verdict,
    write_results_md,
    write_summary,
)
from _peers import loo_svm_errors, rfe_order, snr_order, standardised

import fsdask

warnings.simplefilter("ignore")
TASKS = [
    (
        "cns_pomeroy_outcome",
        "brain",
        None,
        {
            "Q-α": 15,
            "RAW": 32,
            "PCA5": 22,
            "PCA10": 26,
            "PCA20": 25,
            "PCA30": 31,
            "PCA40": 31,
            "PCA50": 30,
            "SNR": 16,
            "RFE": 14,
        },
    ),
    (
        "breast_vantveer",
        "breast met.",
        7000,
        {
            "Q-α": 22,
            "RAW": 34,
            "PCA5": 33,
            "PCA10": 26,
            "PCA20": 25,
            "PCA30": 31,
            "PCA40": 31,
            "PCA50": 30,
            "SNR": 29,
            "RFE": 26,
        },
    ),
]
N_FEATURES = [5, 20, 100, 500] if QUICK else [5, 10, 20, 30, 50, 70, 100, 150, 200, 300, 500, 1000]
PCS = (5, 20) if QUICK else (5, 10, 20, 30, 40, 50)
#: SVM readings (standardise genes on the training fold, C); the first is the headline one
READINGS = [(True, 1.0)] if QUICK else [(True, 1.0), (False, 1.0), (True, 100.0), (False, 100.0)]


def loo_errors(X, y, standardize=True, C=1.0, n_components=None) -> int:
    """LOO errors of a linear SVM on X (optionally on PCA-N fitted inside each fold)."""
    from sklearn.decomposition import PCA
    from sklearn.model_selection import LeaveOneOut
    from sklearn.svm import SVC

    errors = 0
    for tr, te in LeaveOneOut().split(X):
        A, b = standardised(X[tr], X[te]) if standardize else (X[tr], X[te])
        if n_components:
            pca = PCA(n_components=n_components, random_state=0).fit(A)
            A, b = pca.transform(A), pca.transform(b)
        errors += int(SVC(kernel="linear", C=C).fit(A, y[tr]).predict(b)[0] != y[te][0])
    return errors


def main():
    rows, summary = [], []
    t0 = time.perf_counter()
    for name, label, first, paper in TASKS:
        X, y, info = load(name)
        X = np.nan_to_num(
            np.asarray(X, dtype=np.float64)[:, :first] if first else np.asarray(X, np.float64)
        )
        n = X.shape[0]
        majority = int(np.bincount(y).min())
        est = fsdask.QAlpha(k=6, supervised=False, max_iter=100, tol=1e-6).fit(X)
        order = np.argsort(-est.scores_)
        curves = {r: [loo_errors(X[:, order[:m]], y, *r) for m in N_FEATURES] for r in READINGS}
        head = curves[READINGS[0]]
        best, m_best = min(head), N_FEATURES[int(np.argmin(head))]
        rows.append(
            [
                label,
                "Q-α (k=6), best over m",
                f"{best}/{n} (at {m_best} genes)",
                f"{paper['Q-α']}/{n}",
            ]
        )
        for (std, C), c in curves.items():
            rows.append(
                [
                    label,
                    f"Q-α curve, SVM {'standardised' if std else 'raw genes'}, C = {C:g}",
                    f"min {min(c)}; " + ", ".join(f"{m}:{e}" for m, e in zip(N_FEATURES, c)),
                    "—",
                ]
            )
        rows.append([label, "majority class (no genes)", f"{majority}/{n}", "—"])
        conv = f"n_iter {est.n_iter_}, converged {est.converged_}"
        if not QUICK:
            long = fsdask.QAlpha(k=6, supervised=False, max_iter=1000, tol=1e-6).fit(X)
            same = len(set(order[:100]) & set(np.argsort(-long.scores_)[:100]))
            conv += (
                f"; run on to 1000 iterations: n_iter {long.n_iter_}, converged {long.converged_}, "
                f"{same} of the top 100 genes unchanged"
            )
        rows.append(
            [label, "Q-α convergence (tol 1e-6 on ‖Δα‖)", conv, "'not converged' not mentioned"]
        )
        raw = loo_errors(X, y)
        rows.append([label, "RAW (all genes)", f"{raw}/{n}", f"{paper['RAW']}/{n}"])
        pca = {c: loo_errors(X, y, n_components=c) for c in PCS}
        for c, e in pca.items():
            rows.append([label, f"PCA{c}", f"{e}/{n}", f"{paper[f'PCA{c}']}/{n}"])
        all_best = min(min(c) for c in curves.values())
        summary.append(
            entry(
                f"Q-α Table 1, {label}: LOO errors of unsupervised Q-α",
                f"{paper['Q-α']}/{n}",
                f"{best}/{n} (best over the SVM readings {all_best}/{n}; majority class {majority}/{n})",
                count_verdict(best, paper["Q-α"], n),
                f"{count_rule(paper['Q-α'], n)}; our public data version; the paper's "
                "preprocessing and SVM set-up are not given",
            )
        )
        for peer, order_of in (("SNR", snr_order), ("RFE", rfe_order)):
            curve = loo_svm_errors(X, y, order_of, N_FEATURES)
            e, m = min(curve), N_FEATURES[int(np.argmin(curve))]
            rows.append(
                [
                    label,
                    f"{peer} (supervised, ranked inside each fold), best over m",
                    f"{e}/{n} (at {m} genes); "
                    + ", ".join(f"{k}:{v}" for k, v in zip(N_FEATURES, curve)),
                    f"{paper[peer]}/{n}",
                ]
            )
            summary.append(
                entry(
                    f"Q-α Table 1, {label}: LOO errors of {peer} (supervised)",
                    f"{paper[peer]}/{n}",
                    f"{e}/{n} (Q-α {best}/{n})",
                    count_verdict(e, paper[peer], n),
                    f"{count_rule(paper[peer], n)}; genes ranked inside each LOO fold; best over "
                    "m, as the paper chose its parameters to minimise the LOO error",
                )
            )
        best_pca = min(pca.values())
        ranks = rank_among([best / n, *(e / n for e in pca.values())], 0, n)
        summary.append(
            entry(
                f"Q-α Table 1, {label}: Q-α against PCA-N",
                f"Q-α better than every PCA-N: rank 1 of {1 + len(pca)}",
                f"Q-α {best}/{n}, best PCA {best_pca}/{n}: {rank_text(ranks, 1 + len(pca))}",
                rank_verdict(ranks, 1),
                f"same LOO SVM for both; tied = within {count_tolerance(best, n):.1f} errors of "
                f"Q-α's at n = {n} (binomial SE, ≥ 1)",
            )
        )
        print(label, "done", flush=True)
    write_results_md(
        "qalpha_table1",
        "Q-α (Wolf & Shashua 2005) Table 1: LOO linear-SVM errors",
        ["data set", "method", "fsdask", "paper"],
        rows,
        notes=[
            f"protocol {protocol()}: m ∈ {N_FEATURES}, PCA-N for N ∈ {list(PCS)}, SVM readings "
            f"(standardised, C) ∈ {READINGS}.",
            "Unsupervised Q-α (k = 6, power-embedded, init = top-6 PCs, tol 1e-6, 100 iterations), "
            "genes ranked once on all samples (labels unused); LOO linear SVM on the top m genes; "
            "'best' is the minimum over m under the first reading, as the paper's single number "
            "presumably is (the paper does not say how m was chosen).",
            "SNR and RFE (the table's supervised competitors): the genes are ranked inside each "
            "LOO fold on its training samples, then the same LOO linear SVM (standardised, C = 1) "
            "on the top m; RFE halves the genes at each step, as Guyon et al. did (examples/_peers.py).",
            "RAW and PCA-N: LOO linear SVM (standardised, C = 1) on all genes / on N principal "
            "components fitted inside each fold.  The majority-class row is the error of always "
            "predicting the larger class: a LOO error near it means the genes carry no usable signal.",
            "Our data files are the public versions (cns_pomeroy_outcome: 60 × 7128; breast_vantveer: "
            "78 × 24481, first 7000 genes used, NaNs set to 0); the paper's preprocessing is not "
            "given (its RAW brain error 32/60 is above our majority-class error, ours is "
            f"{rows[[r[1] for r in rows].index('RAW (all genes)')][2]}).",
            f"total time {time.perf_counter() - t0:.0f} s on a shared 2-core machine",
        ],
    )
    write_summary("qalpha_table1", summary)


if __name__ == "__main__":
    main()
