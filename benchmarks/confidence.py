"""Stated confidence at scale (issue 41): what resampling costs against one fit, and the
error rates of FDR control and stability selection over many seeds.

Figures (``benchmarks/_harness.py``: warm, alternating, best of ``--repeat``; commit,
command and load recorded; a figure taken while other processes were busy is marked
``(loaded)``):

* t-test: ``Filter("ttest", n_features_to_select=50)`` against ``Stability`` of it with
  ``--resamples`` (100) subsamples, on a ``--n`` × ``--p`` float32 store (default
  100 × 10⁶, Weston's linear problem streamed to Zarr).  Every subsample's t comes from
  the same pass over X: per block two membership GEMMs for all subsamples (the second
  half of each complementary pair derived), then the statistics of all subsamples at
  once; target ≤ 3× one fit;
* SparseHSIC(n_features_to_select=10) and its ``Stability`` on the same store (target
  ≤ 3×): every subsample's A = X H Δᵀ/(n − 1) from the same pass over X (the class sums
  of every subsample, class by class), each block keeping per subsample only the rows of
  A that its ρ bisection can reach (:mod:`fsdask.stability.hsictop`), then SparsePM per
  subsample on those rows in threads;
* SNR (a filter without a parametric test): one fit against ``FDR`` of it at its
  default 1 000 permutations of the labels, on the same store: every permutation's scores
  from the same pass (membership GEMMs per block), counted against the observed scores
  where they are made, so the client receives a few rows of p;
* Logo on Fermat's spiral (``--logo-n-per-class`` 230 per class + ``--logo-irrelevant``
  20 000 noise features = 460 × 20 002) on a 2-worker LocalCluster: one fit against
  ``Stability`` with ``--logo-refits`` (20) subsamples as parallel tasks; target ≤ 12×;
* ``--seeds`` (50) seeds of small planted-signal problems: the empirical FDR (mean
  false-discovery proportion ± its standard error) of ``FDR`` at q = 0.1 on Weston's,
  Zarkoob's, the spiral and a correlated-features model, parametric and permutation
  p-values; stability selection's mean number of false selections against its bound and
  how often the planted features are stable.

Everything runs at fsdask's default memory budget unless ``--budget`` is given.

Run:  flock /work/.bench.lock .venv/bin/python benchmarks/confidence.py
      (checking run: benchmarks/confidence.py --small)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Bench, add_args  # noqa: E402

#: the figures ``--parts`` chooses from: resampling cost, a permutation null's cost, Logo's
#: parallel refits, error study
PARTS = ("resamples", "fdr", "logo", "errors")


def _store(folder: str, n: int, p: int) -> str:
    from fsdask.datasets import weston_linear, write_synthetic

    url = os.path.join(folder, f"weston_{n}x{p}.zarr")
    write_synthetic(weston_linear(n_samples=n, n_features=p, random_state=0), url)
    return url


def resample_cost(bench: Bench, url: str, resamples: int, repeat: int) -> None:
    """t-test and SparseHSIC: one fit against their stability selection."""
    import fsdask

    ds = fsdask.open_dataset(url)
    makers = {
        "ttest": lambda: fsdask.Filter("ttest", n_features_to_select=50),
        "SparseHSIC": lambda: fsdask.SparseHSIC(n_features_to_select=10),
    }
    for name, make in makers.items():
        st = fsdask.Stability(make(), n_resamples=resamples)
        fns = {"fit": lambda make=make: make().fit(ds), "stability": lambda st=st: st.fit(ds)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = bench.alternate(fns, repeat=repeat)
        bench.line(
            f"{name} on {ds.sizes['sample']} × {ds.sizes['feature']}: one fit {t['fit']}, "
            f"{resamples} resamples {t['stability']} = {bench.ratio(t['stability'], t['fit'])} "
            f"one fit (target ≤ 3×); passes over X: {st.n_passes_}"
        )


def permutation_cost(bench: Bench, url: str) -> None:
    """SNR (no parametric test): one fit against FDR with its default permutation null."""
    import fsdask
    from fsdask.stability.fdr import fewest_selectable

    ds = fsdask.open_dataset(url)
    fdr = fsdask.FDR(fsdask.Filter("snr"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fsdask.Filter("snr").fit(ds)  # warm: the store's chunks in the page cache, kernels loaded
        t = bench.once(lambda: fsdask.Filter("snr").fit(ds))[0], bench.once(lambda: fdr.fit(ds))[0]
    B = fdr.result_.attrs["n_permutations"]  # the permutations drawn at the default
    bench.line(
        f"FDR(snr) on {ds.sizes['sample']} × {ds.sizes['feature']}: one fit {t[0]} (single "
        f"run), {B} permutations {t[1]} (single run) = "
        f"{bench.ratio(t[1], t[0])} one fit; passes over X: {fdr.n_passes_}; "
        f"{int(fdr.support_.sum())} selected at q = {fdr.q} (BH selects at least "
        f"{fewest_selectable(int(fdr.active_features_.sum()), B, fdr.q)} "
        "features or none: no permutation p-value is below 1/(B + 1))"
    )


def logo_refits(bench: Bench, folder: str, per_class: int, irrelevant: int, refits: int) -> None:
    """Logo on the spiral: one fit against ``refits`` subsamples on 2 workers."""
    from distributed import Client, LocalCluster

    import fsdask
    from fsdask.cluster import quiet_distributed, scheduler
    from fsdask.datasets import fermat_spiral, write_synthetic

    url = os.path.join(folder, "spiral.zarr")
    write_synthetic(fermat_spiral(n_irrelevant=irrelevant, n_per_class=per_class), url)
    ds = fsdask.open_dataset(url)
    quiet_distributed()
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as lc:
        with Client(lc) as client, scheduler(client.scheduler.address):
            fns = {
                "fit": lambda: fsdask.Logo().fit(ds),
                "stability": lambda: fsdask.Stability(fsdask.Logo(), n_resamples=refits).fit(ds),
            }
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = bench.once(fns["fit"])[0], bench.once(fns["stability"])[0]
    bench.line(
        f"Logo on {ds.sizes['sample']} × {ds.sizes['feature']}, 2 workers: one fit {t[0]} "
        f"(single run), {refits} refits {t[1]} (single run) = {bench.ratio(t[1], t[0])} one fit "
        "(target ≤ 12×)"
    )


def _fdp(support, relevant) -> float:
    sel = np.flatnonzero(support)
    return 0.0 if sel.size == 0 else float(np.mean(~np.isin(sel, relevant)))


def _problems():
    from fsdask.datasets import fermat_spiral, weston_linear, zarkoob_regression

    def correlated(seed, n=60, p=120, rho=0.6, block=10):
        rng = np.random.default_rng(seed)
        y = np.repeat([0, 1], n // 2)
        X = np.sqrt(rho) * rng.normal(size=(n, p // block)).repeat(block, axis=1)
        X += np.sqrt(1 - rho) * rng.normal(size=(n, p))
        X[y == 1, :6] += 1.5
        return X, y, np.arange(6)

    def gen(f, **kw):
        def make(seed):
            syn = f(random_state=seed, **kw)
            return syn.X.values, syn.y, syn.relevant

        return make

    return {
        "weston": gen(weston_linear, n_samples=60, n_features=150),
        "zarkoob": gen(zarkoob_regression, n_samples=50, n_features=150),
        "spiral": gen(fermat_spiral, n_irrelevant=100, n_per_class=30),
        "correlated": correlated,
    }


def error_study(bench: Bench, seeds: int) -> None:
    """Empirical FDR and stability's false selections over ``seeds`` seeds."""
    import fsdask

    probs = _problems()
    cases = {
        "weston / ttest BH": ("weston", lambda s: fsdask.FDR(fsdask.Filter("ttest"), q=0.1)),
        "zarkoob / pearson BH": ("zarkoob", lambda s: fsdask.FDR(fsdask.Filter("pearson"), q=0.1)),
        "spiral / F BH": ("spiral", lambda s: fsdask.FDR(fsdask.Filter("f"), q=0.1)),
        "correlated / ttest BY": (
            "correlated",
            lambda s: fsdask.FDR(fsdask.Filter("ttest"), q=0.1, method="by"),
        ),
        "weston / SNR permutations (999)": (
            "weston",
            lambda s: fsdask.FDR(fsdask.Filter("snr"), q=0.1, n_permutations=999, random_state=s),
        ),
    }
    for label, (prob, make) in cases.items():
        fdps = np.array(
            [
                _fdp(make(s).fit(*probs[prob](s)[:2]).support_, probs[prob](s)[2])
                for s in range(seeds)
            ]
        )
        se = fdps.std(ddof=1) / np.sqrt(seeds)
        ok = "ok" if fdps.mean() <= 0.1 + 2 * se else "ABOVE q + 2 SE"
        bench.line(
            f"FDR q=0.1, {label}: empirical {fdps.mean():.3f} ± {se:.3f} over {seeds} seeds ({ok})"
        )
    false, found, bound = [], [], 0.0
    for s in range(seeds):
        X, y, rel = probs["weston"](s)
        st = fsdask.Stability(
            fsdask.Filter("ttest", n_features_to_select=10), n_resamples=50, random_state=s
        )
        sel = np.flatnonzero(st.fit(X, y).support_)
        false.append(np.sum(~np.isin(sel, rel)))
        found.append(np.isin(rel[1:3], sel).mean())
        bound = st.error_bound_
    se = np.std(false, ddof=1) / np.sqrt(seeds)
    bench.line(
        f"stability (ttest top-10, 50 subsamples, τ = 0.6) on weston: false selections "
        f"{np.mean(false):.2f} ± {se:.2f} against the bound {bound:.2f}; planted features 2-3 "
        f"stable in {100 * np.mean(found):.0f} % of the seeds"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--p", type=int, default=1_000_000)
    ap.add_argument("--resamples", type=int, default=100)
    ap.add_argument("--logo-n-per-class", type=int, default=230)
    ap.add_argument("--logo-irrelevant", type=int, default=20_000)
    ap.add_argument("--logo-refits", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument(
        "--budget", default=None, help="fsdask.memory-budget for the run (default: fsdask's)"
    )
    ap.add_argument("--small", action="store_true", help="tiny sizes, to check the script")
    ap.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="which figures to take (default: all)",
    )
    add_args(ap, "confidence")
    args = ap.parse_args(argv)
    if args.small:
        args.p, args.logo_n_per_class, args.logo_irrelevant, args.seeds = 20_000, 40, 500, 5
        args.resamples, args.logo_refits = 20, 4
    import dask

    bench = Bench("confidence", args.results)
    budget = {} if args.budget is None else {"fsdask.memory-budget": args.budget}
    with dask.config.set(budget), tempfile.TemporaryDirectory() as d:
        url = _store(d, args.n, args.p) if {"resamples", "fdr"} & set(args.parts) else None
        if "resamples" in args.parts:
            resample_cost(bench, url, args.resamples, args.repeat)
        if "fdr" in args.parts:
            permutation_cost(bench, url)
        if "logo" in args.parts:
            logo_refits(bench, d, args.logo_n_per_class, args.logo_irrelevant, args.logo_refits)
        if "errors" in args.parts:
            error_study(bench, args.seeds)
    bench.line(
        "note: the t-test's subsamples share one pass over X; each task keeps every "
        "subsample's top 50 of its block as the scores are made, and only those candidates "
        "and the plain fit's scores reach the client"
    )
    bench.line(
        "note: SparseHSIC's subsamples share one pass over X (each subsample's A from its "
        "class sums; each task keeps per subsample only the rows of A its ρ bisection can "
        "reach), then SparsePM / the ρ bisection per subsample on those rows in the "
        "client's threads"
    )
    bench.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
