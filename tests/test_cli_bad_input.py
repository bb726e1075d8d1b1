"""Bad input through the CLI: exit status 2, one line on stderr, no traceback, no output written."""

import numpy as np
import pytest

import fsdask
from fsdask.cli import main


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    return code, err


@pytest.fixture
def store(tmp_path, rng):
    X = rng.normal(size=(10, 40)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "d.zarr", y=[0, 1] * 5, chunk_bytes=10 * 4 * 16)
    return tmp_path / "d.zarr"


def test_corrupted_chunk(capsys, store, tmp_path):
    (store / "X" / "c" / "0" / "1").write_bytes(b"garbage")
    code, err = _run(
        capsys, "select", store, "--method", "ttest", "-o", tmp_path / "r.zarr", "--no-progress"
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "cannot read X (features 16–31)" in err and "corrupted" in err and "d.zarr" in err
    assert not (tmp_path / "r.zarr").exists() and not list(tmp_path.glob(".r.zarr*"))


def test_foreign_empty_missing_and_nan(capsys, tmp_path, rng):
    import zarr

    zarr.open_group(str(tmp_path / "plain.zarr"), mode="w", zarr_format=3)
    for argv, msg in [
        (
            ["select", tmp_path / "plain.zarr", "--method", "f", "-o", tmp_path / "r.zarr"],
            "not an fsdask dataset",
        ),
        (["info", tmp_path / "nowhere.zarr"], "no such file"),
        (["ingest", tmp_path / "nowhere.csv", tmp_path / "o.zarr"], "no such file"),
    ]:
        code, err = _run(capsys, *argv)
        assert code == 2 and msg in err and err.count("\n") == 1, err
    (tmp_path / "empty.csv").write_text("")
    code, err = _run(capsys, "ingest", tmp_path / "empty.csv", tmp_path / "o.zarr")
    assert code == 2 and "empty" in err
    X = rng.normal(size=(6, 5))
    X[2, 3] = np.nan
    np.savez(tmp_path / "nan.npz", X=X, y=np.array([0, 1] * 3))
    code, err = _run(capsys, "ingest", tmp_path / "nan.npz", tmp_path / "o.zarr")
    assert code == 2 and "1 NaN/Inf value(s) in 1 feature(s)" in err and "--nan-policy" in err
    assert not (tmp_path / "o.zarr").exists() and not (tmp_path / "r.zarr").exists()


def test_out_of_range_and_existing_output(capsys, store, tmp_path):
    code, err = _run(
        capsys,
        "select",
        store,
        "--method",
        "ttest",
        "--param",
        "n_features_to_select=99",
        "-o",
        tmp_path / "r.zarr",
        "--no-progress",
    )
    assert code == 2 and "n_features_to_select=99 but X has only 40 features" in err
    code, err = _run(
        capsys,
        "select",
        store,
        "--method",
        "ttest",
        "-o",
        tmp_path / "r.zarr",
        "--scheduler",
        "local:0",
    )
    assert code == 2 and "N must be ≥ 1" in err
    code, err = _run(capsys, "ingest", store, store)
    assert code == 2 and "the input" in err and "destroy" in err
    assert not (tmp_path / "r.zarr").exists()
