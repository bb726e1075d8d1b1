"""fsdask.evaluate: metrics against hand-computed cases, the CV protocols on a planted
problem, bad input, and the examples scaffolding."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

from fsdask.errors import InputError, ParameterError
from fsdask.evaluate import (
    EvaluationResult,
    evaluate,
    evaluate_classifiers,
    evaluate_result,
    false_discovery_rate,
    jaccard_stability,
    kuncheva_index,
    open_evaluation,
    pev,
    reconstruction_curve,
    reconstruction_error,
    sparsity_gap,
    write_evaluation,
)
from fsdask.evaluate.protocol import knn_predict_prefixes

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- metrics, by hand


def test_false_discovery_rate_by_hand():
    assert false_discovery_rate([0, 1, 2, 3], [0, 1]) == 0.5
    mask = np.array([True, False, True, False, True])
    assert false_discovery_rate(mask, [0]) == pytest.approx(2 / 3)
    assert false_discovery_rate([], [0, 1]) == 0.0
    assert false_discovery_rate([4], [0, 1]) == 1.0


def test_sparsity_gap_by_hand():
    w = np.array([4.0, 2.0, 1.0, 1.0, 0.5, 1.5])
    # relevant mean (4+2)/2 = 3, irrelevant mean (1+1+0.5+1.5)/4 = 1
    assert sparsity_gap(w, [0, 1]) == pytest.approx(3.0)
    assert sparsity_gap(w, np.array([True, True, False, False, False, False])) == pytest.approx(3.0)
    assert sparsity_gap([1.0, 0.0, 0.0], [0]) == float("inf")
    with pytest.raises(InputError, match="both relevant and irrelevant"):
        sparsity_gap(w, [])


def test_kuncheva_and_jaccard_by_hand():
    A, B, C = [0, 1, 2], [0, 1, 3], [5, 6, 7]
    # n = 10, k = 3: KI(A,B) = (2·10 − 9)/(3·7) = 11/21; KI(A,C) = KI(B,C) = (0 − 9)/21
    assert kuncheva_index([A, B], 10) == pytest.approx(11 / 21)
    assert kuncheva_index([A, B, C], 10) == pytest.approx((11 / 21 - 9 / 21 - 9 / 21) / 3)
    assert kuncheva_index([A, A], 10) == pytest.approx(1.0)
    # Jaccard: |A∩B|/|A∪B| = 2/4; with C: 0, 0
    assert jaccard_stability([A, B]) == pytest.approx(0.5)
    assert jaccard_stability([A, B, C]) == pytest.approx(0.5 / 3)
    with pytest.raises(ParameterError, match="one size"):
        kuncheva_index([A, [0, 1]], 10)
    with pytest.raises(InputError, match="at least 2"):
        jaccard_stability([A])


def test_reconstruction_error_by_hand():
    # columns: f0 = (1,1,0,0), f1 = 2·f0, f2 = (1,0,0,0); ‖X‖² = 2 + 8 + 1 = 11
    X = np.array([[1, 2, 1], [1, 2, 0], [0, 0, 0], [0, 0, 0]], dtype=float)
    # S = {f0}: f0, f1 reconstructed exactly; f2 keeps its part orthogonal to f0: 1 − 1/2 = 1/2
    assert reconstruction_error(X, [0], center=False) == pytest.approx(0.5 / 11)
    assert pev(X, [0], center=False) == pytest.approx(1 - 0.5 / 11)
    # S = {f2} = e₁: captures 1 of f0, 4 of f1 and all 1 of f2 → (11 − 6)/11
    assert reconstruction_error(X, [2], center=False) == pytest.approx((11 - 6) / 11)
    assert reconstruction_error(X, [0, 2], center=False) == pytest.approx(0.0, abs=1e-12)
    # a dependent column adds nothing: prefix curve of (f0, f1, f2)
    curve = reconstruction_curve(X, [0, 1, 2], center=False)
    np.testing.assert_allclose(curve, [0.5 / 11, 0.5 / 11, 0.0], atol=1e-12)


def test_reconstruction_error_matches_lstsq_over_blocks(rng):
    X = rng.normal(size=(30, 57)) @ np.diag(rng.uniform(0.5, 3, 57))
    Xd = da.from_array(X, chunks=(30, 10))  # several feature blocks
    S = [3, 17, 40, 41, 55]
    Xc = X - X.mean(0)
    coef, *_ = np.linalg.lstsq(Xc[:, S], Xc, rcond=None)
    want = ((Xc - Xc[:, S] @ coef) ** 2).sum() / (Xc**2).sum()
    assert reconstruction_error(Xd, S) == pytest.approx(want, rel=1e-9)
    curve = reconstruction_curve(Xd, S)
    assert curve[-1] == pytest.approx(want, rel=1e-9)
    assert np.all(np.diff(curve) <= 1e-12)
    with pytest.raises(InputError, match="empty selection"):
        reconstruction_error(X, [])


# ---------------------------------------------------------------- classifiers


def test_knn_prefixes_match_scikit_learn(rng):
    from sklearn.neighbors import KNeighborsClassifier

    Xtr, Xte = rng.normal(size=(40, 12)), rng.normal(size=(9, 12))
    ytr = rng.integers(0, 3, 40)
    ms = [1, 2, 5, 12]
    got = knn_predict_prefixes(Xtr, ytr, Xte, ms, n_neighbors=3)
    for i, m in enumerate(ms):
        want = KNeighborsClassifier(3).fit(Xtr[:, :m], ytr).predict(Xte[:, :m])
        np.testing.assert_array_equal(got[i], want)


def _planted(rng, n=40, p=150, relevant=(3, 17, 25), shift=1.5):
    y = np.repeat([0, 1], n // 2)
    X = rng.normal(size=(n, p))
    X[np.ix_(y == 1, list(relevant))] += shift
    return X, y, list(relevant)


def test_evaluate_planted_problem(rng):
    X, y, rel = _planted(rng)
    res = evaluate(X, y, "ttest", protocol="loo", n_features=10, classifier="svm")
    assert isinstance(res, EvaluationResult)
    assert list(res.curve.index) == list(range(1, 11))
    assert res.protocol == "loo" and res.selection == "inside" and res.classifier == "svm"
    assert res.n_splits == 40 and res.fold_rankings.shape == (40, 10)
    assert res.best_error <= 0.15
    assert res.curve.loc[res.best_n_features, "error_rate"] == res.best_error
    assert (res.curve["n_errors"] == np.round(res.curve["error_rate"] * 40)).all()
    # every fold ranks the planted features near the top
    assert np.mean([len(set(r[:3]) & set(rel)) for r in res.fold_rankings]) >= 2.5
    assert 0.3 < res.stability["kuncheva"] <= 1 and 0 < res.stability["jaccard"] <= 1
    assert "LOO (40 folds)" in res.label and "inside each training fold" in res.label
    md = res.to_markdown()
    assert "| features | errors | error rate |" in md and "standardised" in md


def test_once_is_optimistic_on_pure_noise(rng):
    """Selecting on all samples leaks the test labels (Ambroise & McLachlan 2002)."""
    X = rng.normal(size=(30, 1500))
    y = np.repeat([0, 1], 15)
    both = {
        sel: evaluate_classifiers(
            X,
            y,
            "ttest",
            protocol="kfold",
            n_splits=5,
            n_features=[5],
            selection=sel,
            classifiers=("knn",),
        )["knn"]
        for sel in ("inside", "once")
    }
    assert both["once"].best_error < both["inside"].best_error - 0.15
    assert "ONCE" in both["once"].label and np.isnan(both["once"].stability["kuncheva"])
    assert both["inside"].best_error >= 0.3


def test_kfold_and_dataset_input_and_roundtrip(rng, tmp_path):
    X, y, rel = _planted(rng, n=30, p=60)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y)},
        coords={"feature": [f"g{i}" for i in range(60)]},
    )
    r = evaluate(
        ds, method="f", protocol="kfold", n_splits=5, classifier="knn", n_features=[1, 3, 8]
    )
    assert (
        list(r.curve.index) == [1, 3, 8] and r.n_splits == 5 and r.curve["n_tested"].iloc[0] == 30
    )
    assert r.top_features(3)[0].startswith("g")
    for name in ("ev.zarr", "ev.nc"):
        path = write_evaluation(r, str(tmp_path / name))
        back = open_evaluation(path)
        assert (
            back.best_error == r.best_error
            and back.protocol == "kfold"
            and back.selection == "inside"
        )
        np.testing.assert_array_equal(back.fold_rankings, r.fold_rankings)
        assert back.top_features(2) == r.top_features(2)
    merged = xr.merge([ds.drop_vars("X"), r.to_dataset()], combine_attrs="drop_conflicts")
    assert "cv_error_rate" in merged


def test_folds_in_parallel_on_cluster(rng, cluster):
    X, y, _ = _planted(rng, n=24, p=80)
    kw = dict(protocol="kfold", n_splits=4, n_features=5, classifier="svm")
    with dask.config.set(scheduler="sync"):
        ref = evaluate(X, y, "snr", parallel="within", **kw)
    with dask.config.set(scheduler=cluster):
        par = evaluate(X, y, "snr", parallel="folds", **kw)
    np.testing.assert_array_equal(ref.fold_rankings, par.fold_rankings)
    assert ref.curve.equals(par.curve)


def test_evaluate_result_and_mismatch(rng):
    import fsdask

    X, y, rel = _planted(rng, n=30, p=60)
    da_ = xr.DataArray(
        X, dims=("sample", "feature"), coords={"feature": [f"g{i}" for i in range(60)]}
    )
    result = fsdask.Filter(statistic="ttest").fit(da_, y).result_
    r = evaluate_result(da_, y, result, protocol="kfold", n_splits=5, n_features=5)
    assert r.selection == "once" and r.method == "ttest" and "ONCE" in r.label
    other = da_.assign_coords(feature=[f"h{i}" for i in range(60)])
    with pytest.raises(InputError, match="feature ids do not match.*position 0"):
        evaluate_result(other, y, result)
    with pytest.raises(InputError, match="ranks 60 features but the data has 59"):
        evaluate_result(X[:, :59], y, result)


# ---------------------------------------------------------------- bad input


def test_bad_input_messages(rng):
    X, y, _ = _planted(rng, n=20, p=30)
    y_small = y.copy()
    y_small[:7] = 1  # class 0 has 3 samples
    with pytest.raises(
        InputError, match="needs at least 5 samples in every class.*has 3.*--folds 3"
    ):
        evaluate(X, y_small, "ttest", protocol="kfold", n_splits=5)
    with pytest.raises(InputError, match="unlabeled"):
        evaluate(X, None, "variance")
    with pytest.raises(InputError, match="unlabeled"):
        evaluate(X, np.full(20, -1), "variance")
    with pytest.raises(InputError, match="continuous response"):
        evaluate(X, rng.normal(size=20), "pearson")
    with pytest.raises(InputError, match="single class"):
        evaluate(X, np.zeros(20, int), "ttest")
    with pytest.raises(ParameterError, match="protocol="):
        evaluate(X, y, "ttest", protocol="holdout")
    with pytest.raises(ParameterError, match="selection="):
        evaluate(X, y, "ttest", selection="twice")
    with pytest.raises(ParameterError, match="classifier="):
        evaluate(X, y, "ttest", classifier="tree")
    with pytest.raises(ParameterError, match="unknown method"):
        evaluate(X, y, "nosuchmethod")
    with pytest.raises(InputError, match="20 entries|has 19 entries"):
        evaluate(X, y[:19], "ttest")


# ---------------------------------------------------------------- data + examples scaffolding


def test_load_npz(shared_data):
    from fsdask.datasets import load_npz

    X, y, info = load_npz("leukemia_golub")
    assert X.shape == (72, 7129) and np.bincount(y).tolist() == [47, 25]
    assert info["feature_names"].shape == (7129,) and info["has_feature_names"]
    assert list(info["class_names"]) == ["ALL", "AML"]
    X, y, info = load_npz(shared_data / "colon_alon.npz")
    assert (
        X.shape == (62, 2000) and not info["has_feature_names"] and info["feature_names"][0] == "f0"
    )
    X, y, info = load_npz("nips_words")
    assert y is None and info["task"] == "unlabeled"
    with pytest.raises(OSError, match="no such dataset"):
        load_npz("nonexistent_set")


def _common(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("_common_test", ROOT / "examples" / "_common.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "EXAMPLES", tmp_path)
    return mod


def test_examples_common(monkeypatch, tmp_path, capsys):
    mod = _common(monkeypatch, tmp_path)
    path = mod.write_results_md(
        "demo",
        "A title",
        ["method", "ours", "paper"],
        [["ttest", 0.0417, "1–5 errors"]],
        notes=["a note"],
    )
    text = path.read_text()
    assert path == tmp_path / "results" / "demo.md"
    assert text.startswith("# A title") and "\n- command: python" in text and "UTC" in text
    assert re.search(r"\n- commit: [0-9a-f]{40}", text) and "\n- protocol: " in text
    assert "| ttest | 0.0417 | 1–5 errors |" in text and "* a note" in text
    monkeypatch.setenv("FSDASK_SHARED_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit) as exc:
        mod.shared_data_dir()
    assert exc.value.code == 0 and "skipping" in capsys.readouterr().out


def test_missing_scikit_learn_is_a_clear_error(monkeypatch, rng):
    import builtins

    from fsdask.evaluate import MissingDependencyError

    real_import = builtins.__import__

    def no_sklearn(name, *a, **k):
        if name == "sklearn" or name.startswith("sklearn."):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    X, y, _ = _planted(rng, n=20, p=30)
    with pytest.raises(MissingDependencyError, match=r"pip install 'fsdask\[eval\]'"):
        evaluate(X, y, "ttest", protocol="kfold", n_splits=2)


def test_the_evaluate_command_shows_progress_unless_told_not_to(tmp_path, capsys, monkeypatch):
    """``fsdask evaluate`` refits in every fold: dask's task lines and each fit's own lines
    go to stderr, as for ``select``; ``--no-progress`` silences both."""
    from fsdask.cli import main
    from fsdask.datasets import weston_linear, write_synthetic

    store = tmp_path / "w.zarr"
    write_synthetic(weston_linear(n_samples=30, n_features=40, random_state=0), store)
    monkeypatch.setenv("FSDASK_PROGRESS_INTERVAL", "0")
    argv = ["evaluate", str(store), "--method", "logo", "--protocol", "kfold", "--folds", "3"]
    argv += ["--max-features", "3", "--parallel", "within", "--scheduler", "threads"]
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert re.search(r"^fsdask: \d+/\d+ tasks", err, re.M), err
    assert re.search(r"^fsdask: logo: iteration 1: ", err, re.M), err
    assert main([*argv, "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert not re.search(r"^fsdask: (\d+/\d+ tasks|logo: iteration)", err, re.M), err
