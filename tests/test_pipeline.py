"""``fsdask run``: a resumable batch pipeline, including a crash mid-pipeline and the resume."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from fsdask.errors import ParameterError
from fsdask.pipeline import StepFailed, load_config, run_pipeline


@pytest.fixture
def project(tmp_path, rng):
    X = rng.normal(size=(16, 40)).astype(np.float32)
    y = np.repeat([0, 1], 8)
    X[y == 1, :2] += 3
    np.savez(tmp_path / "d.npz", X=X, y=y, feature_names=np.array([f"g{j}" for j in range(40)]))
    cfg = {
        "scheduler": "threads",
        "steps": [
            {
                "name": "ingest",
                "ingest": {"source": "d.npz", "url": "out/d.zarr", "overwrite": True},
            },
            {
                "name": "ttest",
                "select": {
                    "url": "out/d.zarr",
                    "method": "ttest",
                    "output": "out/t.zarr",
                    "param": {"n_features_to_select": 2},
                    "csv": "out/t.csv",
                },
            },
            {
                "name": "snr",
                "select": {
                    "url": "out/d.zarr",
                    "method": "snr",
                    "output": "out/s.zarr",
                    "param": {"n_features_to_select": 5},
                },
            },
        ],
    }
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, cfg


def test_crash_mid_pipeline_then_resume(project, monkeypatch, capsys):
    path, _ = project
    import fsdask.results

    real_write = fsdask.results.write_result
    calls = []

    def crashing_write(ds, url, **kw):
        calls.append(str(url))
        if str(url).endswith("s.zarr"):
            raise RuntimeError("simulated crash while writing")
        return real_write(ds, url, **kw)

    monkeypatch.setattr(fsdask.results, "write_result", crashing_write)
    with pytest.raises(
        StepFailed, match=r"step 3 \(snr\) failed unexpectedly: RuntimeError: simulated crash"
    ):
        run_pipeline(path)
    out = path.parent / "out"
    assert (out / "t.zarr").exists() and (out / "t.csv").exists() and not (out / "s.zarr").exists()
    assert not [p for p in os.listdir(out) if ".tmp" in p]  # no half-written outputs lying around
    state = json.loads((path.parent / "pipe.state.json").read_text())
    assert sorted(state["steps"]) == ["ingest", "ttest"] and "completed" not in state
    stamp = os.stat(out / "t.zarr" / "zarr.json").st_mtime_ns

    monkeypatch.setattr(fsdask.results, "write_result", real_write)
    assert run_pipeline(path) == {"ingest": "skipped", "ttest": "skipped", "snr": "ran"}
    assert os.stat(out / "t.zarr" / "zarr.json").st_mtime_ns == stamp
    assert int(fsdask.open_result(out / "s.zarr")["selected"].sum()) == 5
    assert "done in an earlier run" in capsys.readouterr().out
    state = json.loads((path.parent / "pipe.state.json").read_text())
    assert sorted(state["steps"]) == ["ingest", "snr", "ttest"] and "completed" in state
    # all done: nothing runs; a changed option re-runs that step and every later one
    assert set(run_pipeline(path).values()) == {"skipped"}
    cfg = yaml.safe_load(path.read_text())
    cfg["steps"][1]["select"]["param"]["n_features_to_select"] = 3
    path.write_text(yaml.safe_dump(cfg))
    assert run_pipeline(path) == {"ingest": "skipped", "ttest": "ran", "snr": "ran"}
    # a lost output makes its step run again
    import shutil

    shutil.rmtree(out / "d.zarr")
    assert run_pipeline(path)["ingest"] == "ran"
    assert run_pipeline(path, restart=True) == {"ingest": "ran", "ttest": "ran", "snr": "ran"}


def test_cli_failure_is_one_line(project):
    path, cfg = project
    cfg["steps"][0]["ingest"]["source"] = "missing.npz"
    path.write_text(yaml.safe_dump(cfg))
    p = subprocess.run(
        [sys.executable, "-m", "fsdask.cli", "run", str(path)], capture_output=True, text=True
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    assert "step 1 (ingest): input missing.npz does not exist" in p.stderr
    assert not (path.parent / "out").exists() or not any((path.parent / "out").iterdir())


def test_bad_step_parameter_then_resume(project, capsys):
    path, cfg = project
    cfg["steps"][2]["select"]["param"] = {"n_features_to_select": -1}
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(
        StepFailed, match=r"step 3 \(snr\) failed: .*'n_features_to_select'.*Got -1"
    ) as err:
        run_pipeline(path)
    assert err.value.exit_code == 2 and not (path.parent / "out" / "s.zarr").exists()
    # found before any step ran (issue 38): steps 1 and 2 did not run for nothing
    assert not (path.parent / "out").exists()
    cfg["steps"][2]["select"]["param"] = {"n_features_to_select": 4}
    path.write_text(yaml.safe_dump(cfg))
    capsys.readouterr()
    assert run_pipeline(path) == {"ingest": "ran", "ttest": "ran", "snr": "ran"}
    assert run_pipeline(path) == {"ingest": "skipped", "ttest": "skipped", "snr": "skipped"}
    assert capsys.readouterr().out.count("done in an earlier run") == 3


@pytest.mark.parametrize(
    "block, said",
    [
        ({"stabilty": 100}, r"unknown key\(s\) 'stabilty'"),
        ({"stability": 1}, r"'n_resamples'.*Got 1"),
        ({"fdr": 1.5}, r"--fdr 1.5: a false discovery rate in \(0, 1\)"),
        ({"stability": 100, "stability_threshold": 0}, r"'threshold'.*Got 0"),
        ("stability", r"confidence: a mapping"),
    ],
)
def test_bad_confidence_block_is_found_before_any_step_ran(project, block, said):
    path, cfg = project
    cfg["steps"][2]["select"]["confidence"] = block
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(StepFailed, match=r"step 3 \(snr\) failed: .*" + said) as err:
        run_pipeline(path)
    assert err.value.exit_code == 2
    assert not (path.parent / "out").exists()  # steps 1 and 2 did not run for nothing


def test_a_valid_confidence_block_runs(project):
    path, cfg = project
    cfg["steps"][2]["select"]["confidence"] = {"stability": 4, "stability_threshold": 0.5}
    path.write_text(yaml.safe_dump(cfg))
    assert run_pipeline(path) == {"ingest": "ran", "ttest": "ran", "snr": "ran"}


def test_bad_configs(tmp_path):
    def cfg(text):
        (tmp_path / "c.yaml").write_text(text)
        return tmp_path / "c.yaml"

    with pytest.raises(ParameterError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ParameterError, match="non-empty list 'steps'"):
        load_config(cfg("steps: []\n"))
    with pytest.raises(ParameterError, match="exactly one command"):
        load_config(cfg("steps:\n  - {name: a, frobnicate: {}}\n"))
    with pytest.raises(ParameterError, match="unique"):
        load_config(cfg("steps:\n  - {name: a, info: {url: x}}\n  - {name: a, info: {url: y}}\n"))
    with pytest.raises(ParameterError, match="cannot be a pipeline step"):
        load_config(cfg("steps:\n  - {run: {config: x}}\n"))
    with pytest.raises(ParameterError, match="unknown option 'methd'"):
        run_pipeline(cfg("steps:\n  - {select: {url: x.zarr, methd: ttest, output: o.zarr}}\n"))


def test_example_config_parses():
    import pathlib

    pipe = load_config(pathlib.Path(__file__).resolve().parents[1] / "examples" / "pipeline.yaml")
    assert [s.command for s in pipe.steps] == ["ingest", "select", "select", "select"]
