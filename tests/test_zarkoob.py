"""The §3.4.1 generator against the thesis' description (Zarkoob 2010)."""

import numpy as np
import pytest

from fsdask.datasets import write_synthetic, zarkoob_regression
from fsdask.io import open_dataset


def test_thesis_model():
    s = zarkoob_regression(random_state=7)
    X, y = s.X.values.astype(np.float64), s.y
    # 50 data points of 60 features (the thesis' X is 60 × 50, features × samples)
    assert X.shape == (50, 60) and s.X.dtype == np.float32
    # relevant: the thesis' features 5, 10, 15 (1-based) = 0-based 4, 9, 14
    assert s.relevant.tolist() == [4, 9, 14]
    # unit uniform entries
    assert X.min() >= 0 and X.max() < 1
    # y = sin(X5) + sin(X10) + X15² + ε, ε ~ N(0, 0.01) read as a variance
    eps = y - (np.sin(X[:, 4]) + np.sin(X[:, 9]) + X[:, 14] ** 2)
    assert np.abs(eps).max() < 0.5 and 0.03 < eps.std() < 0.2
    big = zarkoob_regression(n_samples=20000, n_features=16, random_state=1)
    Xb = big.X.values.astype(np.float64)
    eb = big.y - (np.sin(Xb[:, 4]) + np.sin(Xb[:, 9]) + Xb[:, 14] ** 2)
    assert abs(eb.var() - 0.01) < 0.0006 and abs(eb.mean()) < 0.003
    assert abs(Xb.mean() - 0.5) < 0.005 and abs(Xb.var() - 1 / 12) < 0.002
    # seeded: same seed, same data; other seed, other data
    np.testing.assert_array_equal(zarkoob_regression(random_state=7).X.values, s.X.values)
    assert not np.allclose(zarkoob_regression(random_state=8).y, y)


def test_streams_and_chunking_independent(tmp_path):
    s = zarkoob_regression(n_samples=12, n_features=3000, random_state=2)
    assert len(s.X.data.chunks[1]) >= 1  # lazy
    url = str(tmp_path / "z.zarr")
    write_synthetic(s, url, chunk_bytes=12 * 4 * 700)  # small chunks
    ds = open_dataset(url)
    assert len(ds["X"].data.chunks[1]) > 1
    np.testing.assert_array_equal(ds["X"].values, s.X.values)
    np.testing.assert_allclose(ds["y"].values, s.y)
    # the first 60 features do not depend on the total size
    np.testing.assert_array_equal(
        zarkoob_regression(12, 60, random_state=2).X.values, s.X.values[:, :60]
    )
    np.testing.assert_array_equal(zarkoob_regression(12, 60, random_state=2).y, s.y)


def test_too_few_features():
    with pytest.raises(ValueError, match="at least 15"):
        zarkoob_regression(n_features=10)
