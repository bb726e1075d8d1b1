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

The paper gives no preprocessing (its full report, Wolf, Shashua & Mukherjee 2004/2005, is
not at hand; the JMLR text states only the dimensions — 7,129 and 24,624, i.e. no filter that
drops genes — and "the first 7,000 features" of breast met.).  The RAW column (a linear SVM
on all genes) is the check on data and preprocessing, so it is also shown under the readings
we could rebuild (RAW_READINGS): the SVM on unstandardised genes and with a small C, a
variance filter, a log of the shifted values (brain: our file is the row-standardised CNS
table of CRAN stepwiseCM — every sample has mean 0 and sd 1 over the genes — so the raw
scale, and with it the thresholding at 20 / 16,000 and the log of the raw values, is lost),
and for breast met. the imputation of its 1.9 % missing values and all 24,481 genes.

Run: python examples/reproduce_qalpha_table1.py [--quick]
(--quick: fewer gene counts, PCA5/PCA20 only, one SVM reading, two RAW readings, no
convergence re-run)
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
from _peers import loo_svm_errors, loo_svm_errors_nested, rfe_order, snr_order, standardised

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
#: the Q-α curve at every gene count 1 … EVERY_M (first SVM reading): how far "best over m"
#: moves with the grid of m, which the paper does not give
EVERY_M = 100 if QUICK else 1000


def _variance_top(X: np.ndarray, n: int) -> np.ndarray:
    return X[:, np.argsort(-X.var(axis=0), kind="stable")[:n]]


def _breast_nan(X: np.ndarray, info: dict, how: str) -> np.ndarray:
    """breast_vantveer's first 7000 genes with its NaNs (stored as 0) set to the gene's mean
    over the other samples (``mean``) or those genes dropped (``drop``)."""
    mask = np.unpackbits(info["extras"]["nan_mask_packed"])[: X.size].reshape(X.shape) == 1
    if how == "drop":
        return X[:, :7000][:, ~mask[:, :7000].any(axis=0)]
    kept = np.where(mask, np.nan, X)
    with warnings.catch_warnings():  # a gene missing everywhere: mean 0, as stored
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.where(mask, np.nan_to_num(np.nanmean(kept, axis=0)), X)[:, :7000]


#: RAW under the readings of the data and SVM we could rebuild: (label, data from the full
#: matrix and info, standardise genes, C); the first two also run with --quick
RAW_READINGS = {
    "brain": [
        ("genes not standardised, C = 1", lambda X, i: X, False, 1.0),
        (
            "log(value − sample minimum + 1), standardised",
            lambda X, i: np.log1p(X - X.min(1, keepdims=True)),
            True,
            1.0,
        ),
        (
            "top 5000 genes by variance, standardised",
            lambda X, i: _variance_top(X, 5000),
            True,
            1.0,
        ),
        (
            "top 1000 genes by variance, standardised",
            lambda X, i: _variance_top(X, 1000),
            True,
            1.0,
        ),
        ("genes not standardised, C = 0.001", lambda X, i: X, False, 1e-3),
    ],
    "breast met.": [
        ("genes not standardised, C = 1", lambda X, i: X[:, :7000], False, 1.0),
        ("NaN → gene mean, standardised", lambda X, i: _breast_nan(X, i, "mean"), True, 1.0),
        (
            "genes with a NaN dropped, standardised",
            lambda X, i: _breast_nan(X, i, "drop"),
            True,
            1.0,
        ),
        ("all 24,481 genes (NaN → 0), standardised", lambda X, i: X, True, 1.0),
        ("genes not standardised, C = 0.001", lambda X, i: X[:, :7000], False, 1e-3),
    ],
}


def raw_reading_rows(label: str, X_all: np.ndarray, y: np.ndarray, info: dict, paper: int) -> list:
    """One row per RAW reading (RAW_READINGS) of the data set ``label``."""
    rows = []
    for name, data, std, C in RAW_READINGS[label][: 2 if QUICK else None]:
        e = loo_errors(data(X_all, info), y, standardize=std, C=C)
        rows.append([label, f"RAW reading: {name}", f"{e}/{y.size}", f"{paper}/{y.size}"])
    return rows


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
        X_all = np.nan_to_num(np.asarray(X, dtype=np.float64))
        X = X_all[:, :first] if first else X_all
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
        fine = loo_svm_errors_nested(X, y, order, list(range(1, EVERY_M + 1)))
        near = np.flatnonzero(fine <= paper["Q-α"] + 2) + 1
        rows.append(
            [
                label,
                f"Q-α curve at every m ≤ {EVERY_M} (SVM standardised, C = 1)",
                f"min {fine.min()} at m = {int(np.argmin(fine)) + 1}; median {np.median(fine):g}; "
                f"m with ≤ {paper['Q-α'] + 2} errors: "
                + (", ".join(map(str, near[:12])) + (" …" if near.size > 12 else "") or "none"),
                f"{paper['Q-α']}/{n} (m not given)",
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
        rows += raw_reading_rows(label, X_all, y, info, paper["RAW"])
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
            f"Q-α at every m ≤ {EVERY_M}: the best over a fine grid of m is a selection over "
            f"{EVERY_M} LOO figures (optimistic); it shows whether the paper's number is reachable "
            "by its unstated choice of m, not a better estimate.",
            "RAW readings: the rebuildable readings of preprocessing and SVM (module docstring); "
            "none lands near the paper's 32/60 (brain, 11 errors above the majority-class 21) "
            "or 34/78 (breast met., exactly the majority-class error, i.e. an all-gene SVM that "
            "always predicts 'no metastasis').  Breast met.'s PCA-N row, with the same SVM, "
            "agrees with the paper's within one error for N = 10 … 50, so its data and SVM are "
            "the paper's; brain's does not (our file is the row-standardised version).",
            f"total time {time.perf_counter() - t0:.0f} s on a shared 2-core machine",
        ],
    )
    write_summary("qalpha_table1", summary)


if __name__ == "__main__":
    main()
