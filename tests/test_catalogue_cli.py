"""The issue-38 catalogue of the command line and of what results say about themselves: the
``fsdask`` command run as a user runs it (a subprocess), on stores written by fsdask's own
ingest and results read back by xarray, pandas and scipy.

BAD cases are bad input: one line on stderr, exit 2, nothing on stdout.  GOOD cases are
valid runs that must now be handled right: p-values, adjusted p-values and directions in
every table, one JSON object for ``--json``, one line per warning, ``-q``, a light
``--version``, results that open without a warning, a demo that does not count zero
weights as found, and PCA baselines with a sensible default size.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import xarray as xr

import fsdask

CASES = [
    ("ttest-three-classes-api", "BAD"),
    ("ttest-three-classes-cli", "BAD"),
    ("select-json-unknown-method", "BAD"),
    ("info-json-missing-store", "BAD"),
    ("csv-ttest-pvalues", "GOOD"),
    ("csv-pearson-pvalues", "GOOD"),
    ("csv-snr-direction", "GOOD"),
    ("csv-variance-plain", "GOOD"),
    ("printed-top-table-pvalues", "GOOD"),
    ("report-table-pvalues", "GOOD"),
    ("select-json", "GOOD"),
    ("info-json-dataset", "GOOD"),
    ("info-json-result", "GOOD"),
    ("warning-one-line", "GOOD"),
    ("quiet-before-command", "GOOD"),
    ("quiet-after-command", "GOOD"),
    ("version-light", "GOOD"),
    ("open-zarr-result-quiet", "GOOD"),
    ("demo-zero-weight-not-found", "GOOD"),
    ("pfa-default-size", "GOOD"),
    ("spca-default-size", "GOOD"),
]

RNG = np.random.default_rng(38)
N, P = 24, 12
X = RNG.normal(size=(N, P))
X[12:, 1] += 2.5  # larger in the second class
X[12:, 4] -= 2.0  # smaller in the second class
Y = np.r_[np.zeros(12, int), np.ones(12, int)]
GENES = [f"g{j}" for j in range(P)]


def fsdask_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fsdask.cli", *map(str, args)], capture_output=True, text=True
    )


def one_line_exit_2(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("cat38") / "d.zarr"
    fsdask.ingest(X, path, y=Y, feature_names=GENES)
    return path


# ---- BAD: refused in one line, exit 2 -----------------------------------------------------
def test_ttest_three_classes_api_names_the_classes():  # ttest-three-classes-api
    y3 = np.arange(N) % 3
    with pytest.raises(fsdask.InputError) as info:
        fsdask.Filter(statistic="ttest").fit(X, y3)
    text = str(info.value)
    assert "(0, 1, 2)" in text and "np.int64" not in text and "\n" not in text


def test_ttest_three_classes_cli(tmp_path):  # ttest-three-classes-cli
    path = tmp_path / "three.zarr"
    fsdask.ingest(X, path, y=np.arange(N) % 3)
    line = one_line_exit_2(fsdask_cli("select", path, "--method", "ttest", "-o", tmp_path / "r"))
    assert "(0, 1, 2)" in line and "np.int64" not in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "case, argv",
    [
        (
            "select-json-unknown-method",
            ["select", "{store}", "--method", "nosuch", "-o", "{tmp}/r"],
        ),
        ("info-json-missing-store", ["info", "{tmp}/missing.zarr"]),
    ],
    ids=["select-json-unknown-method", "info-json-missing-store"],
)
def test_json_errors_leave_stdout_empty(store, tmp_path, case, argv):
    argv = [a.format(store=store, tmp=tmp_path) for a in argv] + ["--json"]
    line = one_line_exit_2(fsdask_cli(*argv))
    assert line.startswith(f"fsdask {argv[0]}: error:")


# ---- GOOD: p-values, adjusted p-values and directions reach the tables ---------------------
def _select_csv(store, tmp_path, statistic):
    out, csv = tmp_path / f"{statistic}.zarr", tmp_path / f"{statistic}.csv"
    proc = fsdask_cli("select", store, "--method", statistic, "-o", out, "--csv", csv, "-q")
    assert proc.returncode == 0, proc.stderr
    return pd.read_csv(csv).set_index("feature").loc[GENES], out


def test_csv_ttest_has_pvalues_adjusted_and_direction(store, tmp_path):  # csv-ttest-pvalues
    table, _ = _select_csv(store, tmp_path, "ttest")
    assert list(table.columns) == [
        "rank",
        "weight",
        "selected",
        "pvalue",
        "pvalue_adj",
        "direction",
    ]
    ref = scipy.stats.ttest_ind(X[Y == 1], X[Y == 0], equal_var=False)
    np.testing.assert_allclose(table["pvalue"], ref.pvalue, rtol=1e-5)
    np.testing.assert_allclose(
        table["pvalue_adj"], scipy.stats.false_discovery_control(ref.pvalue), rtol=1e-5
    )
    np.testing.assert_array_equal(table["direction"], np.sign(ref.statistic).astype(int))
    assert table.loc["g1", "direction"] == 1 and table.loc["g4", "direction"] == -1


def test_csv_pearson_has_pvalues_and_direction(store, tmp_path):  # csv-pearson-pvalues
    table, _ = _select_csv(store, tmp_path, "pearson")
    ref = [scipy.stats.pearsonr(X[:, j], Y) for j in range(P)]
    np.testing.assert_allclose(table["pvalue"], [r.pvalue for r in ref], rtol=1e-5)
    np.testing.assert_array_equal(table["direction"], [int(np.sign(r.statistic)) for r in ref])


def test_csv_snr_has_direction_only(store, tmp_path):  # csv-snr-direction
    table, _ = _select_csv(store, tmp_path, "snr")
    assert list(table.columns) == ["rank", "weight", "selected", "direction"]
    diff = X[Y == 1].mean(0) - X[Y == 0].mean(0)
    np.testing.assert_array_equal(table["direction"], np.sign(diff).astype(int))


def test_csv_variance_keeps_its_four_columns(store, tmp_path):  # csv-variance-plain
    table, _ = _select_csv(store, tmp_path, "variance")
    assert list(table.columns) == ["rank", "weight", "selected"]


def test_printed_top_table_shows_pvalues():  # printed-top-table-pvalues
    from fsdask.results import print_top

    res = fsdask.Filter(statistic="ttest").fit(X, Y).result_
    buf = io.StringIO()
    print_top(res, 3, file=buf)
    head, first = buf.getvalue().splitlines()[:2]
    assert "p-value" in head and "adj. p" in head and "dir" in head
    assert f"{float(res['pvalue'].sel(feature=1)):.4g}" in first


def test_report_table_shows_pvalues(tmp_path):  # report-table-pvalues
    pytest.importorskip("matplotlib")
    from fsdask.report import make_report

    res = fsdask.Filter(statistic="ttest").fit(X, Y).result_
    page = make_report(res, tmp_path / "rep", csv=True)
    text = open(page, encoding="utf-8").read()
    assert "<th>p-value</th>" in text and "<th>BH-adjusted p</th>" in text
    assert "<th>direction</th>" in text
    header = (tmp_path / "rep" / "ranked.csv").read_text().splitlines()[0]
    assert header == "rank,feature,weight,selected,pvalue,pvalue_adj,direction"


# ---- GOOD: --json prints exactly one JSON object -------------------------------------------
def test_select_json_is_one_object(store, tmp_path):  # select-json
    proc = fsdask_cli(
        "select", store, "--method", "ttest", "-o", tmp_path / "r.zarr", "--top", "3", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)  # the whole of stdout is one object
    assert record["command"] == "select" and record["n_features"] == P
    assert [t["feature"] for t in record["top"]][:2] == ["g1", "g4"]
    assert set(record["top"][0]) >= {"rank", "weight", "selected", "pvalue", "pvalue_adj"}
    assert record["top"][0]["direction"] == 1


def test_info_json_dataset(store):  # info-json-dataset
    proc = fsdask_cli("info", store, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["kind"] == "dataset" and (record["n_samples"], record["n_features"]) == (N, P)
    assert record["labels"] == {"classes": {"0": 12, "1": 12}}


def test_info_json_result(store, tmp_path):  # info-json-result
    out = tmp_path / "r.zarr"
    assert fsdask_cli("select", store, "--method", "ttest", "-o", out, "-q").returncode == 0
    proc = fsdask_cli("info", out, "--json", "--top", "2")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["kind"] == "result" and record["method"] == "ttest"
    assert len(record["top"]) == 2 and record["attrs"]["parameters"]["statistic"] == "ttest"


# ---- GOOD: warnings in one line, -q, a light --version ------------------------------------
def test_warning_is_one_line(store, tmp_path):  # warning-one-line
    proc = fsdask_cli(
        "select", store, "--method", "ttest", "--param", "score=ttest", "-o", tmp_path / "r", "-q"
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("warning: FutureWarning: ") for ln in lines), lines
    assert "warnings.warn" not in proc.stderr and ".py:" not in proc.stderr


@pytest.mark.parametrize(
    "where", ["before", "after"], ids=["quiet-before-command", "quiet-after-command"]
)
def test_quiet_prints_nothing(store, tmp_path, where):
    args = ["select", store, "--method", "ttest", "-o", tmp_path / "r.zarr"]
    proc = fsdask_cli(*(["-q", *args] if where == "before" else [*args, "--quiet"]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    assert fsdask.open_result(tmp_path / "r.zarr").attrs["method"] == "ttest"


def test_version_imports_nothing_heavy():  # version-light
    code = (
        "import sys; from fsdask.cli import main; rc = main(['--version']); "
        "print([m for m in ('sklearn', 'xarray', 'dask.array', 'zarr', 'pandas') "
        "if m in sys.modules], rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.splitlines() == [f"fsdask {fsdask.__version__}", "[] 0"], proc


# ---- GOOD: results open quietly ------------------------------------------------------------
def test_open_zarr_of_a_result_does_not_warn(tmp_path):  # open-zarr-result-quiet
    res = fsdask.Filter(statistic="ttest").fit(X, Y).result_
    fsdask.write_result(res, tmp_path / "r.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = xr.open_zarr(tmp_path / "r.zarr")
    np.testing.assert_allclose(back["pvalue"].values, res["pvalue"].values)
    assert back.attrs["fsdask_kind"] == "result"
    assert "Benjamini-Hochberg" in back["pvalue_adj"].attrs["description"]
    assert fsdask.open_result(tmp_path / "r.zarr").attrs["method"] == "ttest"


# ---- GOOD: the demo counts only positive weights as found ----------------------------------
def test_demo_does_not_count_zero_weights_as_found():  # demo-zero-weight-not-found
    from fsdask.api.demo import print_found

    feats = [str(j) for j in range(8)]
    weight = np.array([0.0, 0.0, 0.9, 0.0, 0.5, 0.0, 0.0, 0.0])
    rank = np.argsort(np.argsort(-weight, kind="stable"), kind="stable") + 1
    res = xr.Dataset(
        {
            "weight": ("feature", weight),
            "rank": ("feature", rank),
            "selected": ("feature", np.array([1, 1, 1, 0, 1, 0, 0, 0], bool)),
        },
        coords={"feature": feats},
    )
    buf = io.StringIO()
    found = print_found(res, {"0", "1", "2"}, file=buf)
    text = buf.getvalue()
    assert found == 1
    assert "selected 2 features with a positive weight: 1 of the 3 relevant ones" in text
    assert "2 more selected feature(s) have weight 0" in text
    listed = [ln.split()[1] for ln in text.splitlines()[2:] if ln.strip()]
    assert listed == ["2", "4"]


# ---- GOOD: PCA baselines select the number of components by default ----------------------
@pytest.mark.parametrize(
    "cls", ["PFA", "SparsePCASelector"], ids=["pfa-default-size", "spca-default-size"]
)
def test_pca_baselines_default_size_is_the_rank(cls):
    rng = np.random.default_rng(1)
    Xw = rng.normal(size=(10, 40))  # n ≪ p: 9 components
    est = getattr(fsdask, cls)(**({"max_bisect": 10} if cls != "PFA" else {})).fit(Xw)
    assert int(est.support_.sum()) == 9
    Xt = rng.normal(size=(30, 6))  # n > p: the top half, as before
    assert int(getattr(fsdask, cls)().fit(Xt).support_.sum()) == 3
