"""Reproduce Masaeli et al. (SDM 2010): Fig. 1 (glass path), Figs. 2–9 (reconstruction error
vs number of features, CPFS vs Jolliffe I/NI, PFA, SPCA, top variance) and Table 4
(5-fold CV classification error at the paper's q).

    python examples/reproduce_cpfs_figures.py [--quick] [dataset ...]

Table 4 is 5-fold CV repeated with 10 seeds (mean ± sd; --quick: one seed).

Writes examples/results/cpfs_fig1_glass.{md,png}, cpfs_reconstruction.md with one PNG per
data set (cpfs_recon_<name>.png) and cpfs_table4.md.
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from _common import (
    QUICK,
    close_to_best,
    count_rule,
    entry,
    load,
    protocol,
    rank_among,
    rank_text,
    rank_verdict,
    rate_verdict,
    save_figure,
    shared_data_dir,
    write_results_md,
    write_summary,
)

import fsdask
from fsdask.evaluate import evaluate, reconstruction_error

warnings.simplefilter("ignore")  # ConvergenceWarnings are reported in the tables instead

# name, shared file, q values (as in the paper's figure where possible), Table 4 q, note
DATASETS = {
    "bupa": (
        "uci_bupa_liver",
        [1, 2, 3, 4, 5],
        2,
        "PMLB version: 5 features (paper: 6; the 'selector' column is dropped)",
    ),
    "pima": ("uci_pima_diabetes", [2, 3, 4, 5, 6, 7, 8], 2, ""),
    "glass": (
        "uci_glass",
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
        5,
        "mlbench version: 9 features (paper: 10)",
    ),
    "housing": (
        "uci_housing",
        [5, 6, 7, 8, 9, 10, 11],
        5,
        "regression target: no classification row",
    ),
    "housing_scaled": (
        "uci_housing",
        [5, 6, 7, 8, 9, 10, 11],
        5,
        "columns standardised: the size of the paper's Fig. 5 errors (0.05–0.35) suggests it scaled "
        "housing, whose raw columns differ by orders of magnitude",
    ),
    "ionosphere": (
        "uci_ionosphere",
        [10, 14, 18, 20, 24, 28],
        20,
        "V2 is constant: 33 usable features",
    ),
    "face": (
        "orl_faces_32x32",
        [10, 30, 60, 90, 150, 300],
        90,
        "ORL 400 × 1024 (32×32) instead of the paper's UCI KDD 624 × 960 faces",
    ),
    "gene_ALL": (
        "all_chiaretti",
        [5, 10, 20, 30, 60, 90, 120],
        90,
        "Chiaretti ALL, 128 samples; the 472 highest-variance of 12 625 probes (the paper's "
        "Gene ALL had 472 features after preprocessing, 327 samples, 7 classes; ours: B vs T lineage)",
    ),
}

# Table 4 of the paper (5-fold CV classification error), in the order CPFS, Jolliffe NI, Jolliffe I, SPCA, PFA
PAPER_T4 = {
    "bupa": (0.301, 0.380, 0.426, 0.395, 0.315),
    "pima": (0.243, 0.213, 0.274, 0.280, 0.253),
    "glass": (0.179, 0.212, 0.251, 0.214, 0.215),
    "housing": (0.135, 0.140, 0.369, 0.392, 0.281),
    "ionosphere": (0.021, 0.028, 0.047, 0.032, 0.046),
    "gene_ALL": (0.012, 0.014, 0.022, 0.016, 0.016),
    "face": (0.100, 0.137, 0.249, 0.188, 0.138),
}
METHODS = ["CPFS", "JolliffeNI", "JolliffeI", "SPCA", "PFA", "variance"]
CPFS_KW = dict(tol=1e-5, max_iter=3000, n_lambdas=20)
CV_SEEDS = range(1) if QUICK else range(10)  # Table 4: repetitions of the stratified 5-fold CV
SUMMARY: list[dict] = []


def make(method: str, q: int):
    if method == "CPFS":
        return fsdask.CPFS(n_features_to_select=q, **CPFS_KW)
    if method == "SPCA":
        return fsdask.SparsePCASelector(n_features_to_select=q, max_bisect=12)
    if method == "PFA":
        return fsdask.PFA(n_features_to_select=q, n_init=10, random_state=0)
    if method == "variance":
        return fsdask.Filter(statistic="variance", n_features_to_select=q)
    return getattr(fsdask, method)(n_features_to_select=q)


def load_set(key: str):
    fname = DATASETS[key][0]
    X, y, info = load(fname)
    X = np.asarray(X, dtype=np.float64)
    if key.endswith("_scaled"):
        X = (X - X.mean(0)) / X.std(0)
    if key == "gene_ALL":
        keep = np.sort(np.argsort(-X.var(axis=0))[:472])
        X = X[:, keep]
    return X, y, info


def fig1_glass() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, _, info = load_set("glass")
    names = list(info["feature_names"])
    path = fsdask.cpfs_path(X, n_lambdas=40, lambda_min_ratio=1e-5, tol=1e-8, max_iter=20000)
    lam = path["lambda"].values
    diag = path["path_diag"].values
    fig, ax = plt.subplots(figsize=(6, 4))
    for j in range(diag.shape[1]):
        ax.semilogx(
            np.maximum(lam, lam[lam > 0].min() / 2), diag[:, j], label=f"{j + 1}: {names[j]}"
        )
    ax.set_xlabel("λ")
    ax.set_ylabel("diagonal of A")
    ax.set_title("CPFS path, glass (cf. Fig. 1 of Masaeli et al.)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, "cpfs_fig1_glass.png")
    plt.close(fig)
    entry = path["entry_lambda"].values
    order = np.argsort(-entry, kind="stable")
    rows = [[int(j) + 1, names[j], f"{entry[j]:.4g}", int(path["rank"].values[j])] for j in order]
    kept5 = [names[j] for j in np.argsort(path["rank"].values)[:5]]
    write_results_md(
        "cpfs_fig1_glass",
        "CPFS regularisation path on glass (Fig. 1)",
        ["feature #", "name", "largest λ with a nonzero row (entry λ)", "CPFS rank"],
        rows,
        notes=[
            f"λ_max = {path.attrs['lambda_max']:.5g}; {len(lam)} λ values, worst relative duality gap "
            f"{float(path['path_gap'].max()):.1e} (certificate); data centred, not scaled.",
            f"Five features kept first (ours): {', '.join(kept5)}.",
            "Paper (Fig. 1, Table 3): with λ = 200 five of *ten* features are kept (features 3, 4, 6, 7, 8) and "
            "feature 2 is the first to leave. The paper's glass has 10 features (the UCI file's Id column or "
            "the class probably counted), ours (mlbench) has the 9 chemical measurements, so feature numbers "
            "and λ values are not comparable one to one.",
            "Plot: cpfs_fig1_glass.png (diagonal of A against λ).",
        ],
    )


def recon_curves(keys) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, timing = [], {}
    for key in keys:
        X, _, _ = load_set(key)
        qs = [q for q in DATASETS[key][1] if q <= X.shape[1]]
        curves = {m: [] for m in METHODS}
        for m in METHODS:
            t0 = time.perf_counter()
            for q in qs:
                sel = make(m, q).fit(X).get_support(indices=True)
                curves[m].append(reconstruction_error(X, sel))
            timing[(key, m)] = time.perf_counter() - t0
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for m in METHODS:
            ax.plot(qs, curves[m], marker="o", ms=3, label=m)
        ax.set_xlabel("number of features")
        ax.set_ylabel("reconstruction error")
        ax.set_title(f"{key} (cf. Figs. 2–9)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, f"cpfs_recon_{key}.png")
        plt.close(fig)
        close = 0
        for i, q in enumerate(qs):
            vals = [curves[m][i] for m in METHODS]
            best = ", ".join(m for m, v in zip(METHODS, vals) if v <= min(vals) + 1e-4)
            rows.append([key, q, *[f"{v:.4f}" for v in vals], best])
            close += close_to_best(curves["CPFS"][i], vals)
        pfa_gap = (
            max((c - p) / p for c, p in zip(curves["CPFS"], curves["PFA"]) if p > 0) if qs else 0.0
        )
        SUMMARY.append(
            entry(
                f"CPFS Figs. 2–9 (reconstruction error), {key}",
                "CPFS consistently best or close to best",
                f"CPFS within 10 % of the best at {close} of {len(qs)} q; worst excess over PFA "
                f"{100 * pfa_gap:.0f} %",
                "match" if close == len(qs) else "worse",
                "'close' read as within 10 % of the best error (close_to_best); "
                + (DATASETS[key][3] or "same data"),
            )
        )
        print(key, "done", {m: round(timing[(key, m)], 1) for m in METHODS})
    return {"rows": rows, "timing": timing}


def table4(keys) -> list:
    rows = []
    for key in keys:
        X, y, info = load_set(key)
        if info.get("task") != "classification":
            continue
        q = min(DATASETS[key][2], X.shape[1])
        errs, sds = [], []
        for m in METHODS:
            sel = make(m, q).fit(X).get_support(indices=True)  # unsupervised: once on all samples
            reps = [
                float(
                    evaluate(
                        X[:, sel],
                        y,
                        "variance",
                        protocol="kfold",
                        n_splits=5,
                        classifier="svm",
                        n_features=[q],
                        selection="once",
                        random_state=seed,
                    ).best_error
                )
                for seed in CV_SEEDS
            ]
            errs.append(float(np.mean(reps)))
            sds.append(float(np.std(reps)))
        paper = PAPER_T4.get(key)
        rows.append(
            [
                key,
                X.shape[1],
                q,
                *[f"{e:.3f} ± {sd:.3f}" for e, sd in zip(errs, sds)],
                " / ".join(f"{v:.3f}" for v in paper) if paper else "–",
            ]
        )
        if paper:
            same = key in ("pima", "ionosphere")
            SUMMARY.append(
                entry(
                    f"CPFS Table 4 (5-fold CV error), {key}: CPFS",
                    f"{paper[0]:.3f}",
                    f"{errs[0]:.3f} ± {sds[0]:.3f}",
                    rate_verdict(errs[0], paper[0], X.shape[0]) if same else "not comparable",
                    (
                        f"{count_rule(paper[0] * X.shape[0], X.shape[0])}; the paper's "
                        "classifier is not named"
                        if same
                        else DATASETS[key][3]
                    ),
                )
            )
            ranks, paper_ranks = rank_among(errs[:5], 0, X.shape[0]), rank_among(paper, 0)
            SUMMARY.append(
                entry(
                    f"CPFS Table 4, {key}: CPFS against Jolliffe NI / I, SPCA, PFA",
                    rank_text(paper_ranks, 5),
                    f"{rank_text(ranks, 5)} (errors {' / '.join(f'{e:.3f}' for e in errs[:5])})",
                    rank_verdict(ranks, paper_ranks),
                    f"rank by mean CV error; tied = within the binomial SE at n = {X.shape[0]}"
                    + ("" if same else f"; {DATASETS[key][3]}"),
                )
            )
    return rows


if __name__ == "__main__":
    shared_data_dir()
    args = [a for a in sys.argv[1:] if a != "--quick"]
    keys = args or list(DATASETS)
    suffix = "" if not args else "_" + "_".join(keys) if len(keys) <= 2 else "_small"
    t0 = time.perf_counter()
    if "glass" in keys:
        fig1_glass()
    out = recon_curves(keys)
    write_results_md(
        "cpfs_reconstruction" + suffix,
        "Reconstruction error vs number of features (Figs. 2–9)",
        ["data", "q", *METHODS, "best (within 1e-4)"],
        out["rows"],
        notes=[
            "E = ‖X − X_S X_S⁺ X‖²/‖X‖² on centred columns (fsdask.evaluate.reconstruction_error).",
            "CPFS: n_features_to_select=q → the λ that keeps q rows (warm-started path + bisection), "
            f"{CPFS_KW}. SPCA: scikit-learn SparsePCA, one component, α bisected to q nonzero loadings. "
            "PFA: q clusters on the first q loadings, 10 seeded k-means++ restarts.",
            "Paper (Figs. 2–9, curves only, no numbers printed): CPFS consistently best or close to best; "
            "Jolliffe I consistently worst; PFA close to Jolliffe NI.",
            "Plots: cpfs_recon_<data>.png. Seconds per method (all q): "
            + "; ".join(f"{k[0]}/{k[1]} {v:.1f}" for k, v in out["timing"].items()),
        ],
    )
    t4 = table4(keys)
    write_results_md(
        "cpfs_table4" + suffix,
        "5-fold CV classification error with the selected features (Table 4)",
        [
            "data",
            "p",
            "q",
            *[f"{m}" for m in METHODS],
            "paper: CPFS / Jolliffe NI / Jolliffe I / SPCA / PFA",
        ],
        t4,
        notes=[
            f"protocol {protocol()}: stratified 5-fold CV repeated with seeds {list(CV_SEEDS)}, mean ± sd "
            "over the repetitions (the paper does not say how often it repeated its CV).",
            "Linear SVM (C=1) on the q selected, standardised features; "
            "selection on all samples (`selection='once'`: every method here is unsupervised, labels are never "
            "seen by the selector). The paper does not name its classifier.",
            "glass: the UCI glass.data file is sorted by class and its first column is a running Id, so an "
            "Id column among the paper's 10 glass features would predict the class — consistent with the paper's "
            "low glass errors; ours has the 9 chemical measurements only.",
            "housing is a regression set here (the paper's classification error on it is not reproducible "
            "without its discretisation); hrct is not available.",
            f"Data differences: see cpfs_reconstruction{suffix}.md (glass 9 vs 10 features, bupa 5 vs 6, face and "
            "gene ALL are different versions).",
        ],
    )
    write_summary(
        "cpfs_figures" + suffix,
        SUMMARY,
        results=[f"cpfs_table4{suffix}", f"cpfs_reconstruction{suffix}"],
    )
    print(f"total {time.perf_counter() - t0:.0f} s")
