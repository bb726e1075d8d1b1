"""Issue 40 item 1: the sample-blocked seam (``Execution.sum_blocks``, the block kernels of
``linalg/colstats``), the screen and the univariate filters on sample-blocked X.

Every layout — in-memory dense or CSR, dask dense or CSR blocks, one row block or several —
gives the same sums as NumPy on the whole matrix, and the filters give the fit of the
feature-blocked path (rtol 1e-10, the same selection).
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from fsdask.linalg.colstats import (
    MOMENT_MAXIMA,
    SCREEN_MAXIMA,
    moment_rows,
    moment_sums,
    screen_sums,
    xt_dot,
)
from fsdask.linalg.execution import Execution


def _sparse_counts(rng, n=240, p=37, density=0.2):
    X = rng.poisson(3.0, (n, p)).astype(np.float64)
    X[rng.random((n, p)) > density] = 0
    X[:, 5] = 0  # a column with no stored value
    X[:, 6] = 4.0  # and one with no implicit zero
    return X


def _layouts(X):
    """The same matrix in every layout sum_blocks accepts."""
    csr = sp.csr_matrix(X)
    return {
        "numpy": X,
        "csr": csr,
        "dask-features": da.from_array(X, chunks=(-1, 11)),
        "dask-samples": da.from_array(X, chunks=(53, 16)),
        "dask-csr": da.from_array(csr, chunks=(53, -1), asarray=False),
        "dask-csr-cols": da.from_array(csr, chunks=(64, 20), asarray=False),
    }


@pytest.mark.parametrize("layout", list(_layouts(np.zeros((2, 2)))))
def test_sum_blocks_moments_equal_numpy(layout, rng):
    X = _sparse_counts(rng)
    X[3] -= 1.5  # negative values: the minimum is stored, not an implicit zero
    n, p = X.shape
    codes = rng.integers(0, 3, n)
    w = rng.normal(size=n)
    Xl = _layouts(X)[layout]
    ex = Execution()
    K = ex.first_row(Xl)
    assert (K is None) == (layout == "dask-features")

    def fn(xb, c, ww, *k):
        return moment_sums(xb, c, ww, *k, n_classes=3)

    got = ex.sum_blocks(
        fn,
        Xl,
        codes,
        w,
        shape=(moment_rows(3),),
        maxima=MOMENT_MAXIMA,
        columns=() if K is None else (K,),
    )
    assert got.shape == (moment_rows(3), p)
    K = X[0]
    D = X - K
    want_s = np.stack([D[codes == c].sum(0) for c in range(3)])
    want_q = np.stack([(D[codes == c] ** 2).sum(0) for c in range(3)])
    np.testing.assert_allclose(got[:3], want_s, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(got[3:6], want_q, rtol=1e-12)
    np.testing.assert_allclose(got[6], w @ D, rtol=1e-10, atol=1e-9)
    assert not got[7].any()  # no NaN/Inf
    np.testing.assert_array_equal(got[8], K)
    np.testing.assert_array_equal(-got[9], X.min(0))
    np.testing.assert_array_equal(got[10], X.max(0))
    assert ex.passes == (0 if layout in ("numpy", "csr") else 1)


@pytest.mark.parametrize("layout", ["numpy", "csr", "dask-samples", "dask-csr"])
def test_screen_sums_count_nonfinite_and_implicit_zeros(layout, rng):
    X = _sparse_counts(rng)
    X[7, 2] = np.nan
    X[9, 2] = np.inf
    X[11, 8] = -np.inf
    got = Execution().sum_blocks(screen_sums, _layouts(X)[layout], shape=(3,), maxima=SCREEN_MAXIMA)
    fin = np.where(np.isnan(X), -np.inf, X)
    np.testing.assert_array_equal(got[0], (~np.isfinite(X)).sum(0))
    np.testing.assert_array_equal(got[2], fin.max(0))
    fin = np.where(np.isnan(X), np.inf, X)
    np.testing.assert_array_equal(-got[1], fin.min(0))
    assert -got[1][5] == got[2][5] == 0  # all implicit zeros: a constant column


@pytest.mark.parametrize("layout", ["numpy", "csr", "dask-samples", "dask-csr-cols"])
def test_sum_blocks_xt_dot(layout, rng):
    X = _sparse_counts(rng)
    M = rng.normal(size=(X.shape[0], 4))
    got = Execution().sum_blocks(xt_dot, _layouts(X)[layout], M, shape=(4,))
    np.testing.assert_allclose(got, (X.T @ M).T, rtol=1e-12, atol=1e-12)


def test_sum_blocks_integer_counts_and_duplicates(rng):
    X = _sparse_counts(rng).astype(np.int32)
    csr = sp.csr_matrix(X)
    # the same matrix with one value split in two duplicate entries
    r = 1
    row0 = csr.indptr[r]
    j, v = csr.indices[row0], csr.data[row0]
    dup = sp.csr_matrix(
        (
            np.concatenate([csr.data[:row0], [v - 1, 1], csr.data[row0 + 1 :]]),
            np.concatenate([csr.indices[:row0], [j, j], csr.indices[row0 + 1 :]]),
            np.concatenate([csr.indptr[: r + 1], csr.indptr[r + 1 :] + 1]),
        ),
        shape=csr.shape,
    )
    assert not dup.has_canonical_format
    codes = np.zeros(X.shape[0], np.int64)
    for m in (X, csr, dup, da.from_array(dup, chunks=(50, -1), asarray=False)):
        got = Execution().sum_blocks(
            lambda xb, c: moment_sums(xb, c, None, np.zeros(X.shape[1])),
            m,
            codes,
            shape=(7,),
            maxima=MOMENT_MAXIMA,
        )
        np.testing.assert_array_equal(got[0], X.sum(0))
        np.testing.assert_array_equal(got[1], (X.astype(np.float64) ** 2).sum(0))


def test_sum_blocks_does_not_depend_on_threads(rng, monkeypatch):
    """In-memory rows are swept in fixed slices merged in a fixed order."""
    from fsdask.linalg import execution

    monkeypatch.setattr(execution, "ROW_SLICE_BYTES", 64 * 8)  # many slices and tree nodes
    X = rng.normal(100, 1, (2000, 64))
    fn = lambda xb: xb.sum(0)[None]  # noqa: E731
    runs = []
    for n_cores in (1, 2, 3):
        monkeypatch.setattr(execution, "cores", lambda n_cores=n_cores: n_cores)
        runs.append(Execution().sum_blocks(fn, X, shape=(1,)))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    np.testing.assert_allclose(runs[0][0], X.sum(0), rtol=1e-13)


def test_sum_blocks_graph_holds_no_dense_block(rng):
    """CSR blocks reach the kernel as CSR: no task of the graph densifies them."""
    from fsdask.linalg.reductions import sum_over_row_blocks

    X = _sparse_counts(rng)
    Xd = da.from_array(sp.csr_matrix(X), chunks=(60, -1), asarray=False)
    seen = []

    def fn(xb, c):
        seen.append(type(xb))
        return moment_sums(xb, c, n_classes=1)

    codes = np.zeros(X.shape[0], np.int64)
    lazy = sum_over_row_blocks(fn, Xd, codes, shape=(7,), maxima=MOMENT_MAXIMA)
    lazy.compute(scheduler="sync")
    assert seen and all(t is sp.csr_matrix for t in seen)
