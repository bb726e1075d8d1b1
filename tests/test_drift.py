"""Nightly drift (issue 41 item 3): the history names what entered, left and moved, says
whether the change exceeds resampling noise, and ``alert_on_drift`` ends a run with exit 3
after its results are written."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from fsdask.api.runs import drift, noise_jaccard, read_history, table, with_stability
from fsdask.errors import DriftAlert, ParameterError
from fsdask.pipeline import load_config, run_pipeline


def _data(path, rng, signal, n=40, p=60):
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = np.repeat([0, 1], n // 2)
    X[np.ix_(y == 1, signal)] += 2.5
    np.savez(path, X=X, y=y, feature_names=np.array([f"g{j}" for j in range(p)]))


def _config(tmp_path, alert=0.5, select_extra=None):
    cfg = {
        "scheduler": "threads",
        "history_top_k": 5,
        "steps": [
            {"name": "ingest", "ingest": {"source": "d.npz", "url": "d.zarr", "overwrite": True}},
            {
                "name": "ttest",
                "alert_on_drift": alert,
                "select": {
                    "url": "d.zarr",
                    "method": "ttest",
                    "output": "t.zarr",
                    "overwrite": True,
                    "param": {"n_features_to_select": 5},
                    **(select_extra or {}),
                },
            },
        ],
    }
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cli(*args, cwd):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
    )
    return subprocess.run(
        [sys.executable, "-m", "fsdask.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_drift_names_entered_left_and_moved():
    prev = {"top_k": ["a", "b", "c", "d"]}
    rec = {"top_k": ["b", "a", "e", "c"]}
    d = drift(prev, rec)
    assert d["entered"] == ["e"] and d["left"] == ["d"]
    assert d["shifts"] == [["b", 2, 1], ["a", 1, 2], ["c", 3, 4]]
    assert d["exceeds_noise"] is None  # no frequencies: the verdict is unknown, not "fine"


def test_noise_model_separates_a_real_change_from_resampling_noise():
    freq = {"a": 0.95, "b": 0.9, "c": 0.85, "d": 0.6, "e": 0.3}
    prev = {"top_k": list("abcde"), "frequency": freq, "stable": list("abcd")}
    same = drift(prev, {"top_k": list("abdce"), "stable": list("abc")})
    assert same["exceeds_noise"] is False and same["noise_p"] > 0.05
    other = drift(prev, {"top_k": list("vwxyz"), "stable": list("vwxy")})
    assert other["stable_jaccard"] == 0 and other["exceeds_noise"] is True
    sims = noise_jaccard(freq)
    assert 0 < sims.mean() < 1 and np.array_equal(sims, noise_jaccard(freq))  # reproducible


@pytest.mark.parametrize("value", [0, 1.5, "half", True])
def test_alert_on_drift_value_is_checked(tmp_path, value):
    with pytest.raises(ParameterError, match="alert_on_drift must be a Jaccard threshold"):
        load_config(_config(tmp_path, alert=value))


def test_alert_on_drift_exits_3_after_recording_the_step(tmp_path):
    rng = np.random.default_rng(0)
    _data(tmp_path / "d.npz", rng, signal=[0, 1, 2, 3, 4])
    cfg = _config(tmp_path, select_extra={"confidence": {"stability": 20}})
    assert set(run_pipeline(cfg).values()) == {"ran"}  # first night: nothing to compare
    _data(tmp_path / "d.npz", rng, signal=[30, 31, 32, 33, 34])  # the answer changes
    proc = _cli("run", cfg, "--log-json", "log.jsonl", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "drift alert" in ln]
    assert len(lines) == 1, proc.stderr
    assert "step ttest" in lines[0] and "Jaccard 0.00 < 0.5" in lines[0]
    assert "exceeds resampling noise" in lines[0]
    # the result and the state were written before the alert
    import fsdask

    res = fsdask.open_result(tmp_path / "t.zarr")
    assert set(np.asarray(res["feature"].values)[res["selected"].values]) <= {
        f"g{j}" for j in range(30, 35)
    }
    state = json.loads((tmp_path / "pipe.state.json").read_text())
    assert "ttest" in state["steps"]
    rows = with_stability(read_history(str(tmp_path / "pipe.state.history.jsonl")))
    assert rows[-1]["drift"]["entered"] and rows[-1]["drift"]["exceeds_noise"] is True
    assert "drift against the previous run" in table(
        read_history(str(tmp_path / "pipe.state.history.jsonl"))
    )
    events = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("drift_alert") == 1
    # the same data again: the step is skipped, no new drift, exit 0
    assert set(run_pipeline(cfg).values()) == {"skipped"}


def test_no_alert_above_the_threshold(tmp_path):
    rng = np.random.default_rng(1)
    _data(tmp_path / "d.npz", rng, signal=[0, 1, 2, 3, 4])
    cfg = _config(tmp_path, alert=0.5)
    run_pipeline(cfg)
    _data(tmp_path / "d.npz", rng, signal=[0, 1, 2, 3, 4])  # new noise, same signal
    assert set(run_pipeline(cfg).values()) == {"ran"}  # no DriftAlert raised


def test_drift_alert_is_a_step_failure_with_exit_3():
    assert DriftAlert("x").exit_code == 3
