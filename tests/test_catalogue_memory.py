"""Issue 38, memory and workers: n × n methods on too many samples, workers that die, and
Q-α on a cluster that loses a worker.

* Q-α, Logo and the Laplacian score hold matrices between samples: more samples than the
  memory budget holds them for are refused by shape, before X is read, in one line naming
  the sample count, the estimate, the budget and the remedy.
* Workers that die — a ``--memory-limit`` too small for the task (the nanny kills the worker
  every time it runs it: ``KilledWorker``), a worker process dying while the local cluster
  starts — end the command in one line and exit 2.
* Q-α on a 2-process cluster one of whose workers is SIGKILLed mid-fit gives the result of
  an undisturbed run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

import fsdask
from fsdask.errors import InputError

CASES = [
    ("qalpha_300_samples_tiny_budget", "BAD"),
    ("logo_300_samples_tiny_budget", "BAD"),
    ("laplacian_score_300_samples_tiny_config_budget", "BAD"),
    ("qalpha_cli_300_samples_tiny_budget", "BAD"),
    ("qalpha_kernel_300_samples_tiny_budget", "GOOD"),
    ("qalpha_within_budget", "GOOD"),
    ("logo_budget_zero_chunked", "GOOD"),
    ("memory_limit_256MiB_killed_worker", "BAD"),
    ("worker_dies_while_local_cluster_starts", "BAD"),
    ("qalpha_worker_sigkilled_mid_fit", "GOOD"),
]

N = 300  # samples of the fits that run: 8 × 300² × 8 B = 5.5 MiB of n × n matrices
#: samples of the refused fits: 8 × 1100² × 8 B = 74 MiB of n × n matrices, above the 1 MiB
#: budget below and above the floor under which sample matrices are never refused (32 MiB)
N_BIG = 1100
TINY = "1MiB"


class Unread(Exception):
    """Raised if a test's X is read: the refusal must come from the shape alone."""


def _never(block):
    raise Unread("X was read")


def _unreadable(n: int, p: int) -> da.Array:
    """An n × p dask array whose every read raises :class:`Unread`."""
    return da.zeros((n, p), chunks=(n, 10)).map_blocks(_never, dtype=np.float64)


def _one_line_refusal(exc: BaseException, n: int, method: str) -> str:
    msg = str(exc)
    assert "\n" not in msg
    assert method in msg and f"{n} samples" in msg, msg
    assert "memory budget of 1.00 MiB" in msg and "fewer samples" in msg, msg
    assert "fsdask.memory-budget" in msg, msg
    return msg


y_n = np.repeat([0, 1], N // 2)
y_big = np.repeat([0, 1], N_BIG // 2)


@pytest.mark.parametrize(
    "case, make",
    [
        ("qalpha_300_samples_tiny_budget", lambda: fsdask.QAlpha(memory_budget=TINY)),
        ("logo_300_samples_tiny_budget", lambda: fsdask.Logo(memory_budget=TINY)),
    ],
    ids=["qalpha_300_samples_tiny_budget", "logo_300_samples_tiny_budget"],
)
def test_quadratic_method_refuses_too_many_samples_before_reading_x(case, make):
    with pytest.raises(InputError) as info:
        make().fit(_unreadable(N_BIG, 40), y_big)
    msg = _one_line_refusal(info.value, N_BIG, type(make()).__name__)
    assert "memory_budget=SIZE" in msg and "--param memory_budget=SIZE" in msg, msg


def test_laplacian_score_refuses_by_the_config_budget():  # laplacian_score_300_samples_tiny_config_budget
    with dask.config.set({"fsdask.memory-budget": TINY}):
        with pytest.raises(InputError) as info:
            fsdask.LaplacianScore().fit(_unreadable(N_BIG, 40))
    msg = _one_line_refusal(info.value, N_BIG, "LaplacianScore")
    assert "memory_budget=SIZE" not in msg  # no such parameter: the config is the remedy


def test_cli_refusal_is_one_line_and_exit_2(tmp_path):  # qalpha_cli_300_samples_tiny_budget
    rng = np.random.default_rng(0)
    fsdask.ingest(rng.normal(size=(N_BIG, 40)).astype(np.float32), tmp_path / "x.zarr", y=y_big)
    r = subprocess.run(
        [sys.executable, "-m", "fsdask.cli", "select", str(tmp_path / "x.zarr")]
        + ["--method", "qalpha", "--param", f"memory_budget={TINY}", "-o", str(tmp_path / "o")]
        + ["--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{N_BIG} samples" in lines[0] and "memory budget" in lines[0], (
        r.stderr
    )
    assert not (tmp_path / "o").exists()


def test_within_budget_and_kernel_form_fit():
    """qalpha_kernel_300_samples_tiny_budget, qalpha_within_budget, logo_budget_zero_chunked."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N, 40))
    X[y_n == 1, :3] += 2
    # the kernel form keeps no q × q matrix: the tiny budget does not refuse it
    kern = fsdask.QAlpha(kernel="linear", memory_budget=TINY, max_iter=3).fit(X)
    assert kern.scores_.shape == (40,)
    ok = fsdask.QAlpha(memory_budget="8MiB", max_iter=3).fit(X)
    assert ok.scores_.shape == (40,)
    # budget 0 sends every in-memory-or-chunked decision to dask; it is no ceiling
    logo = fsdask.Logo(memory_budget=0, max_iter=2).fit(X[:60], np.repeat([0, 1], 30))
    assert logo.scores_.shape == (40,)


# --------------------------------------------------------------------------- workers that die
def _select(tmp_path, method: str, *options: str, env=None, timeout: float = 280):
    cli = [sys.executable, "-m", "fsdask.cli", "select", str(tmp_path / "x.zarr")]
    cli += ["--method", method, "-o", str(tmp_path / "out.zarr"), "--no-progress", *options]
    return subprocess.run(
        cli, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_memory_limit_too_small_for_the_task_exits_2_with_one_line(tmp_path):
    """memory_limit_256MiB_killed_worker: the documented floor lets a worker start, and its
    nanny kills it each time it reads a 64 MiB block: distributed gives up (KilledWorker)."""
    X = np.random.default_rng(0).normal(size=(64, 2**17)).astype(np.float64)  # 64 MiB
    fsdask.ingest(X, tmp_path / "x.zarr", y=np.repeat([0, 1], 32), chunk_bytes=X.nbytes)
    r = _select(tmp_path, "ttest", "--scheduler", "local:2", "--memory-limit", "256MiB")
    assert r.returncode == 2, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    assert "--memory-limit 256MiB" in lines[0] and "raise it" in lines[0], lines[0]
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_worker_dying_while_the_local_cluster_starts_exits_2_with_one_line(tmp_path):
    """worker_dies_while_local_cluster_starts: a preload makes the first worker process exit
    in its set-up, before it registers (the nanny does not restart it)."""
    X = np.random.default_rng(0).normal(size=(10, 50)).astype(np.float32)
    fsdask.ingest(X, tmp_path / "x.zarr", y=np.repeat([0, 1], 5))
    preload = Path(__file__).with_name("dying_at_start_preload.py")
    env = {
        "PYTHONWARNINGS": "ignore",
        "DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{preload}"]',
        "FSDASK_TEST_DIE_MARKER": str(tmp_path / "died"),
    }
    r = _select(tmp_path, "ttest", "--scheduler", "local:2", env=env)
    assert (tmp_path / "died").exists(), "the preload did not run"
    assert r.returncode == 2, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    assert "local:2" in lines[0] and "while the local cluster was starting" in lines[0], lines[0]
    assert not (tmp_path / "out.zarr").exists()


# --------------------------------------------------------------------------- Q-α, a lost worker
@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_qalpha_on_a_cluster_made_here_survives_a_sigkilled_worker(tmp_path):
    """qalpha_worker_sigkilled_mid_fit: as ``select --method qalpha --scheduler local:2``
    (the cluster made by :func:`fsdask.cluster.scheduler`, its watchdog on), every pass on
    the workers (``fsdask.hold-x-below: 0``); one worker SIGKILLed once the fit's first
    tasks are done; the result is the undisturbed one."""
    import signal
    import threading
    import time
    import warnings

    from fsdask.cluster import scheduler

    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 600)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    X[y == 1, :4] += 1.5
    fsdask.ingest(X, tmp_path / "x.zarr", y=y, chunk_bytes=40 * 4 * 50)
    ds = fsdask.open_dataset(tmp_path / "x.zarr")

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fsdask.QAlpha(random_state=0, max_iter=8).fit(ds).result_

    def done(client) -> int:
        return client.run_on_scheduler(
            lambda dask_scheduler: sum(ts.state == "memory" for ts in dask_scheduler.tasks.values())
        )

    with dask.config.set({"fsdask.hold-x-below": 0}), scheduler("local:2") as client:
        reference = fit()
        victim = sorted(client.run(os.getpid).values())[0]
        out: dict = {}
        thread = threading.Thread(target=lambda: out.update(result=fit()))
        before = done(client)
        thread.start()
        deadline = time.monotonic() + 60
        while done(client) <= before and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert thread.is_alive(), "the fit finished before the worker was killed"
        os.kill(victim, signal.SIGKILL)
        thread.join(timeout=300)
    assert "result" in out, "the fit failed after losing a worker"
    np.testing.assert_array_equal(out["result"]["weight"].values, reference["weight"].values)
    np.testing.assert_array_equal(out["result"]["selected"].values, reference["selected"].values)
