"""The ``fsdask`` command line, run as a user runs it (a subprocess)."""

import subprocess
import sys

import numpy as np
import pytest

import fsdask


def fsdask_cli(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "fsdask.cli", *map(str, args)], capture_output=True, text=True
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_ingest_info_select(tmp_path, shared_data):
    store, out = tmp_path / "golub.zarr", tmp_path / "res.zarr"
    p = fsdask_cli("ingest", shared_data / "leukemia_golub.npz", store)
    assert "72 samples × 7129 features" in p.stdout and "ALL: 47" in p.stdout
    p = fsdask_cli(
        "select",
        store,
        "--method",
        "ttest",
        "--param",
        "n_features_to_select=50",
        "-o",
        out,
        "--csv",
        tmp_path / "t.csv",
        "--top",
        "5",
    )
    assert "50 of 7129 features selected" in p.stdout
    res = fsdask.open_result(out)
    assert int(res["selected"].sum()) == 50 and res.attrs["input_store"] == str(store)
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0].startswith("rank,feature,weight,selected") and len(lines) == 7130
    p = fsdask_cli("info", out, "--top", "3")
    assert "ttest" in p.stdout and lines[1].split(",")[1] in p.stdout


def test_errors_are_one_line_and_nonzero(tmp_path):
    p = fsdask_cli(
        "select",
        tmp_path / "missing.zarr",
        "--method",
        "ttest",
        "-o",
        tmp_path / "r.zarr",
        check=False,
    )
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "r.zarr").exists()
    fsdask.ingest(
        np.random.default_rng(0).normal(size=(6, 5)), tmp_path / "d.zarr", y=[0, 0, 0, 1, 1, 1]
    )
    p = fsdask_cli(
        "select", tmp_path / "d.zarr", "--method", "nosuch", "-o", tmp_path / "r.zarr", check=False
    )
    assert p.returncode == 2 and "unknown method" in p.stderr
    p = fsdask_cli(
        "select",
        tmp_path / "d.zarr",
        "--method",
        "ttest",
        "--param",
        "n_features_to_select=-3",
        "-o",
        tmp_path / "r.zarr",
        check=False,
    )
    assert p.returncode == 2 and "n_features_to_select" in p.stderr
    assert not (tmp_path / "r.zarr").exists()


@pytest.mark.parametrize("cmd", ["ingest", "info", "select", "demo"])
def test_help(cmd):
    assert "usage: fsdask" in fsdask_cli(cmd, "--help").stdout
