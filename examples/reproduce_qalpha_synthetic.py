"""Wolf & Shashua (JMLR 2005) §4 and §6 synthetic findings with fsdask.QAlpha.

* Fig. 2(a): probability that the leading eigenvector of a symmetric matrix with i.i.d.
  N(1/6, (√2/6)²) entries is positive, vs n.
* Fig. 2(b) / §6 "linear": Weston's problem (6 relevant of 202), supervised and
  unsupervised Q-α; fraction of positive α, relevant features among the top 6, SVM test
  error on 500 test samples with the top 2 / top 6 features.
* Fig. 3(b): sparsity gap (mean α of the 5 relevant / mean α of the 120 irrelevant) vs
  number of clusters n_c, for k = n_c, n_c + 2, max(1, n_c − 2); PNG.
* Fig. 6(b): the §6 session experiment (12 relevant of 60, hidden ±1 every 8 samples):
  success (≥ 10 relevant among the top 12) of kernel Q-α (block-wise squared polynomial
  kernel), of Q-α on the element-wise squared data, and of linear Q-α.
* Ben-Dor model: robustness in m, e, s (fraction of relevant features among the top R).

Run: python examples/reproduce_qalpha_synthetic.py [--quick] [--parts fig2a,weston,fig3b,bendor,fig6b]
(with --parts, the other rows of the recorded table are kept).
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from _common import results_dir, write_results_md

import fsdask
from fsdask.datasets import ben_dor, qalpha_clusters, qalpha_sessions, weston_linear

warnings.simplefilter("ignore")
QUICK = "--quick" in sys.argv
REPS = 3 if QUICK else 8


def fig2a(rows):
    rng = np.random.default_rng(0)
    for n in (2, 5, 10, 20, 50, 100):
        pos = 0
        trials = 400
        for _ in range(trials):
            G = rng.normal(1 / 6, np.sqrt(2) / 6, size=(n, n))
            G = np.triu(G) + np.triu(G, 1).T
            w, V = np.linalg.eigh(G)
            v = V[:, -1] * np.sign(V[:, -1].sum())
            pos += bool(np.all(v > 0))
        rows.append(["Fig. 2a", f"n = {n}", f"P(positive leading eigenvector) = {pos / trials:.3f}",
                     "≈ 1 (> 0.99) from n = 20"])


def weston(rows):
    from sklearn.svm import LinearSVC
    res = {("sup", 2): [], ("sup", 6): [], ("uns", 2): [], ("uns", 6): []}
    hits = {"sup": [], "uns": []}
    positive = {"sup": [], "uns": []}
    for rep in range(REPS):
        syn = weston_linear(n_samples=100 + 500, random_state=100 + rep)
        X, y = syn.X.values.astype(float), syn.y
        Xtr, ytr, Xte, yte = X[:100], y[:100], X[100:], y[100:]
        for mode in ("sup", "uns"):
            est = fsdask.QAlpha(k=2, max_iter=30, tol=1e-5, n_init=3 if mode == "sup" else 1,
                                supervised=(mode == "sup"))
            est.fit(Xtr, ytr if mode == "sup" else None)
            order = np.argsort(-est.scores_)
            hits[mode].append(len(set(order[:6]) & set(range(6))))
            positive[mode].append((est.scores_ > 0).mean())
            for m in (2, 6):
                clf = LinearSVC(C=1.0, dual="auto").fit(Xtr[:, order[:m]], ytr)
                res[mode, m].append(1 - clf.score(Xte[:, order[:m]], yte))
    for mode, name in (("sup", "supervised"), ("uns", "unsupervised")):
        rows.append(["Weston linear (100 train)", f"{name}: relevant in top 6",
                     f"{np.mean(hits[mode]):.2f} of 6 (α > 0 for {np.mean(positive[mode]):.1%} of features)",
                     "Fig. 3a: supervised ≈ wrapper SVM; unsupervised slightly worse"])
        for m in (2, 6):
            rows.append(["Weston linear (100 train)", f"{name}: SVM test error, top {m}",
                         f"{np.mean(res[mode, m]):.3f} ± {np.std(res[mode, m]):.3f}", "≈ 0.02–0.05 (read off Fig. 3a)"])


def fig3b(rows):
    ncs = list(range(2, 9))
    gaps = {name: [] for name in ("k=n_c", "k=n_c+2", "k=max(1,n_c-2)")}
    for nc in ncs:
        for name, k in (("k=n_c", nc), ("k=n_c+2", nc + 2), ("k=max(1,n_c-2)", max(1, nc - 2))):
            g = []
            for rep in range(REPS):
                syn = qalpha_clusters(nc, random_state=1000 * nc + rep)
                est = fsdask.QAlpha(k=k, max_iter=40, tol=1e-5).fit(syn.X.values)
                a = est.scores_
                g.append(a[:5].mean() / a[5:].mean())
            gaps[name].append((np.median(g), np.percentile(g, 25), np.percentile(g, 75)))
    for i, nc in enumerate(ncs):
        rows.append(["Fig. 3b", f"n_c = {nc}: sparsity gap median [25%, 75%]",
                     "; ".join(f"{name} {m:.1f} [{lo:.1f}, {hi:.1f}]" for name, vals in gaps.items()
                               for (m, lo, hi) in [vals[i]]),
                     "good up to 6 classes; gap ≈ 5–10"])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=90)
    for (name, vals), style in zip(gaps.items(), ("-", "--", ":")):
        m = np.array(vals)
        ax.errorbar(np.array(ncs) + {"-": -0.1, "--": 0, ":": 0.1}[style], m[:, 0],
                    yerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]], ls=style, marker="o", ms=3, capsize=2, label=name)
    ax.set_xlabel("number of clusters n_c")
    ax.set_ylabel("sparsity gap")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("Q-α sparsity gap (cf. Wolf & Shashua Fig. 3b)", fontsize=9)
    fig.tight_layout()
    fig.savefig(results_dir() / "qalpha_fig3b_sparsity_gap.png")


def _raw_sessions(a, b):
    """§6's Σ_s (m_i^sᵀ m_j^s)² as printed, without centring/normalising φ (for comparison)."""
    out = np.zeros((a.shape[1], b.shape[1]))
    for s in range(0, a.shape[0], 8):
        out += (a[s:s + 8].T @ b[s:s + 8]) ** 2
    return out


def fig6b(rows):
    for lam in ((0.05,) if QUICK else (0.02, 0.1)):
        ok = {"kernel (§6 block-wise squared poly)": 0, "kernel, raw (no §2.1 centring/norm of φ)": 0,
              "squared data + Q-α": 0, "linear Q-α": 0}
        runs = 3 if QUICK else 5
        for rep in range(runs):
            syn = qalpha_sessions(lam, random_state=rep)
            X = syn.X.values.astype(float)
            fits = {"kernel (§6 block-wise squared poly)": fsdask.QAlpha(k=3, kernel="sessions", max_iter=10, tol=1e-5).fit(X),
                    "kernel, raw (no §2.1 centring/norm of φ)":
                        fsdask.QAlpha(k=3, kernel=_raw_sessions, max_iter=10, tol=1e-5).fit(X),
                    "squared data + Q-α": fsdask.QAlpha(k=3, max_iter=40, tol=1e-6).fit(X ** 2),
                    "linear Q-α": fsdask.QAlpha(k=3, max_iter=40, tol=1e-6).fit(X)}
            for name, est in fits.items():
                ok[name] += len(set(np.argsort(-est.scores_)[:12]) & set(range(12))) >= 10
        for name, c in ok.items():
            rows.append(["Fig. 6b (sessions)", f"λ = {lam}: {name}", f"success {c}/{runs}",
                         {"linear Q-α": "0 (constantly)"}.get(name, "success rate vs λ plotted: kernel solid, squaring dashed (values only in the figure)")])


def bendor(rows):
    def frac(syn, R):
        est = fsdask.QAlpha(k=2, max_iter=40, tol=1e-5, supervised=False).fit(syn.X.values)
        top = np.argsort(-est.scores_)[:R]
        return np.mean(np.isin(top, syn.relevant)), est
    for m in (5, 50, 600, 5000):
        syn = ben_dor(m=m, random_state=m)
        f, _ = frac(syn, max(1, syn.relevant.size))
        rows.append(["Ben-Dor", f"m = {m} (e = .72)", f"{f:.2f} of top-{syn.relevant.size} relevant",
                     "always correct, from m = 5"])
    # m = 5: (1 − e)·m = 1.4 relevant features.  Rounded (ben_dor), that is one feature, and a
    # lone centred unit-norm feature gives Q-α nothing to find: each feature adds a rank-one
    # term of the same norm, relevance shows only as coherence between relevant features.
    # Rounded up (2 relevant, e = 0.6), 20 seeds:
    hits = [set(np.argsort(-fsdask.QAlpha(k=2, max_iter=40, tol=1e-5, supervised=False).fit(
        ben_dor(m=5, e=0.6, random_state=r).X.values).scores_)[:2]) == {0, 1} for r in range(20)]
    rows.append(["Ben-Dor", "m = 5, (1 − e)m = 1.4 rounded up: 2 relevant (e = .6)",
                 f"both relevant on top in {sum(hits)}/20 seeds", "always correct, from m = 5"])
    for e in (0.95, 0.99, 0.995):
        syn = ben_dor(m=2000, e=e, random_state=7)
        f, _ = frac(syn, syn.relevant.size)
        rows.append(["Ben-Dor", f"e = {e} (m = 2000)", f"{f:.2f} of top-{syn.relevant.size} relevant",
                     "works up to e = 99.5 %"])
    for d in (1.0, 1000.0):
        syn = ben_dor(d=d, random_state=13)
        f, _ = frac(syn, syn.relevant.size)
        rows.append(["Ben-Dor", f"d = {d:g}", f"{f:.2f} of top-{syn.relevant.size} relevant",
                     "performs well for d ∈ [1, 1000]"])
    for s in (0.75, 2, 10, 1000):
        syn = ben_dor(s=s, random_state=11)
        f, est = frac(syn, syn.relevant.size)
        a = est.scores_
        # how much more likely a relevant feature is chosen than an irrelevant one (top-R selection)
        top = np.zeros(a.size, bool)
        top[np.argsort(-a)[:syn.relevant.size]] = True
        rel = np.isin(np.arange(a.size), syn.relevant)
        ratio = top[rel].mean() / max(top[~rel].mean(), 1e-12)
        rows.append(["Ben-Dor", f"s = {s}", f"{f:.2f} relevant in top-R; P(sel|rel)/P(sel|irr) = {ratio:.1f}",
                     "≥ 30× even for s > 1000"])


PARTS = {"fig2a": "Fig. 2a", "weston": "Weston", "fig3b": "Fig. 3b", "bendor": "Ben-Dor", "fig6b": "Fig. 6b"}


def _kept_rows(parts: list[str]) -> list:
    """Rows of the recorded table whose experiment is not re-run now (``--parts``)."""
    path = results_dir() / "qalpha_synthetic.md"
    if not path.exists():
        return []
    rows = [line.strip().strip("|").split(" | ") for line in path.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| experiment")]
    return [[c.strip() for c in r] for r in rows
            if not any(r[0].strip().startswith(PARTS[p]) for p in parts)]


def main():
    t0 = time.perf_counter()
    parts = sys.argv[sys.argv.index("--parts") + 1].split(",") if "--parts" in sys.argv else list(PARTS)
    rows: list = [] if parts == list(PARTS) else _kept_rows(parts)
    for part in (fig2a, weston, fig3b, bendor, fig6b):
        if part.__name__ not in parts:
            continue
        t = time.perf_counter()
        part(rows)
        print(f"{part.__name__}: {time.perf_counter() - t:.0f} s", flush=True)
    order = list(PARTS.values())
    rows.sort(key=lambda r: next(i for i, name in enumerate(order) if r[0].startswith(name)))
    write_results_md("qalpha_synthetic", "Q-α (Wolf & Shashua 2005): synthetic experiments",
                     ["experiment", "setting", "fsdask", "paper"], rows,
                     notes=[f"parts run now: {', '.join(parts)}; other rows kept from the previous run." if
                            parts != list(PARTS) else "all parts run now.",
                            "Ben-Dor: N(μ, μs) read with μs (|μ|s) a variance (ben_dor(spread='variance')); "
                            "read as a standard deviation, s ≥ 10 leaves ≈ 0.3 of the top-R relevant.",
                            "Ben-Dor m = 5: (1 − e)·m = 1.4 relevant features; ben_dor rounds to 1, and one relevant "
                            "feature alone is invisible to Q-α (on centred, unit-norm features each feature adds a "
                            "rank-one term of the same norm; relevance shows only as coherence between relevant "
                            "features), so that row fails; with 1.4 rounded up to 2 the paper's 'always correct "
                            "from m = 5' is reproduced (the row 'm = 5, … rounded up').",
                            "Fig. 6b kernel: §6's kernel on the centred, unit-norm feature map (fsdask's 'sessions'); "
                            "'raw' is the printed kernel without that preprocessing.",f"{REPS} repetitions where the paper used 20–80 (time budget); runs on a shared 2-core machine.",
                            "Weston: 100 training samples, 500 test samples, linear SVM (C = 1) on the top-m features; "
                            "supervised = Def. 6 with within-class normalisation, γ = 0.5, n_init = 3.",
                            "Fig. 3b plot: examples/results/qalpha_fig3b_sparsity_gap.png.",
                            f"total time {time.perf_counter() - t0:.0f} s"])


if __name__ == "__main__":
    main()
