"""Fused |x_n − x_i| kernels against plain NumPy."""

import dask.array as da
import numpy as np
import pytest

from fsdask.linalg import (
    absdiff_transform,
    manhattan_over_blocks,
    pi_weighted_absdiff,
    weighted_manhattan,
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weighted_manhattan_matches_numpy(rng, dtype):
    x = rng.normal(size=(23, 1100)).astype(dtype)  # > one cache tile
    w = rng.random(1100)
    ref = (np.abs(x[:, None, :].astype(float) - x[None, :, :].astype(float)) * w).sum(2)
    np.testing.assert_allclose(weighted_manhattan(x, w), ref, rtol=1e-12)
    np.testing.assert_allclose(
        weighted_manhattan(x), np.abs(x[:, None, :].astype(float) - x[None]).sum(2), rtol=1e-12
    )
    assert weighted_manhattan(x[:, :0]).shape == (23, 23)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pi_weighted_absdiff_matches_numpy(rng, dtype):
    x = rng.normal(size=(17, 40)).astype(dtype)
    Pi = rng.normal(size=(17, 17))
    ref = np.einsum(
        "ni,nij->nj", Pi, np.abs(x[:, None, :].astype(float) - x[None, :, :].astype(float))
    )
    out = pi_weighted_absdiff(x, Pi)
    assert out.shape == (17, 40) and out.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    assert pi_weighted_absdiff(x[:, :0], Pi).shape == (17, 0)


def test_dask_versions_sum_and_map_over_blocks(rng):
    x = rng.normal(size=(15, 300))
    w = rng.random(300)
    Pi = rng.normal(size=(15, 15))
    X = da.from_array(x, chunks=(-1, 70))
    D = manhattan_over_blocks(X, w).compute()
    np.testing.assert_allclose(D, weighted_manhattan(x, w), rtol=1e-12)
    Z = absdiff_transform(X, Pi)
    assert Z.chunks == X.chunks
    np.testing.assert_allclose(Z.compute(), pi_weighted_absdiff(x, Pi), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        manhattan_over_blocks(X).compute(), weighted_manhattan(x), rtol=1e-12
    )


def test_sparse_pi_paths_match_numpy(rng):
    from fsdask.linalg import weighted_absdiff_sum

    x = rng.normal(size=(19, 33))
    Pi = rng.normal(size=(19, 19))
    Pi[np.abs(Pi) < 1.2] = 0.0  # mostly zeros: the CSR kernel
    A = np.abs(x[:, None, :] - x[None, :, :])
    np.testing.assert_allclose(
        pi_weighted_absdiff(x, Pi), np.einsum("ni,nij->nj", Pi, A), rtol=1e-12, atol=1e-12
    )
    s = rng.random(19)
    C = s[:, None] * Pi
    np.testing.assert_allclose(weighted_absdiff_sum(x, C), np.einsum("ni,nij->j", C, A), rtol=1e-12)
    Pd = rng.normal(size=(19, 19))  # dense
    np.testing.assert_allclose(
        weighted_absdiff_sum(x, Pd), np.einsum("ni,nij->j", Pd, A), rtol=1e-12
    )


def test_bounded_sum_float32_is_within_its_bound():
    from fsdask.linalg.absdiff import weighted_absdiff_sum, weighted_absdiff_sum_bounded

    rng = np.random.default_rng(4)
    x = (rng.normal(size=(60, 503)) * rng.uniform(0.1, 10, 503)).astype(np.float32)  # 4k + 3
    C = rng.normal(size=(60, 60))
    exact = weighted_absdiff_sum(x.astype(np.float64), C)
    g, err = weighted_absdiff_sum_bounded(x, C)
    assert np.all(np.abs(g - exact) <= err)
    assert np.all(err < 1e-3 * np.abs(C).sum() * np.abs(x).max(axis=0))  # and not vacuous
    g64, err64 = weighted_absdiff_sum_bounded(x.astype(np.float64), C)  # float64: as before
    np.testing.assert_array_equal(g64, exact)
    assert not err64.any()
