"""fsdask._sort.stable_argsort: exactly NumPy's stable argsort of float64 keys."""

import numpy as np
import pytest

from fsdask._sort import stable_argsort


@pytest.mark.parametrize(
    "key",
    [
        np.array([]),
        np.array([3.0]),
        np.zeros(10),  # every digit the same: no pass at all
        np.array([0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 1.0, -1.0, 0.0, -0.0]),
        np.arange(300, dtype=float)[::-1],
    ],
)
def test_edge_cases(key):
    np.testing.assert_array_equal(stable_argsort(key), np.argsort(key, kind="stable"))


def test_random_with_ties_and_signed_zeros(rng):
    for trial in range(20):
        p = int(rng.integers(1, 5000))
        key = rng.normal(size=p) * 10.0 ** rng.integers(-300, 300)
        if trial % 2:
            key = rng.integers(-3, 4, p).astype(float)  # heavy ties
        key[rng.random(p) < 0.1] = -0.0
        key[rng.random(p) < 0.1] = 0.0
        key[rng.random(p) < 0.02] = np.inf
        np.testing.assert_array_equal(stable_argsort(key), np.argsort(key, kind="stable"))
