"""Methods quadratic in the samples (issue 40, item 3): Q-α, Logo and the Laplacian score
state their n-dependent cost before X is read, refuse it above the memory budget with a
remedy, fit on a seeded class-stratified subsample (``max_samples``) recorded in the result,
and show their progress — in Python and through ``fsdask select``."""

from __future__ import annotations

import hashlib
import io
import logging
import subprocess
import sys

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from dask.utils import format_bytes

import fsdask
from fsdask.errors import InputError, ParameterError
from fsdask.fitting import progress_lines
from fsdask.methods.filters import LaplacianScore
from fsdask.methods.logo import Logo
from fsdask.methods.qalpha import QAlpha
from fsdask.methods.quadratic import class_quota, subsample

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

QUADRATIC = {
    "qalpha": lambda **kw: QAlpha(max_iter=3, **kw),
    "logo": lambda **kw: Logo(max_iter=2, **kw),
    "laplacian_score": lambda **kw: LaplacianScore(**kw),
}


def unreadable(n: int, p: int) -> da.Array:
    """An n × p dask array whose every read raises: a fit that touches X fails on it."""

    def boom(block):
        raise AssertionError("X was read")

    return da.zeros((n, p), chunks=(n, p)).map_blocks(boom, dtype=np.float64)


def labels(n: int, shares=(0.7, 0.2, 0.1)) -> np.ndarray:
    cuts = np.cumsum([0, *(int(round(s * n)) for s in shares)])
    y = np.zeros(n, dtype=np.int64)
    for c, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        y[a:b] = c
    return np.random.default_rng(1).permutation(y)


# ---------------------------------------------------------------- refused before X is read
@pytest.mark.parametrize("name", list(QUADRATIC))
def test_refused_before_X_is_read_with_the_estimate_and_the_remedy(name):
    n, p = 20_000, 10
    est = QUADRATIC[name]()
    with dask.config.set({"fsdask.memory-budget": "64MiB"}), pytest.raises(InputError) as info:
        est.fit(unreadable(n, p), labels(n) if name == "logo" else None)
    msg = str(info.value)
    cost = est._sample_cost(n, p)
    assert "\n" not in msg
    assert f"{type(est).__name__} on {n} samples" in msg
    assert f"about {format_bytes(cost.nbytes)}" in msg and f"{cost.copies} × n × n" in msg
    assert f"~{cost.flop:.2g} flop" in msg  # the work, with its time
    assert "memory budget of 64.00 MiB" in msg
    largest = cost.largest_n(64 * 2**20)
    assert f"max_samples={largest}" in msg and f"--max-samples {largest}" in msg
    assert "DASK_FSDASK__MEMORY_BUDGET" in msg and "fewer samples" in msg
    assert ("memory_budget=SIZE" in msg) == (name != "laplacian_score")  # its parameter
    # the remedy it names is enough: the suggested subsample passes the same check
    assert est._sample_cost(largest, p).nbytes <= 64 * 2**20 < cost.nbytes


def test_the_estimates_follow_the_documented_models():
    q = QAlpha(k=2, max_iter=10, alpha_solver="lanczos")._sample_cost(1000, 500)
    assert q.copies == 8 and q.nbytes == 8 * 8 * 1000**2
    assert q.flop == pytest.approx(11 * (2 * 500 * 1000**2 + 2 * 500 * 2000 * 40))
    forced = QAlpha(k=2, alpha_solver="gram")._sample_cost(1000, 500)
    assert forced.copies == 8 * 5 and "Gram of W" in forced.what  # A_α and the (2n)² Gram
    assert QAlpha(variant="kernel")._sample_cost(10**6, 50).nbytes == 0  # no n × n matrix
    lo = Logo(max_iter=30)._sample_cost(1000, 500)
    assert lo.copies == 9 and lo.flop == 6 * 1000**2 * 500 * 30
    ls = LaplacianScore()._sample_cost(1000, 500)
    assert ls.copies == 8 and ls.flop == 4 * 1000**2 * 500
    # Q-α's Gram of W counts when auto takes it (it fits the budget), Lanczos' products else
    small = QAlpha(k=2, alpha_solver="auto", memory_budget="1GiB")._sample_cost(1000, 500)
    assert small.flop > q.flop and small.copies == 8


def test_a_zero_budget_leaves_the_check_off_and_the_kernel_form_is_never_refused():
    X = unreadable(20_000, 10)
    with pytest.raises(AssertionError, match="X was read"):  # past the check: reading X
        with dask.config.set({"fsdask.memory-budget": 0}):
            LaplacianScore().fit(X)
    with pytest.raises(AssertionError, match="X was read"):
        QAlpha(variant="kernel", memory_budget="1MiB").fit(X)


def test_the_cli_refuses_with_exit_2_and_writes_nothing(tmp_path):
    store, out = tmp_path / "d.zarr", tmp_path / "r.zarr"
    X = np.random.default_rng(0).normal(size=(1000, 6))
    fsdask.write_dataset(xr.Dataset({"X": (("sample", "feature"), X)}), store)
    for chunk in (store / "X" / "c").rglob("*"):  # X's chunks: a read would fail
        if chunk.is_file():
            chunk.unlink()
    p = fsdask_cli(
        "select", store, "--method", "qalpha", "--param", "memory_budget=1MiB", "-o", out
    )
    assert p.returncode == 2, p.stderr
    assert "QAlpha on 1000 samples needs about 61.04 MiB" in p.stderr
    assert "--max-samples 724" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not out.exists()


# ---------------------------------------------------------------- the subsample
def test_stratified_subsample_keeps_class_shares_and_every_class():
    y = np.repeat([0, 1, 2, 3], [9000, 900, 95, 5])
    s = subsample(y.size, 1000, labels=y, random_state=7)
    counts = np.bincount(y[s.rows], minlength=4)
    assert s.rows.size == 1000 and s.stratified and np.all(np.diff(s.rows) > 0)
    ideal = 1000 * np.bincount(y) / y.size
    assert np.all(np.abs(counts - ideal) <= 1) and counts.min() >= 1  # 900, 90, 9(.5), 1
    # a class smaller than its floor share keeps its floor, taken from the largest
    tiny = np.repeat([0, 1], [9990, 10])
    assert np.bincount(tiny[subsample(tiny.size, 100, labels=tiny).rows]).tolist() == [99, 1]
    q = class_quota(np.array([9990, 10]), 100, min_per_class=2)
    assert q.tolist() == [98, 2]


def test_the_subsample_is_deterministic_and_seeded():
    y = labels(5000)
    a, b = (subsample(5000, 300, labels=y, random_state=3) for _ in range(2))
    assert np.array_equal(a.rows, b.rows) and a.digest == b.digest
    c = subsample(5000, 300, labels=y, random_state=4)
    assert not np.array_equal(a.rows, c.rows)
    d = subsample(5000, 300, random_state=None)  # a drawn seed, recorded: the rows come back
    assert np.array_equal(subsample(5000, 300, random_state=d.seed).rows, d.rows)
    assert a.digest == hashlib.sha256(a.rows.astype("<i8").tobytes()).hexdigest()


def test_a_class_that_would_vanish_is_refused():
    y = np.repeat(np.arange(12), 10)
    with pytest.raises(ParameterError, match=r"max_samples=10 cannot keep 1 sample\(s\) of each"):
        subsample(y.size, 10, labels=y)
    with pytest.raises(ParameterError, match="max_samples ≥ 24"):
        Logo(max_samples=20).fit(np.random.default_rng(0).normal(size=(120, 5)), y)


def test_logo_fits_the_stratified_rows_and_records_them():
    rng = np.random.default_rng(0)
    n, p = 400, 30
    y = labels(n)
    X = rng.normal(size=(n, p))
    X[:, 0] += y  # one relevant feature
    est = Logo(max_iter=3, max_samples=120, random_state=5).fit(X, y)
    attrs = est.result_.attrs
    rows = subsample(n, 120, labels=y, random_state=5, min_per_class=2).rows
    assert attrs["max_samples"] == 120 and attrs["n_samples_used"] == 120
    assert attrs["n_samples_total"] == n and attrs["subsample_seed"] == 5
    assert attrs["subsample_stratified"] is True
    assert (
        attrs["subsample_rows_sha256"] == hashlib.sha256(rows.astype("<i8").tobytes()).hexdigest()
    )
    assert np.bincount(y[rows]).tolist() == [84, 24, 12]  # 70 / 20 / 10 %
    # the fit is the fit of those rows, and the same again
    direct = Logo(max_iter=3).fit(X[rows], y[rows])
    np.testing.assert_array_equal(est.scores_, direct.scores_)
    again = Logo(max_iter=3, max_samples=120, random_state=5).fit(X, y)
    np.testing.assert_array_equal(est.scores_, again.scores_)
    assert again.result_.attrs["subsample_rows_sha256"] == attrs["subsample_rows_sha256"]


def test_supervised_qalpha_stratifies_and_the_unsupervised_draws_uniformly():
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(300, 12)), labels(300)
    sup = QAlpha(max_iter=2, max_samples=60, supervised=True).fit(X, y)
    assert sup.result_.attrs["subsample_stratified"] is True
    with pytest.raises(ParameterError, match="keep 4 sample"):  # Def. 6: k_within + 1 each
        QAlpha(max_samples=11, supervised=True, k_within=3).fit(X, y)
    uns = QAlpha(max_iter=2, max_samples=60).fit(X)
    assert uns.result_.attrs["subsample_stratified"] is False
    assert uns.Q_.shape == (60, 2)
    lap = LaplacianScore(max_samples=299).fit(X)
    assert lap.result_.attrs["n_samples_used"] == 299
    full = LaplacianScore(max_samples=300).fit(X)  # at least n: every sample, recorded
    assert full.result_.attrs["n_samples_used"] == 300
    np.testing.assert_array_equal(full.scores_, LaplacianScore().fit(X).scores_)


# ---------------------------------------------------------------- progress
def test_progress_lines_state_the_cost_then_each_iteration_with_what_is_left():
    X = np.random.default_rng(0).normal(size=(200, 40))
    out = io.StringIO()
    with progress_lines(stream=out, every=0):
        QAlpha(max_iter=4, tol=0, max_samples=150).fit(X)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("fsdask: qalpha: 150 samples × 40 features: sample affinity")
    assert "flop at most (≈ " in lines[0]
    assert "fitting on 150 of 200 samples (max_samples=150, uniform, seed 0)" in lines[1]
    its = [ln for ln in lines if ": iteration " in ln]
    assert len(its) == 4 and "more to max_iter=4" in its[0] and "more to" not in its[-1]


def test_iteration_lines_are_throttled_but_the_first_is_always_shown():
    X = np.random.default_rng(0).normal(size=(60, 20))
    out = io.StringIO()
    with progress_lines(stream=out, every=3600):
        QAlpha(max_iter=5, tol=0).fit(X)
    its = [ln for ln in out.getvalue().splitlines() if ": iteration " in ln]
    assert len(its) == 1 and ": iteration 1:" in its[0]


def test_outside_progress_lines_they_are_info_records(caplog):
    X, y = np.random.default_rng(0).normal(size=(60, 20)), labels(60)
    with caplog.at_level(logging.INFO, logger="fsdask"):
        Logo(max_iter=2).fit(X, y)
    msgs = [r.getMessage() for r in caplog.records if r.name == "fsdask"]
    assert any(m.startswith("logo: 60 samples × 20 features: distances D") for m in msgs)
    assert any("logo: iteration 1:" in m and "more to max_iter=2" in m for m in msgs)


def fsdask_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "fsdask.cli", *map(str, args)], capture_output=True, text=True
    )


def test_fsdask_select_shows_progress_unless_quiet_and_subsamples(tmp_path):
    store = tmp_path / "d.zarr"
    X, y = np.random.default_rng(0).normal(size=(300, 20)), labels(300)
    fsdask.write_dataset(xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y)}), store)
    common = ["--method", "logo", "--param", "max_iter=2", "--max-samples", "90"]
    p = fsdask_cli("select", store, *common, "-o", tmp_path / "a.zarr")
    assert p.returncode == 0, p.stderr
    assert "fsdask: logo: 90 samples × 20 features" in p.stderr
    assert "fsdask: logo: fitting on 90 of 300 samples" in p.stderr
    assert "fsdask: logo: iteration 1:" in p.stderr
    attrs = fsdask.open_result(tmp_path / "a.zarr").attrs
    assert attrs["n_samples_used"] == 90 and attrs["max_samples"] == 90
    q = fsdask_cli("select", store, *common, "-q", "-o", tmp_path / "b.zarr")
    assert q.returncode == 0 and "fsdask: logo" not in q.stderr
    again = fsdask.open_result(tmp_path / "b.zarr").attrs
    assert again["subsample_rows_sha256"] == attrs["subsample_rows_sha256"]


def test_max_samples_is_refused_for_a_method_linear_in_n():
    from fsdask.methods import get_method
    from fsdask.methods.quadratic import with_max_samples

    with pytest.raises(ParameterError, match="--max-samples applies to the methods quadratic"):
        with_max_samples(get_method("ttest"), 9)
    assert with_max_samples(get_method("logo"), 9).max_samples == 9


def test_a_loop_that_stops_itself_shows_time_left_only_when_its_bound_is_named():
    import dataclasses

    from fsdask.fitting import FitContext

    @dataclasses.dataclass
    class State:
        i: int = 0

    class Inner:  # max_iter caps an inner solver, not the loop: no time left is shown
        method_name = "inner"
        max_iter = 5000

    class Outer(Inner):
        method_name = "outer"
        max_iter = 4
        progress_bound = "max_iter"

    out = io.StringIO()
    for est in (Inner(), Outer()):
        ctx = FitContext(est)

        def step(s, ctx=ctx):
            s.i += 1
            ctx.log_iteration(s.i, change=1.0 / s.i)
            return s

        with progress_lines(stream=out, every=0):
            ctx.iterate("loop", State(), step, done=lambda s: s.i >= 3)
    lines = out.getvalue().splitlines()
    assert len(lines) == 6 and not any("more to" in ln for ln in lines[:3])
    assert all("more to max_iter=4" in ln for ln in lines[3:])


def test_printed_lines_stay_log_records_but_the_root_handlers_do_not_repeat_them():
    """``fsdask run --log-json`` reads the records (a handler on the fsdask logger); the
    CLI's ``-v`` prints the root's: inside progress_lines a line is printed once, by
    progress_lines or (when throttled there) by the root's handlers."""
    fsdask_log, root = logging.getLogger("fsdask"), logging.getLogger()
    on_fsdask, on_root, printed = io.StringIO(), io.StringIO(), io.StringIO()
    h_fsdask, h_root = logging.StreamHandler(on_fsdask), logging.StreamHandler(on_root)
    old = fsdask_log.level
    fsdask_log.addHandler(h_fsdask)
    root.addHandler(h_root)
    fsdask_log.setLevel(logging.INFO)
    try:
        with progress_lines(stream=printed, every=3600):
            Logo(max_iter=3).fit(np.random.default_rng(0).normal(size=(60, 20)), labels(60))
        Logo(max_iter=1).fit(np.random.default_rng(0).normal(size=(60, 20)), labels(60))
    finally:
        fsdask_log.removeHandler(h_fsdask)
        root.removeHandler(h_root)
        fsdask_log.setLevel(old)
    records = [ln for ln in on_fsdask.getvalue().splitlines() if ": iteration " in ln]
    assert len(records) == 4  # every iteration, printed or not, and the fit outside
    assert printed.getvalue().count(": iteration ") == 1  # throttled after the first
    root_text = on_root.getvalue()  # what was not printed: iterations 2, 3 and the fit outside
    assert root_text.count("logo: iteration ") == 3 and root_text.count("iteration 1:") == 1
