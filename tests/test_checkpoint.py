"""Checkpoints inside iterative fits (fsdask.checkpoint, ``fsdask select --checkpoint-every``).

A real ``fsdask select`` subprocess is killed with SIGKILL once its checkpoint shows
iteration ≥ k; the same command run again continues from the checkpoint and must give the
result of an uninterrupted run.  Checkpoints of other data, options or fsdask versions are
refused, ``--restart`` ignores them, a damaged one is named in a one-line error.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr

import fsdask
from fsdask import checkpoint
from fsdask.cli import main

QALPHA = [
    "--method",
    "qalpha",
    "--param",
    "k=3",
    "--param",
    "max_iter=10",
    "--param",
    "tol=0",
    "--param",
    "n_features_to_select=10",
]
LOGO = [
    "--method",
    "logo",
    "--param",
    "max_iter=40",
    "--param",
    "theta=0.000000001",
    "--param",
    "n_features_to_select=10",
]
CPFS = [
    "--method",
    "cpfs",
    "--param",
    "n_lambdas=24",
    "--param",
    "lambda_min_ratio=0.85",
    "--param",
    "max_features=null",
]  # the path: 24 λ from λ_max down to 0.85 λ_max
SHORT = [*QALPHA, "--param", "max_iter=4"]  # for the refusals: a finished fit's checkpoint suffices
#: options, max_iter (enough iterations left after k = 3 that the kill lands mid-fit)
METHODS = {"qalpha": (QALPHA, 10), "logo": (LOGO, 40), "cpfs": (CPFS, 24)}


def make_store(path, seed=0, n=40, p=600):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = np.repeat([0, 1], n // 2)
    X[y == 1, :6] += 1.0
    fsdask.write_dataset(
        xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y)}), path, block=p
    )
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("ckpt") / "d.zarr")


def select(store, out, opts, *extra):
    return main(
        [
            "select",
            str(store),
            *opts,
            "-o",
            str(out),
            "--scheduler",
            "sync",
            "--no-progress",
            "--top",
            "0",
            *extra,
        ]
    )


def same_result(a, b):
    ra, rb = fsdask.open_result(a), fsdask.open_result(b)
    np.testing.assert_allclose(ra["weight"].values, rb["weight"].values, rtol=0, atol=1e-12)
    assert (ra["rank"].values == rb["rank"].values).all()
    assert (ra["selected"].values == rb["selected"].values).all()
    assert ra.attrs["n_iter"] == rb.attrs["n_iter"]


def kill_at(store, out, opts, k, timeout=60.0, argv=None):
    """Start ``fsdask select`` (or ``argv``) in a subprocess; SIGKILL it once the checkpoint of
    ``out`` is at iteration ≥ k."""
    ck = f"{out}.fsdask-checkpoint"
    argv = argv or [
        "select",
        str(store),
        *opts,
        "-o",
        str(out),
        "--scheduler",
        "sync",
        "--no-progress",
        "--checkpoint-every",
        "1",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsdask.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < timeout:
            if os.path.exists(ck) and max(checkpoint.peek(ck).values()) >= k:
                proc.send_signal(signal.SIGKILL)
                break
            if proc.poll() is not None:
                raise AssertionError(f"the fit ended before iteration {k}: {proc.stderr.read()}")
            time.sleep(0.01)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    return checkpoint.peek(ck)


@pytest.mark.parametrize("method", list(METHODS))
def test_killed_fit_resumes_to_the_uninterrupted_result(method, store, tmp_path, caplog):
    opts, max_iter = METHODS[method]
    assert select(store, tmp_path / "ref.zarr", opts) == 0
    reached = kill_at(store, tmp_path / "out.zarr", opts, k=3)
    assert 3 <= max(reached.values()) < max_iter and not (tmp_path / "out.zarr").exists()
    with caplog.at_level(logging.WARNING, logger="fsdask"):
        assert select(store, tmp_path / "out.zarr", opts, "--resume") == 0
    assert f"at iteration {max(reached.values())}" in caplog.text  # it continued, not started over
    same_result(tmp_path / "ref.zarr", tmp_path / "out.zarr")
    assert not os.path.exists(
        f"{tmp_path / 'out.zarr'}.fsdask-checkpoint"
    )  # removed once published


def test_pipeline_rerun_continues_the_killed_fit(store, tmp_path, caplog):
    import yaml

    from fsdask.pipeline import run_pipeline

    params = {"max_iter": 40, "theta": 1e-9, "n_features_to_select": 10}
    step = {
        "url": str(store),
        "method": "logo",
        "param": params,
        "output": "logo.zarr",
        "scheduler": "sync",
        "no_progress": True,
        "top": 0,
    }
    cfg = tmp_path / "night.yaml"
    cfg.write_text(
        yaml.safe_dump({"steps": [{"name": "logo", "select": {**step, "checkpoint_every": 1}}]})
    )
    reached = kill_at(store, tmp_path / "logo.zarr", None, k=3, argv=["run", str(cfg)])
    assert 3 <= reached["logo"] < 40
    with caplog.at_level(logging.WARNING, logger="fsdask"):
        assert run_pipeline(cfg) == {"logo": "ran"}
    assert (
        f"resuming logo from the checkpoint {tmp_path / 'logo.zarr'}.fsdask-checkpoint at iteration "
        f"{reached['logo']}" in caplog.text
    )
    ref = tmp_path / "ref.yaml"
    ref.write_text(
        yaml.safe_dump({"steps": [{"name": "ref", "select": {**step, "output": "ref.zarr"}}]})
    )
    run_pipeline(ref)
    same_result(tmp_path / "ref.zarr", tmp_path / "logo.zarr")
    assert not os.path.exists(tmp_path / "logo.zarr.fsdask-checkpoint")


def left_checkpoint(store, out, opts=SHORT):
    """A finished fit's checkpoint at ``out``'s place (the Python API leaves it; the CLI removes it)."""
    from fsdask.commands import parse_kv
    from fsdask.methods import get_method

    params = parse_kv([opts[i + 1] for i in range(len(opts)) if opts[i] == "--param"])
    path = f"{out}.fsdask-checkpoint"
    with checkpoint.checkpointing(path, every="1"):
        get_method(opts[1], **params).fit(fsdask.open_dataset(store))
    assert checkpoint.peek(path)
    return path


def test_checkpoint_of_other_data_options_or_version_is_refused(
    store, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out.zarr"
    path = left_checkpoint(store, out)
    other = make_store(tmp_path / "other.zarr", seed=1)
    capsys.readouterr()
    assert select(other, out, SHORT) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"fsdask select: error: checkpoint {path} was written for other data (the source or content of X"
    )
    assert "--restart" in err and len(err.strip().splitlines()) == 1
    assert select(store, out, [*SHORT, "--param", "k=2"]) == 2
    assert "other options (k: 3 → 2)" in capsys.readouterr().err
    monkeypatch.setattr(fsdask, "__version__", "99.0")
    assert select(store, out, SHORT) == 2
    assert "written by fsdask" in capsys.readouterr().err
    monkeypatch.undo()
    assert not out.exists() and os.path.exists(path)  # refused: nothing written, nothing lost
    assert select(other, out, SHORT, "--restart") == 0  # --restart ignores (and then removes) it
    assert not os.path.exists(path)
    assert select(other, tmp_path / "ref.zarr", SHORT) == 0
    same_result(tmp_path / "ref.zarr", out)


def test_damaged_checkpoint_is_named(store, tmp_path, capsys):
    out = tmp_path / "out.zarr"
    path = left_checkpoint(store, out)
    capsys.readouterr()
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2)
    assert select(store, out, SHORT) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {path} is corrupted or truncated" in err and "--restart" in err
    assert select(store, out, SHORT, "--restart") == 0 and not os.path.exists(path)


def test_checkpoint_every_is_checked(store, tmp_path, capsys):
    assert select(store, tmp_path / "o.zarr", SHORT, "--checkpoint-every", "often") == 2
    assert "--checkpoint-every): use a number of iterations" in capsys.readouterr().err
    assert checkpoint.parse_every("5") == (5, None) and checkpoint.parse_every("2m") == (
        None,
        120.0,
    )
    with pytest.raises(fsdask.ParameterError, match="60s"):
        checkpoint.parse_every("0")
