"""Unattended nightly runs: input-aware skipping, the run lock, --log-json, history, bad state."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

import fsdask
from fsdask.errors import ParameterError
from fsdask.pipeline import StepFailed, run_pipeline
from fsdask.pipeline.fingerprint import fingerprint, same


def _data(path, rng, n=16, p=40, shift=3.0):
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = np.repeat([0, 1], n // 2)
    X[y == 1, :2] += shift
    np.savez(path, X=X, y=y, feature_names=np.array([f"g{j}" for j in range(p)]))


@pytest.fixture
def night(tmp_path, rng):
    _data(tmp_path / "d.npz", rng)
    cfg = {
        "scheduler": "threads",
        "history_top_k": 5,
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
                    "param": {"n_features_to_select": 5},
                },
            },
        ],
    }
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cli(*args, cwd=None):
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


def _events(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_changed_input_reruns_and_says_why(night, rng, capsys, monkeypatch):
    out = night.parent / "out"
    assert set(run_pipeline(night).values()) == {"ran"}
    assert set(run_pipeline(night).values()) == {"skipped"}
    # same content, new mtime: re-hashed, still done
    os.utime(night.parent / "d.npz", ns=(1, 1))
    assert set(run_pipeline(night).values()) == {"skipped"}
    capsys.readouterr()
    # night 2: new data at the same path → every step runs again, saying why
    _data(night.parent / "d.npz", rng, n=20)
    assert run_pipeline(night) == {"ingest": "ran", "ttest": "ran"}
    text = capsys.readouterr().out
    assert "ingest: runs (input d.npz changed)" in text
    assert "ttest: runs (earlier step 'ingest' ran)" in text
    assert fsdask.open_dataset(out / "d.zarr")["X"].shape == (20, 40)
    # the store rewritten behind the pipeline's back with other data → the selections re-run
    fsdask.ingest(
        str(night.parent / "d.npz"), str(out / "d.zarr"), overwrite=True
    )  # same data: same fingerprint
    assert set(run_pipeline(night).values()) == {"skipped"}
    _data(night.parent / "other.npz", rng, n=18)
    fsdask.ingest(str(night.parent / "other.npz"), str(out / "d.zarr"), overwrite=True)
    capsys.readouterr()
    assert run_pipeline(night) == {"ingest": "skipped", "ttest": "ran"}
    assert "ttest: runs (input out/d.zarr changed)" in capsys.readouterr().out
    # another fsdask version → runs
    monkeypatch.setattr(fsdask, "__version__", "0.1.0.post1")
    run_pipeline(night)
    assert "fsdask version changed (" in capsys.readouterr().out


def test_foreign_store_fingerprint_from_metadata(tmp_path, s3, rng):
    """A Zarr store fsdask did not write: fingerprinted from its chunk listing (mtime/ETag), locally and on S3."""
    import zarr

    local = str(tmp_path / "foreign.zarr")
    z = zarr.create_array(local, shape=(4, 6), chunks=(4, 3), dtype="f4")
    z[:] = 1.0
    a = fingerprint(local)
    assert a["kind"] == "listing" and a["files"] >= 3 and same(a, fingerprint(local))
    z[:, :3] = 2.0
    assert not same(a, fingerprint(local))
    bucket, so = s3
    import s3fs

    fs = s3fs.S3FileSystem(**so)
    fs.put(local, f"{bucket}/foreign.zarr", recursive=True)
    r1 = fingerprint(f"{bucket}/foreign.zarr", so)
    assert r1["kind"] == "listing" and same(r1, fingerprint(f"{bucket}/foreign.zarr", so))
    fs.pipe(f"{bucket}/foreign.zarr/c/0/1", b"different chunk bytes")
    assert not same(r1, fingerprint(f"{bucket}/foreign.zarr", so))
    assert fingerprint(f"{bucket}/nothing.zarr", so) is None
    # an fsdask store: its recorded content fingerprint, nothing listed
    _data(tmp_path / "d.npz", rng, n=4, p=6)
    fsdask.ingest(str(tmp_path / "d.npz"), str(tmp_path / "mine.zarr"))
    assert fingerprint(str(tmp_path / "mine.zarr"))["kind"] == "fsdask-store"


QALPHA = {
    "name": "qalpha",
    "select": {
        "url": "out/d.zarr",
        "method": "qalpha",
        "output": "out/q.zarr",
        "param": {"k": 2, "n_features_to_select": 5, "max_iter": 4},
    },
}


def test_log_json_and_history(night, tmp_path, capsys):
    from fsdask.cli import main

    cfg = yaml.safe_load(night.read_text())
    night.write_text(yaml.safe_dump(dict(cfg, steps=cfg["steps"] + [QALPHA])))
    log = tmp_path / "logs" / "run.jsonl"
    p = _cli("run", night, "--log-json", log)
    assert p.returncode == 0, p.stderr
    # stderr has the fits' own throttled progress lines (as without --log-json), never the
    # log records that --log-json captures
    said = [line for line in p.stderr.splitlines() if "iteration" in line]
    assert all(line.startswith("fsdask: ") for line in said), said
    ev = _events(log)
    assert [e["event"] for e in ev][0] == "run_start" and ev[-1] == {
        **ev[-1],
        "event": "run_end",
        "exit_code": 0,
    }
    starts = [e for e in ev if e["event"] == "step_start"]
    assert [e["step"] for e in starts] == ["ingest", "ttest", "qalpha"] and starts[0][
        "reasons"
    ] == ["not run before"]
    its = [e for e in ev if e["event"] == "iteration"]
    assert its and all(e["step"] == "qalpha" for e in its)
    assert all(isinstance(e["objective"], float) for e in its) and "delta" in its[-1]
    assert [e["iteration"] for e in its] == list(range(1, len(its) + 1))
    run_pipeline(night, log_json=log)
    ev2 = [e for e in _events(log) if e["run"] != ev[0]["run"]]
    assert [e["event"] for e in ev2] == ["run_start"] + ["step_skip"] * 3 + ["run_end"]
    # a failing run logs the error with its exit code
    cfg = yaml.safe_load(night.read_text())
    cfg["steps"][1]["select"]["param"]["n_features_to_select"] = -1
    night.write_text(yaml.safe_dump(cfg))
    with pytest.raises(StepFailed):
        run_pipeline(night, log_json=log)
    last = _events(log)[-2:]
    assert last[0]["event"] == "error" and last[0]["exit_code"] == 2 and last[0]["step"] == "ttest"
    assert last[1]["event"] == "run_end" and last[1]["exit_code"] == 2

    # history: 3 runs × 3 steps appended; the table and the report
    hist = tmp_path / "pipe.state.history.jsonl"
    recs = [json.loads(x) for x in hist.read_text().splitlines()]
    assert [r["status"] for r in recs if r["step"] == "ttest"] == ["ran", "skipped"]
    sel = [r for r in recs if r["step"] == "qalpha"]
    assert len(sel[0]["top_k"]) == 5 and sel[0]["n_selected"] == 5 and sel[0]["n_features"] == 40
    capsys.readouterr()
    assert main(["history", str(tmp_path / "pipe.state.json")]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert (
        len(lines) == 2 + 4 and "1.000" in lines[-1]
    )  # 2 runs × 2 selecting steps; unchanged → Jaccard 1
    assert ", ".join(sel[0]["top_k"][:5]) in text
    assert main(["report", "--history", str(night), "--out", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "history.html").read_text()
    assert "did not change" in page and (tmp_path / "rep" / "index.html").exists()
    for png in ("history_selected.png", "history_stability.png", "history_runtime.png"):
        assert (tmp_path / "rep" / png).stat().st_size > 1000


def test_stability_against_previous_night():
    from fsdask.api.runs import with_stability

    base = {"format": "fsdask-history/1", "step": "s", "n_features": 10, "n_selected": 3}
    recs = [
        dict(base, run="a", top_k=["1", "2", "3"]),
        dict(base, run="b", top_k=["1", "2", "3"]),
        dict(base, run="c", top_k=["1", "2", "9"]),
        {**base, "run": "c", "step": "ingest", "top_k": None},
    ]
    rows = with_stability(recs)
    assert [r["jaccard"] for r in rows] == [None, 1.0, 0.5]
    assert rows[1]["kuncheva"] == 1.0
    assert rows[2]["kuncheva"] == pytest.approx((2 * 10 - 9) / (3 * 7))


HOLDER = """
import sys, time
from fsdask.pipeline.lock import RunLock
RunLock(sys.argv[1], "holder").acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_lock_second_run_exits_75_and_stale_lock_is_taken_over(night, tmp_path, capsys):
    state = tmp_path / "pipe.state.json"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        p = _cli("run", night, "--log-json", tmp_path / "l.jsonl")
        assert p.returncode == 75, p.stderr
        assert f"another run of this pipeline holds {state}.lock: pid {holder.pid}" in p.stderr
        assert "started 20" in p.stderr
        assert not state.exists() and not (tmp_path / "out").exists()  # touched nothing
        assert _events(tmp_path / "l.jsonl")[-1]["exit_code"] == 75
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the killed holder left its lock: stale (pid gone) → taken over with a message
    assert (tmp_path / "pipe.state.json.lock").exists()
    capsys.readouterr()
    assert set(run_pipeline(night).values()) == {"ran"}
    assert f"took over a stale lock {state}.lock: pid {holder.pid}" in capsys.readouterr().out
    assert not (tmp_path / "pipe.state.json.lock").exists()


def test_lock_of_another_host_and_foreign_lock_file(night, tmp_path, monkeypatch):
    lock = tmp_path / "pipe.state.json.lock"
    info = {
        "what": "fsdask run lock",
        "pid": 1,
        "host": "node-elsewhere",
        "started": "2026-01-01T00:00:00+00:00",
        "token": "x",
    }
    lock.write_text(json.dumps(info))
    with pytest.raises(StepFailed, match="pid 1 on node-elsewhere, started 2026-01-01") as err:
        run_pipeline(night)  # heartbeat is recent: the other host may still be running
    assert err.value.exit_code == 75 and not (tmp_path / "out").exists()
    old = time.time() - 3600
    os.utime(lock, (old, old))
    monkeypatch.setenv("FSDASK_LOCK_STALE_SECONDS", "1800")
    lines = []
    run_pipeline(
        night, out=type("W", (), {"write": lambda s, t: lines.append(t), "flush": lambda s: None})()
    )
    assert any("took over a stale lock" in t and "node-elsewhere" in t for t in lines)
    # a file at the lock's path that fsdask did not write: refused, kept
    lock.write_text("my notes\n")
    p = _cli("run", night)
    assert (
        p.returncode == 2 and "is not an fsdask run lock" in p.stderr and "move it away" in p.stderr
    )
    assert lock.read_text() == "my notes\n"


def test_damaged_foreign_and_newer_state(night, tmp_path, capsys):
    state = tmp_path / "pipe.state.json"
    run_pipeline(night)
    good = state.read_text()
    stamp = os.stat(tmp_path / "out" / "t.zarr" / "zarr.json").st_mtime_ns
    state.write_text(good[: len(good) // 2])  # truncated
    with pytest.raises(ParameterError, match=f"{state}: the pipeline state is damaged.*--restart"):
        run_pipeline(night)
    assert (
        os.stat(tmp_path / "out" / "t.zarr" / "zarr.json").st_mtime_ns == stamp
    )  # nothing touched
    run_pipeline(night, restart=True)
    assert "set the state file aside as" in capsys.readouterr().out
    assert [f for f in os.listdir(tmp_path) if ".corrupt-" in f]
    newer = json.loads(state.read_text())
    newer["fsdask_version"] = "99.0"
    state.write_text(json.dumps(newer))
    with pytest.raises(ParameterError, match="written by fsdask 99.0.*newer than this fsdask"):
        run_pipeline(night)
    other = dict(newer, fsdask_version=fsdask.__version__, config=str(tmp_path / "another.yaml"))
    state.write_text(json.dumps(other))
    with pytest.raises(ParameterError, match="the state of another pipeline"):
        run_pipeline(night)
    state.write_text(json.dumps(dict(other, config=str(night))))
    # a truncated history: named, with --restart as the way out
    hist = tmp_path / "pipe.state.history.jsonl"
    hist.write_text(hist.read_text() + '{"format": "fsdask-hist')
    with pytest.raises(
        ParameterError, match=r"history.jsonl: line \d+ is not a history record.*--restart"
    ):
        run_pipeline(night)
    assert set(run_pipeline(night, restart=True).values()) == {"ran"}
    assert [f for f in os.listdir(tmp_path) if ".history.jsonl.corrupt-" in f]


def test_removed_step_and_config_typos(night, tmp_path):
    run_pipeline(night)
    cfg = yaml.safe_load(night.read_text())
    # the ingest step is removed and its store is gone: named, before anything runs
    import shutil

    shutil.rmtree(tmp_path / "out" / "d.zarr")
    night.write_text(yaml.safe_dump(dict(cfg, steps=cfg["steps"][1:])))
    with pytest.raises(
        ParameterError,
        match=r"input out/d.zarr is missing; it was written by step 'ingest', "
        r"which is no longer in",
    ):
        run_pipeline(night)
    night.write_text(yaml.safe_dump(dict(cfg, schedular="local:2")))
    with pytest.raises(ParameterError, match="unknown top-level key\\(s\\) 'schedular'"):
        run_pipeline(night)
    bad = dict(cfg)
    bad["steps"] = cfg["steps"] + [dict(cfg["steps"][1])]
    night.write_text(yaml.safe_dump(bad))
    with pytest.raises(ParameterError, match="two steps are named 'ttest'"):
        run_pipeline(night)


def test_sigterm_ends_the_run_cleanly(tmp_path, rng):
    """SIGTERM (a SLURM time limit, a Kubernetes deadline) mid-fit: exit 130 logged, lock released."""
    _data(tmp_path / "d.npz", rng)
    (tmp_path / "p.yaml").write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {"name": "ingest", "ingest": {"source": "d.npz", "url": "d.zarr"}},
                    {
                        "name": "endless",
                        "select": {
                            "url": "d.zarr",
                            "method": "qalpha",
                            "output": "q.zarr",  # tol 0: never converges
                            "param": {"k": 2, "tol": 0, "max_iter": 10**8},
                        },
                    },
                ]
            }
        )
    )
    log = tmp_path / "run.jsonl"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fsdask.cli",
            "run",
            str(tmp_path / "p.yaml"),
            "--log-json",
            str(log),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for _ in range(1200):
            if log.exists() and any(e["event"] == "iteration" for e in _events(log)):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert (tmp_path / "p.state.json.lock").exists()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in err
    ev = _events(log)
    assert ev[-2]["event"] == "error" and ev[-2]["step"] == "endless" and ev[-1]["exit_code"] == 130
    assert not (tmp_path / "p.state.json.lock").exists() and not (tmp_path / "q.zarr").exists()
    assert list(json.loads((tmp_path / "p.state.json").read_text())["steps"]) == ["ingest"]


def test_iteration_lines_of_the_methods_parse():
    from fsdask.pipeline.logjson import parse_iteration

    assert parse_iteration("logo: iteration 3  ‖Δw‖=0.0125  objective=12.5  active=40") == {
        "iteration": 3,
        "method": "logo",
        "delta": 0.0125,
        "objective": 12.5,
    }
    assert parse_iteration("Q-α iteration 7: objective 3.25, ‖Δα‖ 1e-05") == {
        "iteration": 7,
        "method": "Q-α",
        "objective": 3.25,
        "delta": 1e-05,
    }
    assert parse_iteration("cpfs: iteration 2: objective=1.5, change=0.25 (0.1 s)")["delta"] == 0.25
    assert parse_iteration("cpfs λ=0.5: 3 active rows") is None
