"""The pipeline's part of the issue-38 catalogue: ``fsdask run`` on bad configs, bad
bookkeeping paths, half-written locks and inputs changed behind the fingerprint's back.

BAD cases end in one line and exit 2 (or an fsdask error with a one-line message) before
any step runs, nothing already written lost; GOOD cases are valid inputs handled right.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time

import numpy as np
import pytest
import yaml

import fsdask
from fsdask.cli import main
from fsdask.errors import FsdaskError
from fsdask.pipeline import run_pipeline

CASES: list[tuple[str, str]] = []


def _data(path, seed=0, n=16, p=40):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = np.repeat([0, 1], n // 2)
    X[y == 1, :2] += 3
    np.savez(path, X=X, y=y, feature_names=np.array([f"g{j}" for j in range(p)]))


def _config():
    return {
        "scheduler": "threads",
        "steps": [
            {"name": "ingest", "ingest": {"source": "d.npz", "url": "out/d.zarr"}},
            {
                "name": "ttest",
                "select": {
                    "url": "out/d.zarr",
                    "method": "ttest",
                    "output": "out/t.zarr",
                    "param": {"n_features_to_select": 2},
                },
            },
            {
                "name": "snr",
                "select": {
                    "url": "out/d.zarr",
                    "method": "snr",
                    "output": "out/s.zarr",
                    "param": {"n_features_to_select": 3},
                },
            },
        ],
    }


@pytest.fixture
def project(tmp_path):
    _data(tmp_path / "d.npz")
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(_config()))
    return path


def _write(path, cfg):
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run_cli(capsys, *argv):
    capsys.readouterr()
    code = main(["run", *map(str, argv)])
    return code, capsys.readouterr().err


def _nothing_ran(tmp_path):
    state = tmp_path / "pipe.state.json"
    assert not (tmp_path / "out").exists()
    assert not state.exists() or json.loads(state.read_text())["steps"] == {}


# ---- item 1: every step checked before any runs --------------------------------------------
def _step(cfg, i):
    return next(iter(v for k, v in cfg["steps"][i].items() if k != "name"))


def _set(i, **options):
    def change(cfg):
        _step(cfg, i).update(options)

    return change


def _rename_key(i, old, new):
    def change(cfg):
        opts = _step(cfg, i)
        opts[new] = opts.pop(old)

    return change


def _both_param_spellings(cfg):
    _step(cfg, 2)["params"] = {"n_features_to_select": 4}


def _step_level_typo(cfg):
    cfg["steps"][2]["nmae"] = cfg["steps"][2].pop("name")


def _param_beside_the_command(cfg):
    cfg["steps"][2]["params"] = _step(cfg, 2).pop("param")


def _fingerprint_typo(cfg):
    cfg["steps"][0]["fingerprint"] = "contents"


def _ingest_onto_own_source(cfg):
    cfg["steps"].append({"name": "again", "ingest": {"source": "d.npz", "url": "d.npz"}})


CONFIG_BAD = [
    (
        "step3-unknown-method",
        _set(2, method="snrr"),
        "unknown method 'snrr' (did you mean 'snr'?)",
    ),
    (
        "step3-bad-param-value",
        _set(2, param={"n_features_to_select": -1}),
        "'n_features_to_select'",
    ),
    (
        "step3-param-name-typo",
        _set(2, param={"n_feature_to_select": 3}),
        "no parameter 'n_feature_to_select' (did you mean 'n_features_to_select'?)",
    ),
    (
        "step3-bad-param-type",
        _set(2, param={"n_features_to_select": "many"}),
        "'n_features_to_select'",
    ),
    ("step3-key-typo-parm", _rename_key(2, "param", "parm"), "(did you mean 'param"),
    ("step3-key-typo-outptu", _rename_key(2, "output", "outptu"), "(did you mean 'output'?)"),
    ("step3-param-and-params", _both_param_spellings, "set the same option"),
    ("step3-step-level-key-typo", _step_level_typo, "'nmae' (did you mean 'name'?)"),
    ("step1-fingerprint-typo", _fingerprint_typo, "(did you mean 'content'?)"),
    (
        "step3-params-beside-the-command",
        _param_beside_the_command,
        "'params' is an option of select: put it inside `select: {…}`",
    ),
    (
        "steps2-3-same-output",
        _set(2, output="out/t.zarr"),
        "step 2 (ttest) and step 3 (snr) both write out/t.zarr",
    ),
    (
        "steps2-3-same-output-spelled-differently",
        _set(2, output="./out//t.zarr/"),
        "step 2 (ttest) and step 3 (snr) both write",
    ),
    ("step3-output-inside-step2-output", _set(2, output="out/t.zarr/s.zarr"), "both write"),
    ("step3-csv-is-its-output", _set(2, csv="out/s.zarr"), "step 3 (snr) writes both"),
    ("step3-csv-is-step2-output", _set(2, csv="out/t.zarr"), "both write"),
    (
        "step3-writes-step1-input",
        _set(2, output="d.npz"),
        "step 3 (snr) writes d.npz, which is an input of step 1 (ingest)",
    ),
    (
        "step3-csv-onto-the-state-file",
        _set(2, csv="pipe.state.json"),
        "step 3 (snr) writes pipe.state.json, where the run keeps its state file",
    ),
    (
        "step3-csv-onto-the-run-history",
        _set(2, csv="pipe.state.history.jsonl"),
        "where the run keeps its run history",
    ),
    (
        "step4-ingest-onto-its-own-source",
        _ingest_onto_own_source,
        "step 4 (again) writes d.npz, which is its own input",
    ),
]
CASES += [(c[0], "BAD") for c in CONFIG_BAD]


@pytest.mark.parametrize("case, change, message", CONFIG_BAD, ids=[c[0] for c in CONFIG_BAD])
def test_bad_step_refused_before_any_step_runs(project, capsys, case, change, message):
    cfg = _config()
    change(cfg)
    _write(project, cfg)
    with pytest.raises(FsdaskError) as info:
        run_pipeline(project)
    text = str(info.value)
    assert message in text and "\n" not in text, text
    _nothing_ran(project.parent)
    code, err = _run_cli(capsys, project)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    # nothing ran, nothing left behind: no state, history or lock
    assert sorted(os.listdir(project.parent)) == ["d.npz", "pipe.yaml"]


def test_a_chain_is_allowed_and_the_params_spelling_works(project):
    """An output read by a later step is the normal chain; ``params:`` is ``param:``."""
    cfg = _config()
    _rename_key(2, "param", "params")(cfg)
    _write(project, cfg)
    assert set(run_pipeline(project).values()) == {"ran"}
    assert int(fsdask.open_result(project.parent / "out" / "s.zarr")["selected"].sum()) == 3


# ---- item 2: the run lock ---------------------------------------------------------------------
def _full_disk_fdopen(real):
    """``os.fdopen`` whose files under a ``.lock`` path take a few bytes, then the disk is full."""

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            self.fh.write(data[:7])
            self.fh.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    def fdopen(fd, *args, **kwargs):
        fh = real(fd, *args, **kwargs)
        return Full(fh) if ".lock" in os.readlink(f"/proc/self/fd/{fd}") else fh

    return fdopen


CASES += [("lock-write-disk-full", "BAD")]


def test_disk_full_while_writing_the_lock_leaves_no_lock(project, capsys, monkeypatch):
    lock = project.parent / "pipe.state.json.lock"
    with monkeypatch.context() as m:
        m.setattr(os, "fdopen", _full_disk_fdopen(os.fdopen))
        code, err = _run_cli(capsys, project)
    assert code == 2 and err.count("\n") == 1, err
    assert "No space left on device" in err and "pipe.state.json.lock" in err
    assert not lock.exists() and not [p for p in os.listdir(project.parent) if ".lock" in p]
    _nothing_ran(project.parent)
    # the next night is not blocked
    assert set(run_pipeline(project).values()) == {"ran"}


CASES += [("lock-write-file-size-limit", "BAD")]


def test_a_real_short_write_of_the_lock_leaves_no_lock(project):
    """The same with a real failing write: a file-size limit of 64 bytes (RLIMIT_FSIZE) makes
    the lock's write stop part-way with EFBIG, as a full disk stops it with ENOSPC."""
    import resource
    import signal
    import subprocess
    import sys

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    p = subprocess.run(
        [sys.executable, "-m", "fsdask.cli", "run", str(project)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        timeout=300,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "run lock (File too large)" in p.stderr
    assert sorted(os.listdir(project.parent)) == ["d.npz", "pipe.yaml"]
    assert set(run_pipeline(project).values()) == {"ran"}  # the next night is not blocked


def _old(path, seconds=3600):
    t = time.time() - seconds
    os.utime(path, (t, t))


def _complete_lock(pid):
    return json.dumps(
        {
            "what": "fsdask run lock",
            "pid": pid,
            "host": socket.gethostname(),
            "pid_start": None,
            "config": "x",
            "token": "t",
            "started": "2026-01-01T00:00:00+00:00",
        }
    ).encode()


def _dead_pid():
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


LOCK_TAKEN_OVER = [
    ("lock-0-bytes-old", lambda: b"", True),
    ("lock-nul-filled-old", lambda: b"\0" * 180, True),
    ("lock-truncated-old", lambda: _complete_lock(4242)[:20], True),
    ("lock-truncated-dead-pid-fresh", lambda: _complete_lock(_dead_pid())[:90], False),
]
CASES += [(c[0], "GOOD") for c in LOCK_TAKEN_OVER]


@pytest.mark.parametrize("case, content, old", LOCK_TAKEN_OVER, ids=[c[0] for c in LOCK_TAKEN_OVER])
def test_incomplete_lock_of_no_live_run_is_taken_over(project, capsys, case, content, old):
    lock = project.parent / "pipe.state.json.lock"
    lock.write_bytes(content())
    if old:
        _old(lock)
    capsys.readouterr()
    assert set(run_pipeline(project).values()) == {"ran"}
    assert "took over a stale lock" in capsys.readouterr().out
    assert not lock.exists()


CASES += [("lock-unreadable-untouched-for-long", "GOOD")]


def test_unreadable_lock_untouched_for_long_is_taken_over(project, capsys, monkeypatch):
    """A lock of another user this one may not read (root reads every file, so the refusal
    to read is simulated in the lock module only), its heartbeat an hour old."""
    import builtins

    import fsdask.pipeline.lock

    lock = project.parent / "pipe.state.json.lock"
    theirs = _complete_lock(4242)
    lock.write_bytes(theirs)

    def no_read(path, mode="r", *args, **kwargs):
        # that file (also once renamed aside) may not be read; this run's own lock may
        if "r" in mode and os.path.isfile(path):
            with builtins.open(path, "rb") as fh:
                if fh.read() == theirs:
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return builtins.open(path, mode, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(fsdask.pipeline.lock, "open", no_read, raising=False)
        code, err = _run_cli(capsys, project)  # untouched for a second: not taken over
        assert code == 2 and "cannot read the run lock" in err and lock.exists(), err
        _old(lock)
        capsys.readouterr()
        assert set(run_pipeline(project).values()) == {"ran"}
    assert "an unreadable lock" in capsys.readouterr().out and not lock.exists()


CASES += [("lock-0-bytes-fresh", "GOOD")]


def test_fresh_incomplete_lock_means_try_later(project, capsys):
    """A lock being written this second may be another run's: exit 75, kept."""
    lock = project.parent / "pipe.state.json.lock"
    lock.write_bytes(b"")
    code, err = _run_cli(capsys, project)
    assert code == 75 and err.count("\n") == 1 and "incomplete run lock" in err, err
    assert lock.exists() and lock.read_bytes() == b""
    _nothing_ran(project.parent)


# ---- item 3: bookkeeping paths checked before the first step ----------------------------------
def _history_symlink_to_nowhere(tmp):
    # root ignores permission bits, so a read-only history file does not stop root's write;
    # a history path that cannot be created — a symbolic link into a folder that does not
    # exist (an unmounted share) — fails the same way for every user
    (tmp / "pipe.state.history.jsonl").symlink_to(tmp / "unmounted" / "history.jsonl")
    return []


def _log_json_onto_directory(tmp):
    (tmp / "logs").mkdir()
    return ["--log-json", tmp / "logs"]


def _log_json_under_a_file(tmp):
    (tmp / "notes").write_text("mine\n")
    return ["--log-json", tmp / "notes" / "run.jsonl"]


def _state(**fields):
    def make(tmp):
        base = {"format": "fsdask-pipeline-state", "format_version": 2, "steps": {}}
        (tmp / "pipe.state.json").write_text(json.dumps({**base, **fields}))
        return []

    return make


BOOKKEEPING_BAD = [
    ("history-symlink-into-missing-folder", _history_symlink_to_nowhere, "run history"),
    ("log-json-onto-a-directory", _log_json_onto_directory, "cannot write the JSON log"),
    ("log-json-under-a-file", _log_json_under_a_file, "cannot write the JSON log"),
    (
        "state-step-inputs-a-list",
        _state(steps={"ttest": {"digest": "x", "inputs": ["out/d.zarr"]}}),
        "steps.ttest.inputs is list",
    ),
    (
        "state-step-digest-a-number",
        _state(steps={"ingest": {"digest": 5, "inputs": {}}}),
        "steps.ingest.digest is int",
    ),
    ("state-format-version-text", _state(format_version="two"), "format_version is str"),
    ("state-config-a-number", _state(config=5), "config is int"),
    ("state-outputs-a-string", _state(steps={"ttest": {"outputs": "x"}}), "outputs is str"),
]
CASES += [(c[0], "BAD") for c in BOOKKEEPING_BAD]


@pytest.mark.parametrize(
    "case, make, message", BOOKKEEPING_BAD, ids=[c[0] for c in BOOKKEEPING_BAD]
)
def test_bookkeeping_path_refused_before_any_step(project, capsys, case, make, message):
    tmp = project.parent
    extra = make(tmp)
    before = {p.name: p.read_bytes() for p in tmp.iterdir() if p.is_file()}
    code, err = _run_cli(capsys, project, *extra)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp / "out").exists()  # no step ran
    assert {p.name: p.read_bytes() for p in tmp.iterdir() if p.is_file()} == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files; see the symlink case")
def test_read_only_history_refused_before_any_step(project, capsys):
    hist = project.parent / "pipe.state.history.jsonl"
    hist.write_text("")
    hist.chmod(0o444)
    code, err = _run_cli(capsys, project)
    assert code == 2 and "run history" in err and not (project.parent / "out").exists(), err


def test_log_json_into_a_missing_folder_is_made(project, capsys):
    """A guard, not a catalogue case: the folder is made (as for the state file)."""
    log = project.parent / "logs" / "night" / "run.jsonl"
    code, err = _run_cli(capsys, project, "--log-json", log)
    assert code == 0, err
    assert [json.loads(x)["event"] for x in log.read_text().splitlines()][-1] == "run_end"


# ---- item 4: fingerprint: content --------------------------------------------------------------
def _same_size_same_mtime_edit(path, seed):
    st = os.stat(path)
    _data(path, seed=seed)
    assert os.stat(path).st_size == st.st_size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


CASES += [("npz-edited-mtime-restored-fingerprint-content", "GOOD")]


def test_content_fingerprint_sees_an_edit_with_the_mtime_restored(project, capsys):
    cfg = _config()
    cfg["steps"] = cfg["steps"][:2]
    _write(project, cfg)
    npz = project.parent / "d.npz"
    assert set(run_pipeline(project).values()) == {"ran"}
    # the documented rule: by default (size, mtime) stand for the content — skipped
    _same_size_same_mtime_edit(npz, seed=1)
    assert set(run_pipeline(project).values()) == {"skipped"}
    # fingerprint: content reads it: runs (once for the changed rule, then only on change)
    cfg["steps"][0]["fingerprint"] = "content"
    _write(project, cfg)
    assert set(run_pipeline(project).values()) == {"ran"}
    assert set(run_pipeline(project).values()) == {"skipped"}
    capsys.readouterr()
    _same_size_same_mtime_edit(npz, seed=2)
    assert run_pipeline(project) == {"ingest": "ran", "ttest": "ran"}
    assert "ingest: runs (input d.npz changed)" in capsys.readouterr().out


CASES += [("foreign-zarr-chunk-edited-mtime-restored-fingerprint-content", "GOOD")]


def test_content_fingerprint_of_a_foreign_store(tmp_path, capsys):
    import xarray as xr

    rng = np.random.default_rng(0)
    X = rng.normal(size=(16, 12)).astype(np.float32)
    y = np.repeat([0, 1], 8)
    store = tmp_path / "foreign.zarr"
    xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y)}).to_zarr(
        store, encoding={"X": {"compressors": None}}, consolidated=False
    )  # raw chunks: an edit in place keeps every file's size
    cfg = {
        "scheduler": "threads",
        "fingerprint": "content",
        "steps": [
            {
                "name": "ttest",
                "select": {"url": "foreign.zarr", "method": "ttest", "output": "t.zarr"},
            }
        ],
    }
    path = _write(tmp_path / "pipe.yaml", cfg)
    assert run_pipeline(path) == {"ttest": "ran"}
    assert run_pipeline(path) == {"ttest": "skipped"}
    chunk = max(
        (p for p in (store / "X").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size
    )
    st, values = chunk.stat(), np.frombuffer(chunk.read_bytes(), "<f4").copy()
    values[0] += 5.0  # one value changed in place, the file's size and mtime kept
    chunk.write_bytes(values.tobytes())
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns))
    capsys.readouterr()
    assert run_pipeline(path) == {"ttest": "ran"}
    assert "input foreign.zarr changed" in capsys.readouterr().out


CASES += [("fsdask-store-chunk-edited-in-place", "GOOD"), ("s3-store-content", "GOOD")]


def test_content_fingerprint_reads_what_the_stat_rule_trusts(tmp_path, s3):
    """An fsdask store's recorded fingerprint does not see a chunk edited behind fsdask's
    back (documented); ``content`` does — locally and on object storage."""
    from fsdask.pipeline.fingerprint import fingerprint, same

    _data(tmp_path / "d.npz", n=8, p=6)
    store = tmp_path / "mine.zarr"
    fsdask.ingest(str(tmp_path / "d.npz"), str(store))
    stat, content = fingerprint(str(store)), fingerprint(str(store), mode="content")
    assert stat["kind"] == "fsdask-store" and content["kind"] == "content"
    assert same(content, fingerprint(str(store), mode="content"))
    chunk = next(p for p in (store / "X").rglob("*") if p.is_file() and p.name != "zarr.json")
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    chunk.write_bytes(bytes(raw))
    assert same(stat, fingerprint(str(store)))  # the stat rule: unchanged
    assert not same(content, fingerprint(str(store), mode="content"))
    assert fingerprint(str(tmp_path / "none.zarr"), mode="content") is None

    import s3fs

    bucket, so = s3
    fs = s3fs.S3FileSystem(**so)
    fs.put(str(store), f"{bucket}/mine.zarr", recursive=True)
    remote = fingerprint(f"{bucket}/mine.zarr", so, mode="content")
    assert same(remote, fingerprint(str(store), mode="content"))  # the same bytes, the same digest
    assert same(remote, fingerprint(f"{bucket}/mine.zarr", so, mode="content"))
    fs.pipe(f"{bucket}/mine.zarr/{chunk.relative_to(store).as_posix()}", b"other bytes")
    assert not same(remote, fingerprint(f"{bucket}/mine.zarr", so, mode="content"))
    assert fingerprint(f"{bucket}/nothing.zarr", so, mode="content") is None


CASES += [("history-disk-full-after-a-step", "BAD")]


def test_history_that_fills_the_disk_mid_run_ends_in_one_line(project, capsys, monkeypatch):
    import fsdask.api.runs

    def full(path, record):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(fsdask.api.runs, "append", full)
        code, err = _run_cli(capsys, project)
    assert code == 2 and err.count("\n") == 1 and "cannot append to the run history" in err, err
    state = json.loads((project.parent / "pipe.state.json").read_text())
    assert list(state["steps"]) == ["ingest"]  # the step that ran is recorded, its output kept
    assert (project.parent / "out" / "d.zarr").exists()
    assert run_pipeline(project) == {"ingest": "skipped", "ttest": "ran", "snr": "ran"}
