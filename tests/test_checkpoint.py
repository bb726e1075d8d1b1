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
HSIC = [
    "--method",
    "hsic",
    "--param",
    "n_components=4",
    "--param",
    "n_features_to_select=10",
    "--param",
    "rho_grid=default",
    "--param",
    "tol=0",
    "--param",
    "max_iter=60",
]  # A from one pass, ρ bisected for 10 features, then 25 ρ-path points of ≈ 40 ms each
HSIC_SHORT = ["--method", "hsic", "--param", "n_components=2", "--param", "n_features_to_select=5"]
SHORT = [*QALPHA, "--param", "max_iter=4"]  # for the refusals: a finished fit's checkpoint suffices
#: options, max_iter (enough iterations left after k = 3 that the kill lands mid-fit)
METHODS = {"qalpha": (QALPHA, 10), "logo": (LOGO, 40), "cpfs": (CPFS, 24)}


def make_store(path, seed=0, n=40, p=600, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = np.repeat(np.arange(classes), n // classes)
    X[y == 1, :6] += 1.0
    fsdask.write_dataset(
        xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y)}), path, block=p
    )
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("ckpt") / "d.zarr")


@pytest.fixture(scope="module")
def hsic_store(tmp_path_factory):
    """Four classes: A has c = 4 columns of rank 3, so R1D finds several components."""
    return make_store(tmp_path_factory.mktemp("ckpt") / "d4.zarr", classes=4)


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


def kill_at(store, out, opts, k, timeout=60.0, argv=None, slot=None):
    """Start ``fsdask select`` (or ``argv``) in a subprocess; SIGKILL it once the checkpoint of
    ``out`` is at iteration ≥ k (in ``slot``, or in any slot)."""
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
            if os.path.exists(ck) and progress(checkpoint.peek(ck), slot) >= k:
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


def progress(reached: dict[str, int], slot: str | None) -> int:
    return reached.get(slot, 0) if slot else max(reached.values())


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


def test_killed_hsic_fit_resumes_without_reading_X_again(hsic_store, tmp_path, caplog):
    """SparseHSIC killed on its ρ path: the resumed fit restores A (no pass over X), the
    bisected ρ and the path's points so far, and continues with the next ρ."""
    ref, out = tmp_path / "ref.zarr", tmp_path / "out.zarr"
    assert select(hsic_store, ref, HSIC) == 0
    reached = kill_at(hsic_store, out, HSIC, k=3, slot="hsic/path")
    assert reached["hsic/A"] == 1 and 3 <= reached["hsic/path"] < 25 and not out.exists()
    with caplog.at_level(logging.WARNING, logger="fsdask"):
        assert select(hsic_store, out, HSIC, "--resume") == 0
    ck = f"{out}.fsdask-checkpoint"
    assert f"resuming hsic/A from the checkpoint {ck} at iteration 1" in caplog.text
    assert f"resuming hsic/path from the checkpoint {ck} at iteration {reached['hsic/path']}" in (
        caplog.text
    )
    same_result(ref, out)
    ra, rb = fsdask.open_result(ref), fsdask.open_result(out)
    for name in ("rho_path_n_selected", "rho_path_objective", "sigma", "v"):
        np.testing.assert_allclose(ra[name].values, rb[name].values, rtol=0, atol=1e-12)
    assert ra.attrs["rho"] == rb.attrs["rho"] and not os.path.exists(ck)


class Stopped(Exception):
    """Ends a fit in the middle, as a kill would: the checkpoint holds what was saved before."""


@pytest.mark.parametrize(
    "params, stop_at, slot",
    [
        ({"rho": 1e-4, "n_components": 3}, 3, "hsic/r1d"),  # after 2 of the 3 components
        ({"rho": 1e-4, "n_components": 3, "memory_budget": 16000}, 3, "hsic/r1d"),  # A on dask
        ({"n_components": 2, "n_features_to_select": 10}, 12, "hsic/bisect"),
        ({"rho": 1e-4, "n_components": 2, "rho_grid": "default"}, 20, "hsic/path"),
    ],
    ids=["r1d", "r1d-dask", "bisect", "path"],
)
def test_hsic_stopped_inside_r1d_bisection_or_path_continues(
    params, stop_at, slot, hsic_store, tmp_path, monkeypatch
):
    """Stopped at its ``stop_at``-th SparsePM run, a SparseHSIC fit run again continues after
    the last saved component / bisection trial / ρ-path point: fewer runs, the same result."""
    from fsdask.methods import hsic

    ds, path = fsdask.open_dataset(hsic_store), tmp_path / "ck"
    sparse_pm, runs, stop = hsic.sparse_pm, [], {"at": None}

    def counted(*args, **kwargs):
        runs.append(1)
        if len(runs) == stop["at"]:
            raise Stopped
        return sparse_pm(*args, **kwargs)

    monkeypatch.setattr(hsic.components, "sparse_pm", counted)  # where r1d calls it
    ref = hsic.SparseHSIC(**params).fit(ds)
    n_ref = len(runs)
    runs.clear()
    stop["at"] = stop_at
    with checkpoint.checkpointing(path, every=1), pytest.raises(Stopped):
        hsic.SparseHSIC(**params).fit(ds)
    reached = checkpoint.peek(path)
    assert 0 < reached[slot] and ("hsic/A" in reached) == ("memory_budget" not in params)
    runs.clear()
    stop["at"] = None
    with checkpoint.checkpointing(path, every=1):
        est = hsic.SparseHSIC(**params).fit(ds)
    # a saved component is one SparsePM run not made again, a saved trial or ρ at least one
    assert len(runs) <= n_ref - reached[slot]
    assert slot != "hsic/r1d" or len(runs) == n_ref - reached[slot]
    assert est.rho_ == ref.rho_ and (est.ranking_ == ref.ranking_).all()
    assert (est.support_ == ref.support_).all()
    for name in ("scores_", "components_", "sigma_", "v_"):
        np.testing.assert_allclose(getattr(est, name), getattr(ref, name), rtol=0, atol=1e-12)


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
    from fsdask.api import parse_kv
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


def test_hsic_checkpoint_of_other_data_or_options_is_refused(hsic_store, store, tmp_path, capsys):
    """The saved A is never reused for other data, and its components never for other options."""
    out = tmp_path / "out.zarr"
    path = left_checkpoint(hsic_store, out, HSIC_SHORT)
    assert {"hsic/A", "hsic/bisect"} <= set(checkpoint.peek(path))
    capsys.readouterr()
    assert select(store, out, HSIC_SHORT) == 2
    err = capsys.readouterr().err  # same X values, other labels (and another store)
    assert f"checkpoint {path} was written for other data (" in err and "the labels y differ" in err
    assert select(hsic_store, out, [*HSIC_SHORT, "--param", "standardize=false"]) == 2
    assert "other options (standardize: True → False)" in capsys.readouterr().err
    assert not out.exists() and os.path.exists(path)
    assert select(store, out, HSIC_SHORT, "--restart") == 0 and not os.path.exists(path)
    assert select(store, tmp_path / "ref.zarr", HSIC_SHORT) == 0
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
