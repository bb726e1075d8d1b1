"""fsdask and its peers side by side: the same data, each method in its own capped subprocess.

Data (one run): Fermat's spiral (2 relevant), Weston linear (6 relevant), Zarkoob regression
(3 relevant) — their columns shuffled with a fixed seed, so that no method profits from the
relevant features sitting at indices 0…5 — and two real microarray sets from the shared data
directory (``--microarray``, default leukemia_golub and colon_alon; no ground truth).

Methods, each at its defaults as a user would run it:

* fsdask: ``Filter("ttest")`` (classification) / ``Filter("pearson")`` (regression),
  ``Logo()``, ``SparseHSIC()``, ``QAlpha(variant="supervised")`` (classification),
  each fitted on a Zarr store written by ``fsdask.write_dataset`` (so its time includes
  reading the store);
* peers (the ``[peers]`` extra): scikit-learn ``f_classif`` / ``f_regression``,
  ``mutual_info_classif`` / ``mutual_info_regression``, SVM-RFE as Guyon et al. (2002)
  ran it (a linear SVM, the features with the smallest w² removed, halving down to one;
  ``examples/_peers.py``, shared with the reproductions; classification), skrebate
  ``ReliefF`` and ``MultiSURF``,
  ``pyHSICLasso`` (``HSICLasso.classification`` / ``.regression``, 50 features), each on
  the in-memory array.

Every (data, method) runs in a subprocess of this script (``--child``) with a wall-time cap
(``--time-cap``) and a resident-memory cap (``--mem-cap-gb``, watched with psutil every
0.1 s; the child is killed above it).  A row shows the fit's seconds — the first fit in a fresh process (imports excluded, JIT
compilation included, as a user's first call) and, for fits under 30 s, a second, warm
fit — the child's peak RSS,
the rank of every relevant feature (1 = best; a peer's ties share the *worst* rank of the
tie, so a relevant feature at score 0 among other zeros ranks last; fsdask rows use the
method's own ``ranking_``, the ``rank`` of its result) and, for fsdask rows, the time
ratio (warm fits where both have one) to its counterpart peer (Filter : f_classif/f_regression, SparseHSIC : pyHSICLasso,
Logo : ReliefF, Q-α : SVM-RFE).  A peer that is not installed or fails to import on the
current numpy / scikit-learn says so in its row.

Microarray sets: the error of a linear SVM (``LinearSVC``) on the top k ∈ ``--k`` features
under stratified ``--folds``-fold CV, the selection re-run on each training fold (no
selection bias), as in the Logo / Q-α / Zarkoob papers' competitor tables; and for each
fsdask method against each peer a paired t-test over the folds (p < 0.05) counted as
win / tie / loss, the Logo paper's Table 2/4 style.

Output: printed and written to ``--results`` (default examples/results/peers.md) with the
header of ``benchmarks/_harness.py``.  Timings are single runs (a fit can take minutes).

Run:  python benchmarks/peers.py [--quick] [--datasets spiral weston ...] [--methods ...]
      (pip install 'fsdask[peers]')
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import QUIET_FOREIGN, RESULTS, Bench, ForeignMeter, Timing, peak_rss  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
from _peers import rfe_order  # noqa: E402  (the reproductions' SVM-RFE; imports numpy only)

SYNTHETIC = ("spiral", "weston", "zarkoob")
MICROARRAY = ("leukemia_golub", "colon_alon")
FSDASK = ("fsdask.Filter", "fsdask.Logo", "fsdask.SparseHSIC", "fsdask.QAlpha")
PEERS = ("f_test", "mutual_info", "svm_rfe", "relieff", "multisurf", "hsiclasso")
#: the peer each fsdask method's time is compared with
COUNTERPART = {
    "fsdask.Filter": "f_test",
    "fsdask.SparseHSIC": "hsiclasso",
    "fsdask.Logo": "relieff",
    "fsdask.QAlpha": "svm_rfe",
}
#: fits quicker than this (seconds) are run a second time and timed warm
WARM_RERUN_BELOW = 30.0
CLASSIFICATION_ONLY = {"fsdask.Logo", "fsdask.QAlpha", "svm_rfe"}


# ---------------------------------------------------------------- data
def make_data(
    name: str, quick: bool, sizes: dict
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """X (float32, columns shuffled for the synthetic sets), y, relevant indices, task."""
    if name in SYNTHETIC:
        from fsdask import datasets

        if name == "spiral":
            syn = datasets.fermat_spiral(n_irrelevant=sizes["spiral"] - 2)
        elif name == "weston":
            syn = datasets.weston_linear(n_samples=100, n_features=sizes["weston"])
        else:
            syn = datasets.zarkoob_regression(n_samples=50, n_features=sizes["zarkoob"])
        X = np.asarray(syn.X.values, dtype=np.float32)
        perm = np.random.default_rng(17).permutation(X.shape[1])
        X = X[:, perm]
        relevant = np.array([int(np.flatnonzero(perm == r)[0]) for r in syn.relevant])
        task = "regression" if name == "zarkoob" else "classification"
        return X, np.asarray(syn.y), relevant, task
    from fsdask.datasets.shared import load_npz

    X, y, _ = load_npz(name)
    if quick:
        X = X[:, : sizes["microarray_quick"]]
    return (
        np.ascontiguousarray(X, dtype=np.float32),
        np.asarray(y),
        np.array([], int),
        "classification",
    )


def write_store(X: np.ndarray, y: np.ndarray, path: str) -> None:
    import xarray as xr

    import fsdask

    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y)},
        coords={"sample": np.arange(X.shape[0]), "feature": np.arange(X.shape[1])},
    )
    fsdask.write_dataset(ds, path)


# ---------------------------------------------------------------- methods (run in the child)
def fsdask_scores(method: str, X, y: np.ndarray, task: str) -> np.ndarray:
    import fsdask

    if method == "fsdask.Filter":
        sel = fsdask.Filter("pearson" if task == "regression" else "ttest")
    elif method == "fsdask.Logo":
        sel = fsdask.Logo()
    elif method == "fsdask.SparseHSIC":
        sel = fsdask.SparseHSIC()
    else:
        sel = fsdask.QAlpha(variant="supervised")
    sel.fit(X, y)
    # fsdask's own order (result "rank"), which is what a user reads: SparseHSIC and Logo
    # rank the features they leave at weight 0 by a second key (‖A_i‖, the margin), where
    # ranking by the weights alone would put them all last
    return -np.asarray(sel.ranking_, float)


def peer_scores(method: str, X: np.ndarray, y: np.ndarray, task: str) -> np.ndarray:
    reg = task == "regression"
    if method == "f_test":
        from sklearn.feature_selection import f_classif, f_regression

        return np.nan_to_num((f_regression if reg else f_classif)(X, y)[0])
    if method == "mutual_info":
        from sklearn.feature_selection import mutual_info_classif, mutual_info_regression

        return (mutual_info_regression if reg else mutual_info_classif)(X, y, random_state=0)
    if method == "svm_rfe":
        # Guyon's halving order (no ties): scikit-learn's RFE with a fractional step removes a
        # fixed count per step and ties every feature of its last step
        scores = np.empty(X.shape[1])
        scores[rfe_order(X, y)] = -np.arange(X.shape[1], dtype=float)  # kept longest = highest
        return scores
    if method in ("relieff", "multisurf"):
        from skrebate import MultiSURF, ReliefF

        est = ReliefF() if method == "relieff" else MultiSURF()
        return np.asarray(est.fit(X.astype(np.float64), y).feature_importances_, float)
    if method == "hsiclasso":
        from pyHSICLasso import HSICLasso

        h = HSICLasso()
        h.input(X.astype(np.float64), y.astype(np.float64) if reg else y.astype(np.int64) + 1)
        k = min(50, X.shape[1])
        (h.regression if reg else h.classification)(k, n_jobs=1)
        scores = np.zeros(X.shape[1])
        idx = np.asarray(h.get_index(), int)
        scores[idx] = np.arange(
            len(idx), 0, -1
        )  # its selection order; unselected features tie at 0
        return scores
    raise ValueError(method)


def scores_for(method: str, X, y, task: str, store: str | None):
    if method.startswith("fsdask."):
        import fsdask

        return fsdask_scores(method, fsdask.open_dataset(store)["X"] if store else X, y, task)
    return peer_scores(method, np.asarray(X), y, task)


def fold_errors(method: str, X: np.ndarray, y: np.ndarray, ks: list[int], folds: int) -> dict:
    """Linear-SVM error on the top k, stratified k-fold, selection re-run on each training fold."""
    from sklearn.model_selection import StratifiedKFold
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    errs = {k: [] for k in ks}
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=0).split(X, y):
        s = scores_for(method, X[tr], y[tr], "classification", None)
        order = np.argsort(-s, kind="stable")
        for k in ks:
            top = order[:k]
            sc = StandardScaler().fit(X[tr][:, top])
            clf = LinearSVC().fit(sc.transform(X[tr][:, top]), y[tr])
            errs[k].append(float(np.mean(clf.predict(sc.transform(X[te][:, top])) != y[te])))
    return {str(k): v for k, v in errs.items()}


def child(args) -> None:
    """Fit one method on one data set; print one JSON line."""

    d = np.load(args.child_data)
    X, y, task = d["X"], d["y"], str(d["task"])
    out: dict = {}
    try:
        importlib.import_module(
            "fsdask" if args.method.startswith("fsdask.") else IMPORTS[args.method]
        )
    except Exception as e:  # noqa: BLE001
        out["error"] = (
            f"not usable here: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:240]
        )
    try:
        if "error" in out:
            raise RuntimeError(out["error"])
        t0 = time.perf_counter()
        s = scores_for(args.method, X, y, task, args.child_store)
        out["first"] = time.perf_counter() - t0
        out["seconds"] = out["first"]
        if out["first"] < WARM_RERUN_BELOW:  # again, warm: JIT compilation and caches paid once
            t0 = time.perf_counter()
            scores_for(args.method, X, y, task, args.child_store)
            out["seconds"] = time.perf_counter() - t0
        np.save(args.child_scores, np.asarray(s, float))
        if args.child_folds:
            out["errors"] = fold_errors(
                args.method, X, y, [int(k) for k in args.k], args.child_folds
            )
    except Exception as e:  # noqa: BLE001  (the row says what broke; the run goes on)
        out["error"] = (
            out.get("error")
            or f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:240]
        )
        traceback.print_exc(file=sys.stderr)
    if "error" in out:
        out["error"] = out["error"].replace("|", "/")
    out["peak_rss_mb"] = peak_rss() / 2**20
    print("RESULT " + json.dumps(out), flush=True)


# ---------------------------------------------------------------- parent
def run_capped(cmd: list[str], time_cap: float, mem_cap_gb: float) -> dict:
    """Run the child; kill it past the time cap or when its RSS (with children) exceeds the cap."""
    import psutil

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ps, t0, killed = psutil.Process(proc.pid), time.perf_counter(), None
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss + sum(
                c.memory_info().rss for c in ps.children(recursive=True)
            )
        except psutil.Error:
            rss = 0
        if rss > mem_cap_gb * 2**30:
            killed = f"killed: RSS > {mem_cap_gb:g} GB"
        elif time.perf_counter() - t0 > time_cap:
            killed = f"killed: > {time_cap:g} s"
        if killed:
            for c in ps.children(recursive=True):
                c.kill()
            proc.kill()
            break
        time.sleep(0.1)
    stdout, stderr = proc.communicate()
    if killed:
        return {"error": killed}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {
        "error": f"exit {proc.returncode}: "
        + (stderr.strip().splitlines() or ["no output"])[-1][:240]
    }


def ranks_of(scores: np.ndarray, idx: np.ndarray) -> list[int]:
    """Rank 1 = best; ties share the worst rank of the tie."""
    return [int(np.sum(scores >= scores[i])) for i in idx]


def applies(method: str, task: str) -> bool:
    return not (task == "regression" and method in CLASSIFICATION_ONLY)


#: what each method imports; imported before the clock starts (an import that fails on the
#: current numpy / scikit-learn is reported in the method's row)
IMPORTS = {
    "f_test": "sklearn.feature_selection",
    "mutual_info": "sklearn.feature_selection",
    "svm_rfe": "sklearn.svm",
    "relieff": "skrebate",
    "multisurf": "skrebate",
    "hsiclasso": "pyHSICLasso",
}


def paired(a: list[float], b: list[float]) -> str:
    """win / tie / loss of a against b: paired t-test over the folds, p < 0.05."""
    from scipy.stats import ttest_rel

    a_, b_ = np.asarray(a), np.asarray(b)
    if np.allclose(a_, b_):
        return "tie"
    p = ttest_rel(a_, b_).pvalue
    if not np.isfinite(p) or p >= 0.05:
        return "tie"
    return "win" if a_.mean() < b_.mean() else "loss"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument(
        "--datasets",
        nargs="+",
        default=None,
        help=f"of {SYNTHETIC + MICROARRAY} (or any shared .npz name)",
    )
    ap.add_argument(
        "--methods", nargs="+", default=list(FSDASK + PEERS), help="fsdask.* and peer names"
    )
    ap.add_argument(
        "--time-cap",
        type=float,
        default=None,
        help="seconds per (data, method); default 900 (120 with --quick)",
    )
    ap.add_argument("--mem-cap-gb", type=float, default=4.0, help="resident memory cap per child")
    ap.add_argument(
        "--k", nargs="+", type=int, default=[10, 50], help="top-k for the microarray CV error"
    )
    ap.add_argument(
        "--folds", type=int, default=5, help="CV folds on the microarray sets (0: no CV)"
    )
    ap.add_argument(
        "--data-dir",
        help="directory of the shared .npz sets (default: $FSDASK_SHARED_DATA or ../shared/data)",
    )
    ap.add_argument("--results", default=str(RESULTS / "peers.md"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--method", help=argparse.SUPPRESS)
    ap.add_argument("--child-data", help=argparse.SUPPRESS)
    ap.add_argument("--child-store", help=argparse.SUPPRESS)
    ap.add_argument("--child-scores", help=argparse.SUPPRESS)
    ap.add_argument("--child-folds", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.data_dir:
        os.environ["FSDASK_SHARED_DATA"] = args.data_dir
    if args.child:
        child(args)
        return 0
    if args.time_cap is None:
        args.time_cap = 120.0 if args.quick else 900.0
    sizes = (
        {"spiral": 52, "weston": 202, "zarkoob": 60, "microarray_quick": 300}
        if args.quick
        else {"spiral": 5002, "weston": 20000, "zarkoob": 2000, "microarray_quick": 0}
    )
    datasets = args.datasets or list(SYNTHETIC + MICROARRAY)
    bench = Bench("peers", args.results)
    bench.line(
        f"fsdask vs peers: {', '.join(datasets)}; time cap {args.time_cap:g} s, memory cap "
        f"{args.mem_cap_gb:g} GB per fit; timings are single runs (a first fit and, under 30 s, a warm second one)"
        + (" (--quick sizes)" if args.quick else "")
    )
    with tempfile.TemporaryDirectory(prefix="fsdask-peers-") as tmp:
        for name in datasets:
            run_dataset(bench, args, name, sizes, tmp)
    bench.write()
    return 0


def run_dataset(bench: Bench, args, name: str, sizes: dict, tmp: str) -> None:
    X, y, relevant, task = make_data(name, args.quick, sizes)
    data, store = os.path.join(tmp, f"{name}.npz"), os.path.join(tmp, f"{name}.zarr")
    np.savez(data, X=X, y=y, task=task)
    write_store(X, y, store)
    truth = len(relevant) > 0
    folds = args.folds if (not truth and task == "classification") else 0
    bench.line("")
    bench.line(
        f"## {name}: {X.shape[0]} × {X.shape[1]}, {task}"
        + (f", relevant features at columns {relevant.tolist()}" if truth else ", no ground truth")
    )
    bench.line("")
    head = "| method | seconds: 1st / warm 2nd fit | peak RSS MB | " + (
        "ranks of the relevant features | " if truth else ""
    )
    head += "".join(f"CV error top {k} | " for k in args.k) if folds else ""
    head += "fsdask/peer time |"
    bench.line(head)
    bench.line("|" + "---|" * (head.count("|") - 1))
    rows: dict[str, dict] = {}
    methods = [m for m in args.methods if applies(m, task)]
    # peers first, so the fsdask rows can show their ratio to the counterpart
    for m in sorted(methods, key=lambda m: m.startswith("fsdask.")):
        sc = os.path.join(tmp, f"{name}.{m}.npy")
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            "--method",
            m,
            "--child-data",
            data,
            "--child-scores",
            sc,
            "--child-folds",
            str(folds),
            "--k",
            *map(str, args.k),
        ]
        if m.startswith("fsdask."):
            cmd += ["--child-store", store]
        meter = ForeignMeter()
        rows[m] = run_capped(cmd, args.time_cap, args.mem_cap_gb)
        rows[m]["foreign"] = meter.cores()  # cores used by other processes meanwhile
        bench._saw([Timing(0.0, float("nan"), 0.0, 1, rows[m]["foreign"])])
        if "error" not in rows[m]:
            rows[m]["scores"] = np.load(sc)
        bench.line(row(m, rows, relevant, folds, args.k))
    if folds:
        wtl(bench, rows, args.k, methods)


def row(m: str, rows: dict, relevant: np.ndarray, folds: int, ks: list[int]) -> str:
    r = rows[m]
    ncol = (1 if len(relevant) else 0) + (len(ks) if folds else 0) + 1
    if "error" in r:
        return "| " + " | ".join([m, r["error"], ""] + [""] * ncol) + " |"
    t = Timing(r["seconds"], float("nan"), 0.0, 1, r["foreign"])
    cells = [
        m,
        f"{r['first']:.3f} / " + (str(t) if r["first"] != r["seconds"] else "–"),
        f"{r['peak_rss_mb']:.0f}",
    ]
    if len(relevant):
        cells.append(", ".join(map(str, ranks_of(r["scores"], relevant))))
    if folds:
        cells += [
            f"{np.mean(r['errors'][str(k)]):.3f} ± {np.std(r['errors'][str(k)]):.3f}" for k in ks
        ]
    peer = rows.get(COUNTERPART.get(m, ""), {})
    if m.startswith("fsdask.") and "seconds" in peer:
        cells.append(
            f"{_ratio(r['seconds'] / max(peer['seconds'], 1e-9))} {COUNTERPART[m]}"
            + (" (loaded)" if max(r["foreign"], peer["foreign"]) > QUIET_FOREIGN else "")
        )
    else:
        cells.append("")
    return "| " + " | ".join(cells) + " |"


def _ratio(x: float) -> str:
    """``2.29×``; below 1 three significant digits and the inverse (``0.00432× = 1/231``),
    where two decimals would print 0.00×."""
    return f"{x:.2f}×" if x >= 1 else f"{x:.3g}× = 1/{1 / x:.3g}"


def wtl(bench: Bench, rows: dict, ks: list[int], methods: list[str]) -> None:
    ours = [m for m in methods if m.startswith("fsdask.") and "errors" in rows[m]]
    peers = [m for m in methods if not m.startswith("fsdask.") and "errors" in rows[m]]
    if not ours or not peers:
        return
    bench.line("")
    bench.line(
        "win/tie/loss of each fsdask method against each peer (paired t-test over the folds, p < 0.05): "
        + ", ".join(f"top {k}" for k in ks)
    )
    bench.line("")
    bench.line("| fsdask \\ peer | " + " | ".join(peers) + " |")
    bench.line("|" + "---|" * (len(peers) + 1))
    for m in ours:
        cells = [
            " / ".join(paired(rows[m]["errors"][str(k)], rows[p]["errors"][str(k)]) for k in ks)
            for p in peers
        ]
        bench.line(f"| {m} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
