"""``fsdask evaluate`` / ``fsdask report`` end to end, and the report on a real result."""

from __future__ import annotations

import re

import numpy as np
import pytest
import xarray as xr

import fsdask
from fsdask.errors import InputError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Proc:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def _cli(capsys):
    """Run ``fsdask …`` in-process (the subprocess form is covered by tests/test_cli.py)."""
    from fsdask.cli import main

    def run(*args, check=True):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        if check and code != 0:
            raise AssertionError(f"exit {code}\n{out}\n{err}")
        return _Proc(code, out, err)

    return run


def _check_pngs(html_text, out):
    refs = re.findall(r"<img src='([^']+)'", html_text)
    assert refs, "the page shows no figure"
    for r in refs:
        f = out / r
        assert not r.startswith("/") and f.exists(), r  # relative, next to the page
        data = f.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 2000
    return refs


def test_report_on_real_result(tmp_path, shared_data):
    from fsdask.datasets.shared import load_npz, to_dataset
    from fsdask.evaluate import evaluate
    from fsdask.report import make_report

    X, y, info = load_npz("leukemia_golub")
    ds = to_dataset(X[:, :600], y, {**info, "feature_names": info["feature_names"][:600]})
    result = fsdask.Filter(statistic="snr", n_features_to_select=20).fit(ds).result_
    ev = evaluate(ds, method="snr", protocol="kfold", n_splits=4, n_features=8, classifier="knn")
    index = make_report(result, tmp_path / "rep", data=ds, evaluations=[ev], csv=True, top=12)
    text = index.read_text()
    refs = _check_pngs(text, tmp_path / "rep")
    assert {"weights.png", "cv.png", "heatmap.png"} <= set(refs)
    top = np.argsort(result["rank"].values)[:12]
    for name in info["feature_names"][top]:
        assert f"<td>{name}</td>" in text
    assert "mean (ALL)" in text and "mean (AML)" in text and "selection refit inside" in text
    assert (tmp_path / "rep" / "ranked.csv").read_text().count("\n") == 601
    wrong = ds.assign_coords(feature=[f"x{i}" for i in range(600)])
    with pytest.raises(InputError, match="feature ids do not match"):
        make_report(result, tmp_path / "rep2", data=wrong)


def test_report_paths_and_convergence(tmp_path, rng):
    from fsdask.report import make_report, path_variables

    p, L = 40, 6
    w = rng.uniform(size=p)
    ds = xr.Dataset(
        {
            "weight": ("feature", w),
            "rank": ("feature", np.argsort(np.argsort(-w)) + 1),
            "selected": ("feature", w > 0.5),
            "weight_path": (("lambda", "feature"), np.outer(np.linspace(1, 0, L), w)),
            "n_selected": ("rho", np.arange(L)),
            "unrelated": ("feature", w),
        },
        coords={"feature": [f"f{i}" for i in range(p)], "lambda": np.geomspace(1e-3, 10, L)},
    )
    ds.attrs = {"method": "toy", "objective": [5.0, 3.0, 2.5, 2.4, 2.39], "converged": True}
    assert path_variables(ds) == ["weight_path", "n_selected"]
    text = make_report(ds, tmp_path / "r").read_text()
    refs = _check_pngs(text, tmp_path / "r")
    assert {"weights.png", "convergence.png", "path_weight_path.png", "path_n_selected.png"} == set(
        refs
    )


def test_cli_evaluate_and_report(tmp_path, rng, _cli):
    X = rng.normal(size=(24, 40))
    y = np.repeat([0, 1], 12)
    X[y == 1, :3] += 2.0
    fsdask.ingest(X, tmp_path / "d.zarr", y=y, feature_names=[f"g{i}" for i in range(40)])
    p = _cli(
        "evaluate",
        tmp_path / "d.zarr",
        "--method",
        "ttest",
        "--protocol",
        "kfold",
        "--folds",
        "4",
        "--classifier",
        "knn",
        "--max-features",
        "6",
        "-o",
        tmp_path / "ev.zarr",
        "--csv",
        tmp_path / "c.csv",
        "--scheduler",
        "sync",
    )
    assert "stratified 4-fold CV" in p.stdout and "inside each training fold" in p.stdout
    assert "best error" in p.stdout and "| 6 |" in p.stdout
    assert (tmp_path / "c.csv").read_text().startswith("n_features,error_rate,n_errors")
    _cli("select", tmp_path / "d.zarr", "--method", "ttest", "-o", tmp_path / "r.zarr")
    p = _cli(
        "evaluate",
        tmp_path / "d.zarr",
        tmp_path / "r.zarr",
        "--protocol",
        "loo",
        "--max-features",
        "3",
    )
    assert "LOO (24 folds)" in p.stdout and "ONCE" in p.stdout
    p = _cli(
        "report",
        tmp_path / "r.zarr",
        "--data",
        tmp_path / "d.zarr",
        "--evaluation",
        tmp_path / "ev.zarr",
        "--out",
        tmp_path / "rep",
        "--csv",
    )
    assert "report written" in p.stdout
    text = (tmp_path / "rep" / "index.html").read_text()
    assert "cv.png" in text and "<td>g0</td>" in text
    # bad input: too many folds, unlabeled data, mismatched result, both/neither of --method and RESULT
    p = _cli(
        "evaluate",
        tmp_path / "d.zarr",
        "--method",
        "ttest",
        "--protocol",
        "kfold",
        "--folds",
        "13",
        check=False,
    )
    assert p.returncode == 2 and "needs at least 13 samples in every class" in p.stderr
    fsdask.ingest(X, tmp_path / "u.zarr")
    p = _cli("evaluate", tmp_path / "u.zarr", "--method", "variance", check=False)
    assert p.returncode == 2 and "unlabeled" in p.stderr
    fsdask.ingest(X[:, :39], tmp_path / "d39.zarr", y=y)
    p = _cli("evaluate", tmp_path / "d39.zarr", tmp_path / "r.zarr", check=False)
    assert p.returncode == 2 and "ranks 40 features but the data has 39" in p.stderr
    p = _cli("evaluate", tmp_path / "d.zarr", check=False)
    assert p.returncode == 2 and "either --method" in p.stderr


def test_cli_reconstruction_and_truth(tmp_path, rng, _cli):
    from fsdask.datasets import weston_linear, write_synthetic
    from fsdask.evaluate import reconstruction_curve

    syn = weston_linear(n_samples=30, n_features=60, random_state=1)
    write_synthetic(syn, tmp_path / "w.zarr")
    p = _cli(
        "evaluate",
        tmp_path / "w.zarr",
        "--method",
        "ttest",
        "--protocol",
        "kfold",
        "--folds",
        "3",
        "--max-features",
        "8",
    )
    assert "false-discovery rate of the top" in p.stdout
    _cli("select", tmp_path / "w.zarr", "--method", "ttest", "-o", tmp_path / "r.zarr")
    p = _cli(
        "report", tmp_path / "r.zarr", "--data", tmp_path / "w.zarr", "--out", tmp_path / "rep"
    )
    text = (tmp_path / "rep" / "index.html").read_text()
    assert "Against the truth" in text and "Sparsity gap" in text and "★" in text
    X = rng.normal(size=(20, 12)) @ rng.normal(size=(12, 12))
    fsdask.ingest(X, tmp_path / "u.zarr")
    p = _cli(
        "evaluate",
        tmp_path / "u.zarr",
        "--method",
        "variance",
        "--reconstruction",
        "--max-features",
        "12",
        "--all-rows",
    )
    assert "| 12 | 0.00000 | 1.00000 |" in p.stdout
    order = np.argsort(-X.var(axis=0, ddof=1), kind="stable")
    want = reconstruction_curve(X, order[:3])[2]
    assert f"| 3 | {want:.5f} |" in p.stdout
