"""The execution seam (fsdask.linalg.execution): one memory budget, two backends, pass counts."""

from __future__ import annotations

import threading
import warnings

import dask
import dask.array as da
import numpy as np
import pytest

import fsdask
from fsdask.errors import ConvergenceWarning, ParameterError
from fsdask.linalg.absdiff import pi_weighted_absdiff, weighted_absdiff_sum, weighted_manhattan
from fsdask.linalg.execution import CONFIG_KEY, DASK, NUMPY, Execution, fits, memory_budget


class CountingSource:
    """A NumPy array behind ``da.from_array`` that counts the elements read from it."""

    def __init__(self, a: np.ndarray):
        self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        self.read = 0
        self._lock = threading.Lock()

    def __getitem__(self, key):
        out = self.a[key]
        with self._lock:
            self.read += out.size
        return out

    def passes(self) -> float:
        return self.read / self.a.size


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 300))
    y = np.repeat([0, 1], 20)
    X[:20, :6] += 1.5
    return X, y


def test_budget_from_config_and_per_call():
    assert memory_budget() == 2**30  # fsdask/fsdask.yaml default
    with dask.config.set({CONFIG_KEY: "3MiB"}):
        assert memory_budget() == 3 * 2**20
        assert memory_budget(1000) == 1000  # the call wins
        assert Execution().fits(3 * 2**20) and not Execution().fits(3 * 2**20 + 1)
        assert not fits(2**20, copies=4)
    assert memory_budget("2e9") == 2 * 10**9
    for bad in (-1, "lots", float("nan"), True):
        with pytest.raises(ParameterError, match="memory_budget"):
            memory_budget(bad)
    with dask.config.set({CONFIG_KEY: "lots"}), pytest.raises(ParameterError, match=CONFIG_KEY):
        Execution()
    with pytest.raises(ParameterError, match="memory_budget"):
        fsdask.Logo(memory_budget="lots").fit(
            np.ones((6, 3)) + np.arange(18).reshape(6, 3) ** 2, [0, 0, 0, 1, 1, 1]
        )


def test_backends_agree(data):
    X, _ = data
    Xd = da.from_array(X, chunks=(40, 70))
    w = np.linspace(0.5, 2.0, X.shape[1])
    ex = Execution()
    D_np = ex.sum_columns(weighted_manhattan, X, w, shape=(40, 40))
    assert ex.passes == 0  # in memory: no read of X
    D_da = ex.sum_columns(weighted_manhattan, Xd, w, shape=(40, 40))
    assert ex.passes == 1
    np.testing.assert_allclose(D_np, D_da, rtol=1e-12)
    np.testing.assert_allclose(D_np, np.abs(X[:, None, :] - X[None, :, :]) @ w, rtol=1e-10)
    cols = ex.map_columns(lambda xb: xb.sum(axis=0), Xd)
    np.testing.assert_allclose(cols, X.sum(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(
        NUMPY.take_columns(X, np.array([5, 1])),
        DASK.gather(DASK.take_columns(Xd, np.array([5, 1]))),
    )


@pytest.mark.parametrize("where", ["memory", "persisted", "recomputed"])
def test_operators_agree(data, where):
    X, y = data
    rng = np.random.default_rng(0)
    Pi = rng.normal(size=(40, 40))
    x = X if where == "memory" else da.from_array(X, chunks=(40, 64))
    ex = Execution()
    Z = ex.operator(
        lambda xb: pi_weighted_absdiff(xb, Pi),
        x,
        recompute=where == "recomputed",
        rblock=lambda s: lambda xb: weighted_absdiff_sum(xb, s[:, None] * Pi),
    )
    ref = pi_weighted_absdiff(X, Pi)
    w, s, idx = rng.random(300), rng.normal(size=40), np.array([3, 299, 0])
    np.testing.assert_allclose(Z.matvec(w), ref @ w, rtol=1e-10)
    np.testing.assert_allclose(Z.rmatvec(s), s @ ref, rtol=1e-10)
    np.testing.assert_allclose(Z.columns(idx), ref[:, idx], rtol=1e-12)
    assert Z.shape == (40, 300) and Z.passes >= 2
    assert (
        ex.passes == {"memory": 0, "persisted": 1, "recomputed": 3}[where]
    )  # reads of X: one per product


def _fit(est, X, y, budget=None, source=None):
    Xd = da.from_array(source if source is not None else X, chunks=(40, 64), asarray=True)
    with (
        warnings.catch_warnings(),
        dask.config.set({CONFIG_KEY: budget} if budget is not None else {}),
    ):
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(Xd, y)


@pytest.mark.parametrize(
    "make",
    [
        lambda: fsdask.SparseHSIC(n_features_to_select=6, rho_grid=None),
        lambda: fsdask.Logo(max_iter=4),
    ],
    ids=["hsic", "logo"],
)
def test_budget_key_switches_paths_same_result(data, make):
    X, y = data
    mem, chunked = _fit(make(), X, y), _fit(make(), X, y, budget="4KiB")  # X: 96 kB, A: 4.8 kB
    if isinstance(mem, fsdask.SparseHSIC):
        assert mem.result_.attrs["A_in_memory"] and not chunked.result_.attrs["A_in_memory"]
    else:  # in memory X is gathered once; chunked, every sweep reads X
        assert mem.result_.attrs["passes_over_X"] == 1 < chunked.result_.attrs["passes_over_X"]
    # same algorithm, other summation order: equal up to the inner solver's tolerance
    np.testing.assert_allclose(
        mem.scores_, chunked.scores_, rtol=1e-6, atol=1e-9 * mem.scores_.max()
    )
    np.testing.assert_array_equal(mem.get_support(), chunked.get_support())


@pytest.mark.parametrize("budget", [None, "4KiB"], ids=["in-memory", "chunked"])
def test_hsic_reads_x_once(data, budget):
    """The SparseHSIC docs: A, the NaN/Inf count and the constant check come from one pass."""
    X, y = data
    src = CountingSource(X)
    est = _fit(fsdask.SparseHSIC(n_features_to_select=6), X, y, budget=budget, source=src)
    assert est.result_.attrs["passes_over_X"] == 1
    assert src.passes() == 1.0


def test_logo_in_memory_reads_x_once_after_screening(data):
    """Logo's docs: when X fits the budget the algorithm reads it once (after the shared screening pass)."""
    X, y = data
    src = CountingSource(X)
    est = _fit(fsdask.Logo(max_iter=4, standardize=False), X, y, source=src)
    assert est.result_.attrs["passes_over_X"] == 1
    assert src.passes() == 2.0
    # the default standardisation is computed on the held X: no further pass
    src = CountingSource(X)
    _fit(fsdask.Logo(max_iter=4), X, y, source=src)
    assert src.passes() == 2.0
    src = CountingSource(X)
    est = _fit(fsdask.Logo(max_iter=4, standardize=False), X, y, budget=0, source=src)
    # chunked: every sweep reads (the active columns of) X; never more than the sweeps counted
    assert 1 < src.passes() - 1 <= est.result_.attrs["passes_over_X"]


def test_budget_from_environment(tmp_path):
    """``DASK_FSDASK__MEMORY_BUDGET`` (README) overrides the packaged default in a fresh process."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DASK_FSDASK__MEMORY_BUDGET": "4GiB"}
    out = subprocess.run(
        [sys.executable, "-c", "import fsdask.linalg.execution as e; print(e.memory_budget())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert out.stdout.strip() == str(4 * 2**30)
