"""Wolf & Shashua (JMLR 2005) §4 and §6 synthetic findings with fsdask.QAlpha.

* Fig. 2(a): probability that the leading eigenvector of a symmetric matrix with i.i.d.
  N(1/6, (√2/6)²) entries is positive, vs n.
* Fig. 3(a) / §6 "linear": Weston's problem (6 relevant of 202), supervised and
  unsupervised Q-α; relevant features among the top 6, SVM test error on 500 test samples
  with the top 2 / top 6 features, for each training-set size (full: 30 runs per size, as
  the paper; quick: 3 runs at 100 training samples).
* Fig. 3(b): sparsity gap (mean α of the 5 relevant / mean α of the 120 irrelevant) vs
  number of clusters n_c, for k = n_c, n_c + 2, max(1, n_c − 2) (full: 20 runs, quick: 3); PNG.
* Fig. 6(b): the §6 session experiment (12 relevant of 60, hidden ±1 every 8 samples):
  success (≥ 10 relevant among the top 12) of kernel Q-α, of Q-α on the element-wise
  squared data, and of linear Q-α, over a λ sweep (full: 80 runs per λ, quick: 3 at one λ).
* Ben-Dor model: robustness in m, e, s (fraction of relevant features among the top R).

* Weston diagnosis: the unsupervised criterion's optimum on the exact (population)
  correlation of features 1–6, and the top 6 under k = 1 … 6 and n_init = 10.
* Ben-Dor readings: d and s with N(μ, μs) read as a variance and as a standard deviation.

Run: python examples/reproduce_qalpha_synthetic.py [--quick]
[--parts fig2a,weston,weston_diagnosis,fig3b,bendor,bendor_readings,fig6b]
(--parts runs only those parts; the results file then holds only them and says so).
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from _common import (
    QUICK,
    count_rule,
    count_verdict,
    entry,
    protocol,
    rate_verdict,
    save_figure,
    write_results_md,
    write_summary,
)

import fsdask
from fsdask.datasets import ben_dor, qalpha_clusters, qalpha_sessions, weston_linear

warnings.simplefilter("ignore")
#: repetitions per setting: (quick, full = the paper's)
WESTON_RUNS, WESTON_SIZES = (3, (100,)) if QUICK else (30, (10, 20, 30, 50, 75, 100))
FIG3B_RUNS = 3 if QUICK else 20
FIG6B_RUNS, FIG6B_LAMS = (3, (0.05,)) if QUICK else (80, (0.01, 0.02, 0.05, 0.1, 0.2))
SUMMARY: list[dict] = []


def fig2a(rows):
    rng = np.random.default_rng(0)
    p20 = None
    for n in (2, 5, 10, 20, 50, 100):
        pos = 0
        trials = 400
        for _ in range(trials):
            G = rng.normal(1 / 6, np.sqrt(2) / 6, size=(n, n))
            G = np.triu(G) + np.triu(G, 1).T
            w, V = np.linalg.eigh(G)
            v = V[:, -1] * np.sign(V[:, -1].sum())
            pos += bool(np.all(v > 0))
        rows.append(
            [
                "Fig. 2a",
                f"n = {n}",
                f"P(positive leading eigenvector) = {pos / trials:.3f}",
                "≈ 1 (> 0.99) from n = 20",
            ]
        )
        p20 = pos / trials if n == 20 else p20
    SUMMARY.append(
        entry(
            "Q-α Fig. 2a: P(positive leading eigenvector) at n = 20",
            "> 0.99",
            f"{p20:.3f}",
            "match"  # a bound: at or above it matches, below it is graded by the count rule
            if p20 >= 0.99
            else count_verdict(p20 * trials, 0.99 * trials, trials, lower_is_better=False),
            f"{trials} random matrices; {count_rule(0.99 * trials, trials, 'matrices')}",
        )
    )


def _weston_seeds(n_train: int) -> list[int]:
    """WESTON_RUNS seeds (from 100 up) whose first n_train samples hold at least
    k_within + 1 = 3 of each class: fewer and the supervised Q-α (k_within = 2) cannot be
    fitted (a 10-sample draw has that ~11 % of the time).  Such draws are redrawn, not
    counted, so every training size has WESTON_RUNS runs."""
    seeds, seed = [], 100
    while len(seeds) < WESTON_RUNS:
        y = weston_linear(n_samples=n_train + 500, random_state=seed).y[:n_train]
        if len(set(y)) == 2 and np.unique(y, return_counts=True)[1].min() >= 3:
            seeds.append(seed)
        seed += 1
    return seeds


def weston(rows):
    from sklearn.svm import LinearSVC

    for n_train in WESTON_SIZES:
        res = {("sup", 2): [], ("sup", 6): [], ("uns", 2): [], ("uns", 6): []}
        hits = {"sup": [], "uns": []}
        strong = {
            "sup": [],
            "uns": [],
        }  # of features 1–3 (class signal in 70 % of samples) in the top 6
        for seed in _weston_seeds(n_train):
            syn = weston_linear(n_samples=n_train + 500, random_state=seed)
            X, y = syn.X.values.astype(float), syn.y
            Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
            for mode in ("sup", "uns"):
                est = fsdask.QAlpha(
                    k=2,
                    max_iter=30,
                    tol=1e-5,
                    n_init=3 if mode == "sup" else 1,
                    supervised=(mode == "sup"),
                )
                est.fit(Xtr, ytr if mode == "sup" else None)
                order = np.argsort(-est.scores_)
                hits[mode].append(len(set(order[:6]) & set(range(6))))
                strong[mode].append(len(set(order[:6]) & {0, 1, 2}))
                for m in (2, 6):
                    clf = LinearSVC(C=1.0, dual="auto").fit(Xtr[:, order[:m]], ytr)
                    res[mode, m].append(1 - clf.score(Xte[:, order[:m]], yte))
        for mode, name in (("sup", "supervised"), ("uns", "unsupervised")):
            rows.append(
                [
                    f"Weston linear ({n_train} train)",
                    f"{name}: relevant in top 6",
                    f"{np.mean(hits[mode]):.2f} of 6 ({len(hits[mode])} runs)",
                    "Fig. 3a: supervised ≈ wrapper SVM; unsupervised slightly worse",
                ]
            )
            for m in (2, 6):
                rows.append(
                    [
                        f"Weston linear ({n_train} train)",
                        f"{name}: SVM test error, top {m}",
                        f"{np.mean(res[mode, m]):.3f} ± {np.std(res[mode, m]):.3f}",
                        "≈ 0.02–0.05 at 100 training points (read off Fig. 3a)"
                        if n_train == 100
                        else "curve in Fig. 3a (values not printed)",
                    ]
                )
        if n_train == 100:
            sup, uns = np.mean(res["sup", 6]), np.mean(res["uns", 6])
            SUMMARY.append(
                entry(
                    "Q-α Fig. 3a (Weston linear, 100 training points): supervised, top-6 SVM error",
                    "≈ 0.02–0.05 (read off the figure)",
                    f"{sup:.3f} ± {np.std(res['sup', 6]):.3f}",
                    "match"
                    if 0.02 <= sup <= 0.05
                    else rate_verdict(sup, 0.05 if sup > 0.05 else 0.02, 500),
                    f"{len(res['sup', 6])} runs, 500 test samples; outside the range read off "
                    f"the figure: {count_rule(0.05 * 500, 500, 'test errors')}",
                )
            )
            gap = uns - sup
            SUMMARY.append(
                entry(
                    "Q-α Fig. 3a (Weston linear, 100 training points): unsupervised vs supervised",
                    "'only slightly inferior'",
                    f"top-6 error {uns:.3f} vs {sup:.3f} "
                    f"(relevant in top 6: {np.mean(hits['uns']):.2f} vs {np.mean(hits['sup']):.2f}, of "
                    f"which of features 1–3: {np.mean(strong['uns']):.2f} vs {np.mean(strong['sup']):.2f})",
                    "match" if gap <= 0.05 else "worse",
                    "'slightly' read as ≤ 0.05 more test error; see the Weston notes of the results file",
                )
            )


def weston_population_corr(p_first: float = 0.7) -> np.ndarray:
    """The exact correlation of Weston's features 1–6 (infinite samples): within a triple,
    E[x_i x_j] = P(triple carries y)·i'·j' (i', j' the means 1, 2, 3), between triples 0."""
    means, w = np.array([1, 2, 3, 1, 2, 3.0]), np.r_[np.full(3, p_first), np.full(3, 1 - p_first)]
    C = np.zeros((6, 6))
    for i in range(6):
        for j in range(6):
            if i == j:
                C[i, j] = w[i] * (means[i] ** 2 + 1) + (1 - w[i])
            elif (i < 3) == (j < 3):
                C[i, j] = w[i] * means[i] * means[j]
    return C / np.sqrt(np.outer(np.diag(C), np.diag(C)))


def weston_population_alpha(k: int, n_iter: int = 200) -> np.ndarray:
    """Q-α (Def. 2) on the population: M = R^½ (rows with Gram R, centred and unit norm in the
    limit), no noise features — the criterion's own optimum, free of sampling noise."""
    w, V = np.linalg.eigh(weston_population_corr())
    M = (V * np.sqrt(np.clip(w, 0, None))) @ V.T
    Q = np.linalg.eigh(M.T @ M)[1][:, ::-1][:, :k]  # init = top-k eigenvectors, as QAlpha's
    for _ in range(n_iter):
        P = M @ Q
        vals, vecs = np.linalg.eigh((M @ M.T) * (P @ P.T))
        alpha = vecs[:, -1] * np.sign(vecs[:, -1].sum())
        Q = np.linalg.qr(M.T @ (alpha[:, None] * M) @ Q)[0]
    return alpha


def weston_diagnosis(rows):
    """Why unsupervised Q-α finds features 1–3 and not 4–6: the criterion's population optimum
    for k = 1 … 4, and k / n_init readings on the draws of the largest training size."""
    for k in (1, 2, 3, 4):
        a = weston_population_alpha(k)
        rows.append(
            [
                "Weston linear (population)",
                f"unsupervised Q-α optimum, k = {k}: α of features 1–6",
                " ".join(f"{v:.2f}" for v in np.abs(a)),
                "— (features 4–6 carry the class in 30 % of the samples)",
            ]
        )
    n_train = WESTON_SIZES[-1]
    for k, n_init in ((1, 1), (2, 1), (2, 10), (3, 1), (4, 1), (6, 1)):
        found = []
        for seed in _weston_seeds(n_train):
            X = weston_linear(n_samples=n_train + 500, random_state=seed).X.values[:n_train]
            est = fsdask.QAlpha(k=k, max_iter=100, tol=1e-6, n_init=n_init, supervised=False)
            top = set(np.argsort(-est.fit(X.astype(float)).scores_)[:6])
            found.append((len(top & {0, 1, 2}), len(top & {3, 4, 5})))
        f = np.mean(found, axis=0)
        rows.append(
            [
                f"Weston linear ({n_train} train)",
                f"unsupervised, k = {k}, n_init = {n_init}: of features 1–3 / 4–6 in the top 6",
                f"{f[0]:.2f} / {f[1]:.2f} ({len(found)} runs)",
                "'only slightly inferior' to supervised",
            ]
        )


def fig3b(rows):
    ncs = list(range(2, 9))
    gaps = {name: [] for name in ("k=n_c", "k=n_c+2", "k=max(1,n_c-2)")}
    for nc in ncs:
        for name, k in (("k=n_c", nc), ("k=n_c+2", nc + 2), ("k=max(1,n_c-2)", max(1, nc - 2))):
            g = []
            for rep in range(FIG3B_RUNS):
                syn = qalpha_clusters(nc, random_state=1000 * nc + rep)
                est = fsdask.QAlpha(k=k, max_iter=40, tol=1e-5).fit(syn.X.values)
                a = est.scores_
                g.append(a[:5].mean() / a[5:].mean())
            gaps[name].append((np.mean(g), np.percentile(g, 25), np.percentile(g, 75)))
    for i, nc in enumerate(ncs):
        rows.append(
            [
                "Fig. 3b",
                f"n_c = {nc}: sparsity gap mean [25%, 75%]",
                "; ".join(
                    f"{name} {m:.1f} [{lo:.1f}, {hi:.1f}]"
                    for name, vals in gaps.items()
                    for (m, lo, hi) in [vals[i]]
                ),
                "good up to 6 classes; gap ≈ 5–10",
            ]
        )
    good = [nc for nc, (m, lo, hi) in zip(ncs, gaps["k=n_c"]) if lo >= 2]
    upto = max((nc for nc in ncs if all(c in good for c in range(2, nc + 1))), default=1)
    SUMMARY.append(
        entry(
            "Q-α Fig. 3b: sparsity gap, k = n_c",
            "good up to 6 classes",
            f"good (25th percentile of the gap ≥ 2) up to {upto} classes",
            "match" if upto == 6 else ("better" if upto > 6 else "worse"),
            f"{FIG3B_RUNS} runs per n_c; 'good' read as relevant α at least twice the irrelevant "
            "in 3 of 4 runs",
        )
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=90)
    for (name, vals), style in zip(gaps.items(), ("-", "--", ":")):
        m = np.array(vals)
        ax.errorbar(
            np.array(ncs) + {"-": -0.1, "--": 0, ":": 0.1}[style],
            m[:, 0],
            yerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]],
            ls=style,
            marker="o",
            ms=3,
            capsize=2,
            label=name,
        )
    ax.set_xlabel("number of clusters n_c")
    ax.set_ylabel("sparsity gap")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Q-α sparsity gap (cf. Wolf & Shashua Fig. 3b)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, "qalpha_fig3b_sparsity_gap.png")


def _raw_sessions(a, b):
    """§6's Σ_s (m_i^sᵀ m_j^s)² as printed, without centring/normalising φ (for comparison)."""
    out = np.zeros((a.shape[1], b.shape[1]))
    for s in range(0, a.shape[0], 8):
        out += (a[s : s + 8].T @ b[s : s + 8]) ** 2
    return out


def fig6b(rows):
    names = (
        "kernel (§6 block-wise squared poly)",
        "kernel, raw (no §2.1 centring/norm of φ)",
        "squared data + Q-α",
        "linear Q-α",
    )
    rate = {}
    for lam in FIG6B_LAMS:
        ok = dict.fromkeys(names, 0)
        for rep in range(FIG6B_RUNS):
            syn = qalpha_sessions(lam, random_state=rep)
            X = syn.X.values.astype(float)
            fits = dict(
                zip(
                    names,
                    (
                        fsdask.QAlpha(k=3, kernel="sessions", max_iter=10, tol=1e-5).fit(X),
                        fsdask.QAlpha(k=3, kernel=_raw_sessions, max_iter=10, tol=1e-5).fit(X),
                        fsdask.QAlpha(k=3, max_iter=40, tol=1e-6).fit(X**2),
                        fsdask.QAlpha(k=3, max_iter=40, tol=1e-6).fit(X),
                    ),
                )
            )
            for name, est in fits.items():
                ok[name] += len(set(np.argsort(-est.scores_)[:12]) & set(range(12))) >= 10
        for name, c in ok.items():
            rate[lam, name] = c / FIG6B_RUNS
            rows.append(
                [
                    "Fig. 6b (sessions)",
                    f"λ = {lam}: {name}",
                    f"success {c}/{FIG6B_RUNS}",
                    {"linear Q-α": "0 (constantly)"}.get(
                        name,
                        "success rate vs λ plotted: kernel solid, "
                        "squaring dashed (values only in the figure)",
                    ),
                ]
            )
    lin = max(rate[lam, "linear Q-α"] for lam in FIG6B_LAMS)
    SUMMARY.append(
        entry(
            "Q-α Fig. 6b: linear Q-α on the session data",
            "success constantly 0",
            f"highest success rate over λ ∈ {list(FIG6B_LAMS)}: {lin:.2f}",
            "match" if lin == 0 else "worse",
            f"{FIG6B_RUNS} runs per λ",
        )
    )
    kern = ", ".join(
        f"λ={lam}: {rate[lam, names[0]]:.2f} vs {rate[lam, names[2]]:.2f}" for lam in FIG6B_LAMS
    )
    SUMMARY.append(
        entry(
            "Q-α Fig. 6b: kernel Q-α vs squared data, success rate over λ",
            "curves only (no values printed)",
            kern,
            "not comparable",
            "the paper's rates are only drawn; its λ grid is not given",
        )
    )


def bendor(rows):
    def frac(syn, R):
        est = fsdask.QAlpha(k=2, max_iter=40, tol=1e-5, supervised=False).fit(syn.X.values)
        top = np.argsort(-est.scores_)[:R]
        return np.mean(np.isin(top, syn.relevant)), est

    fm = {}
    for m in (5, 50, 600, 5000):
        syn = ben_dor(m=m, random_state=m)
        f, _ = frac(syn, max(1, syn.relevant.size))
        fm[m] = f
        rows.append(
            [
                "Ben-Dor",
                f"m = {m} (e = .72)",
                f"{f:.2f} of top-{syn.relevant.size} relevant",
                "always correct, from m = 5",
            ]
        )
    # m = 5: (1 − e)·m = 1.4 relevant features.  Rounded (ben_dor), that is one feature, and a
    # lone centred unit-norm feature gives Q-α nothing to find: each feature adds a rank-one
    # term of the same norm, relevance shows only as coherence between relevant features.
    # Rounded up (2 relevant, e = 0.6), 20 seeds:
    hits = [
        set(
            np.argsort(
                -fsdask.QAlpha(k=2, max_iter=40, tol=1e-5, supervised=False)
                .fit(ben_dor(m=5, e=0.6, random_state=r).X.values)
                .scores_
            )[:2]
        )
        == {0, 1}
        for r in range(20)
    ]
    rows.append(
        [
            "Ben-Dor",
            "m = 5, (1 − e)m = 1.4 rounded up: 2 relevant (e = .6)",
            f"both relevant on top in {sum(hits)}/20 seeds",
            "always correct, from m = 5",
        ]
    )
    ok_m = [m for m in fm if fm[m] == 1.0]
    SUMMARY.append(
        entry(
            "Q-α §6 Ben-Dor model: number of features m",
            "always correct from m = 5",
            f"all relevant on top for m ∈ {ok_m} of (5, 50, 600, 5000); m = 5 with 2 relevant: "
            f"{sum(hits)}/20 seeds",
            "match"
            if len(ok_m) == len(fm)
            else (
                "not comparable"
                if len(ok_m) == len(fm) - 1 and 5 not in ok_m and sum(hits) >= 19
                else "worse"
            ),
            "m = 5 leaves (1 − e)m = 1.4 relevant features: the paper's rounding is not given",
        )
    )
    fe = {}
    for e in (0.95, 0.99, 0.995):
        syn = ben_dor(m=2000, e=e, random_state=7)
        f, _ = frac(syn, syn.relevant.size)
        fe[e] = f
        rows.append(
            [
                "Ben-Dor",
                f"e = {e} (m = 2000)",
                f"{f:.2f} of top-{syn.relevant.size} relevant",
                "works up to e = 99.5 %",
            ]
        )
    SUMMARY.append(
        entry(
            "Q-α §6 Ben-Dor model: fraction e of irrelevant features",
            "works up to e = 99.5 %",
            ", ".join(f"e={e}: {f:.2f}" for e, f in fe.items()) + " of the top-R relevant",
            "match" if min(fe.values()) >= 0.9 else "worse",
            "'works' read as ≥ 0.9 of the top R",
        )
    )
    fd = {}
    for d in (1.0, 1000.0):
        syn = ben_dor(d=d, random_state=13)
        f, _ = frac(syn, syn.relevant.size)
        fd[d] = f
        rows.append(
            [
                "Ben-Dor",
                f"d = {d:g}",
                f"{f:.2f} of top-{syn.relevant.size} relevant",
                "performs well for d ∈ [1, 1000]",
            ]
        )
    SUMMARY.append(
        entry(
            "Q-α §6 Ben-Dor model: spread d of the class centres",
            "performs well for d ∈ [1, 1000]",
            ", ".join(f"d={d:g}: {f:.2f}" for d, f in fd.items()) + " of the top-R relevant",
            "match" if min(fd.values()) >= 0.9 else "worse",
            "'well' read as ≥ 0.9 of the top R",
        )
    )
    ratios = {}
    for s in (0.75, 2, 10, 1000):
        syn = ben_dor(s=s, random_state=11)
        f, est = frac(syn, syn.relevant.size)
        a = est.scores_
        # how much more likely a relevant feature is chosen than an irrelevant one (top-R selection)
        top = np.zeros(a.size, bool)
        top[np.argsort(-a)[: syn.relevant.size]] = True
        rel = np.isin(np.arange(a.size), syn.relevant)
        ratio = top[rel].mean() / max(top[~rel].mean(), 1e-12)
        ratios[s] = ratio
        rows.append(
            [
                "Ben-Dor",
                f"s = {s}",
                f"{f:.2f} relevant in top-R; P(sel|rel)/P(sel|irr) = {ratio:.1f}",
                "≥ 30× even for s > 1000",
            ]
        )
    worst = min(ratios.values())
    SUMMARY.append(
        entry(
            "Q-α §6 Ben-Dor model: class spread s",
            "≥ 30× more likely to pick a relevant feature, even for s > 1000",
            f"smallest ratio over s ∈ {list(ratios)}: {worst:.1f}×",
            "worse" if worst < 30 else "match",
            "N(μ, μs) read with μs a variance (ben_dor(spread='variance'))",
        )
    )


#: seeds of the Ben-Dor readings (d and s under both readings of N(μ, μs))
BENDOR_SEEDS = (11, 12) if QUICK else (11, 12, 13, 14, 15)


def _bendor_fit(syn) -> tuple[np.ndarray, dict]:
    """Q-α weights and, for the top R (= number of relevant) and the top 50, the fraction of
    relevant features and P(selected | relevant) / P(selected | irrelevant)."""
    a = fsdask.QAlpha(k=2, max_iter=40, tol=1e-5, supervised=False).fit(syn.X.values).scores_
    rel = np.isin(np.arange(a.size), syn.relevant)
    out = {}
    for size in (syn.relevant.size, 50):
        top = np.zeros(a.size, bool)
        top[np.argsort(-a)[:size]] = True
        p_irr = top[~rel].mean()
        out["R" if size == syn.relevant.size else size] = (
            top[rel].sum() / size,
            top[rel].mean() / p_irr if p_irr > 0 else np.inf,
        )
    return a, out


def bendor_readings(rows):
    """d and s under both readings of N(μ, μs) (variance |μ|s or sd |μ|s), over BENDOR_SEEDS:
    with sd |μ|s every relevant feature is d × one drawn at d = 1 and the irrelevant ones do not
    depend on d, so after §2.1's per-feature normalisation Q-α is exactly invariant to d."""
    for spread in ("variance", "std"):
        base = None
        for name, kw in [(f"d = {d:g}", {"d": d}) for d in (1.0, 10.0, 555.0, 1000.0)] + [
            (f"s = {s:g}", {"s": s}) for s in (0.75, 2.0, 10.0, 1000.0)
        ]:
            fits = [_bendor_fit(ben_dor(spread=spread, random_state=r, **kw)) for r in BENDOR_SEEDS]
            cell = "; ".join(
                f"top-{size}: {np.mean([o[size][0] for _, o in fits]):.2f} relevant, ratio "
                f"{np.median([o[size][1] for _, o in fits]):.1f}×"
                for size in ("R", 50)
            )
            if name.startswith("d"):
                base = base or [a for a, _ in fits]
                diff = max(float(np.abs(a - b).max()) for (a, _), b in zip(fits, base))
                cell += f"; max |α − α(d = 1)| {diff:.1e}"
            rows.append(
                [
                    f"Ben-Dor, N(μ, μs) with μs a {'variance' if spread == 'variance' else 'sd'}",
                    f"{name} ({len(fits)} seeds)",
                    cell,
                    "invariant to d, well for d ∈ [1, 1000]; ≥ 30× for s > 1000",
                ]
            )


PARTS = {
    "fig2a": "Fig. 2a",
    "weston": "Weston",
    "weston_diagnosis": "Weston, why not features 4–6",
    "fig3b": "Fig. 3b",
    "bendor": "Ben-Dor",
    "bendor_readings": "Ben-Dor, both readings of N(μ, μs)",
    "fig6b": "Fig. 6b",
}


def main():
    t0 = time.perf_counter()
    parts = (
        sys.argv[sys.argv.index("--parts") + 1].split(",") if "--parts" in sys.argv else list(PARTS)
    )
    rows: list = []
    for part in (fig2a, weston, weston_diagnosis, fig3b, bendor, bendor_readings, fig6b):
        if part.__name__ not in parts:
            continue
        t = time.perf_counter()
        part(rows)
        print(f"{part.__name__}: {time.perf_counter() - t:.0f} s", flush=True)
    write_results_md(
        "qalpha_synthetic",
        "Q-α (Wolf & Shashua 2005): synthetic experiments",
        ["experiment", "setting", "fsdask", "paper"],
        rows,
        notes=[
            f"parts run: {', '.join(parts)}"
            + ("" if parts == list(PARTS) else " (the others were not run)")
            + ".",
            f"protocol {protocol()}: Weston {WESTON_RUNS} runs per training size {list(WESTON_SIZES)} "
            "(paper: 30 per size; a training draw with fewer than 3 samples of a class, which the "
            "supervised Q-α with k_within = 2 cannot fit, is redrawn); "
            f"Fig. 3b {FIG3B_RUNS} runs (paper: 20); Fig. 6b {FIG6B_RUNS} runs "
            f"per λ ∈ {list(FIG6B_LAMS)} (paper: 80, λ grid only drawn).",
            "Ben-Dor: N(μ, μs) read with μs (|μ|s) a variance (ben_dor(spread='variance')); "
            "read as a standard deviation, s ≥ 10 leaves ≈ 0.3 of the top-R relevant.",
            "Ben-Dor m = 5: (1 − e)·m = 1.4 relevant features; ben_dor rounds to 1, and one relevant "
            "feature alone is invisible to Q-α (on centred, unit-norm features each feature adds a "
            "rank-one term of the same norm; relevance shows only as coherence between relevant "
            "features); the row 'm = 5, … rounded up' uses 2.",
            "Fig. 6b kernel: §6's kernel on the centred, unit-norm feature map (fsdask's 'sessions'); "
            "'raw' is the printed kernel without that preprocessing.",
            "Weston: n training samples, 500 test samples, linear SVM (C = 1) on the top-m features; "
            "supervised = Def. 6 with within-class normalisation, γ = 0.5, n_init = 3; "
            "unsupervised = k = 2, one start. Training sizes as on the x-axis of Weston et al.'s "
            "figure (the text does not list them).",
            "Weston diagnosis: features 1–3 and 4–6 are two uncorrelated triples (the class shows "
            "in one of them per sample), within-triple correlations 0.55–0.80 for 1–3 (70 % of the "
            "samples) and 0.36–0.63 for 4–6 (30 %).  Q-α's criterion Σ_{j≤k} λ_j² is largest with "
            "all weight on the more coherent triple: on the exact correlation (no noise features, "
            "infinite samples) its optimum gives features 4–6 weight 0 for k = 1 … 4 (rows "
            "'population'), so no k, restart or sample size makes the unsupervised Q-α pick them; "
            "with features 1–3 alone the 30 % of samples whose signal is in 4–6 are at chance "
            "(≈ 0.15 test error at best).  §2.1's unit norm makes the noise's variance-vs-sd "
            "reading irrelevant (per-feature scale is removed); without it (centred only, or raw) "
            "the N(0, 20) noise outweighs every relevant feature and none is found.  fsdask and "
            "tests/qalpha_dense.py pick the same top 6 on every draw checked (k = 1, 2, 3, 4, 6).",
            "Ben-Dor readings: with μs a standard deviation the class means differ by ≈ 1/s sds "
            "whatever d is, and Q-α is exactly invariant to d (α equal to float precision), as "
            "the paper says, but finds nothing from s = 10 on (ratio ≈ 1); with μs a variance "
            "the separation grows like √(d/s): d = 1 is harder than d = 555 (not invariant), and "
            "s = 1000 still selects relevant features.  The ratio 'at least 30× more likely to "
            "choose a relevant feature' depends on how many are chosen: all of the top 50 are "
            "relevant at s = 1000 (ratio ∞), the top R = 168 hold ≈ 0.73 (ratio ≈ 7).",
            f"total time {time.perf_counter() - t0:.0f} s",
        ],
    )
    write_summary("qalpha_synthetic", SUMMARY)


if __name__ == "__main__":
    main()
