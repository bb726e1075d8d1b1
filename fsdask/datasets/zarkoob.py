"""Zarkoob (2010) §3.4.1 synthetic regression problem, generalised to any size.

Thesis: 50 samples ("data points") of 60 features (X is written 60 × 50, features ×
samples), entries i.i.d. uniform on [0, 1], and

    y = sin(X₅) + sin(X₁₀) + X₁₅ ⊙ X₁₅ + ε,   ε ~ N(0, 0.01)

with X_i the i-th feature (1-based).  N(0, 0.01) is read as a *variance* (sd 0.1).
Relevant features, **0-based** as everywhere in fsdask: 4, 9, 14 (the thesis' 5, 10, 15).
Features beyond the 60th are more uniform noise, so the problem streams to 10⁶+ features.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from fsdask.datasets._stream import SEED_BLOCK, Synthetic, lazy_matrix, seeded_columns

#: the thesis' 1-based relevant feature numbers and our 0-based indices
RELEVANT_1BASED = (5, 10, 15)
RELEVANT = np.array(RELEVANT_1BASED) - 1


def _uniform(rng: np.random.Generator, g0: int, g1: int, n: int) -> np.ndarray:
    return rng.random((n, g1 - g0))


def zarkoob_regression(
    n_samples: int = 50,
    n_features: int = 60,
    noise_var: float = 0.01,
    random_state: int = 0,
    dtype=np.float32,
) -> Synthetic:
    """The §3.4.1 problem: X ~ U[0, 1], y = sin(x₄) + sin(x₉) + x₁₄² + ε (0-based), lazy and seeded.

    Defaults are the thesis' sizes (50 samples × 60 features).  y is computed from the
    first seed group of columns (features 0…1023) only, so it is available without
    generating the rest; ε ~ N(0, ``noise_var``).

    Parameters
    ----------
    n_samples : int, default 50
        Number of samples.
    n_features : int, default 60
        Number of features (at least 15).
    noise_var : float, default 0.01
        Variance of ε.
    random_state : int, default 0
        Seed.
    dtype : numpy dtype, default float32
        Type of X.

    Returns
    -------
    Synthetic
        ``dataset`` (a lazy ``xarray.Dataset`` with ``X`` and ``y`` (a continuous response)), ``relevant`` (the
        indices of the relevant features) and ``params``.

    Examples
    --------
    >>> from fsdask.datasets import zarkoob_regression
    >>> syn = zarkoob_regression()
    >>> syn.dataset["X"].shape, syn.relevant.tolist()
    ((50, 60), [4, 9, 14])
    """
    if n_features < 15:
        raise ValueError(
            "the Zarkoob problem needs at least 15 features (its relevant ones are 5, 10, 15)"
        )
    if n_samples < 2:
        raise ValueError("n_samples must be at least 2")
    first = seeded_columns(
        random_state, 0, min(n_features, SEED_BLOCK), n_samples, _uniform, np.float64
    )
    x = first.astype(dtype).astype(np.float64)  # y from the values as stored
    eps = np.random.default_rng([int(random_state), 2**31 - 2]).normal(
        0.0, np.sqrt(noise_var), n_samples
    )
    y = np.sin(x[:, 4]) + np.sin(x[:, 9]) + x[:, 14] ** 2 + eps
    X = lazy_matrix(random_state, n_samples, n_features, _uniform, dtype)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y)},
        coords={"sample": np.arange(n_samples), "feature": np.arange(n_features)},
    )
    return Synthetic(
        ds,
        RELEVANT.copy(),
        {
            "generator": "zarkoob_regression",
            "n_samples": n_samples,
            "n_features": n_features,
            "noise_var": noise_var,
            "random_state": random_state,
        },
    )
