"""Weston et al. (2001) "linear" problem, as used in Wolf & Shashua (2005), §7.

y = ±1 with equal probability.  With probability 0.7 features 1–3 are drawn as
x_i = y·N(i, 1) and features 4–6 as N(0, 1); otherwise features 1–3 are N(0, 1) and
features 4–6 are x_i = y·N(i − 3, 1).  All other features are N(0, 20) (variance 20).
Relevant features: indices 0–5.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from fsdask.datasets._stream import Synthetic, lazy_matrix


def weston_linear(
    n_samples: int = 100, n_features: int = 202, random_state: int = 0, dtype=np.float32
) -> Synthetic:
    """The Weston "linear" problem (6 relevant of ``n_features``), lazy and seeded.

    Labels ±1; features 0–2 carry the class in 70 % of the samples and features 3–5 in the
    others, every other feature is N(0, 20) noise (Weston et al. 2003, as in the Logo and
    SparseHSIC papers).

    Parameters
    ----------
    n_samples : int, default 100
        Number of samples.
    n_features : int, default 202
        Number of features (at least 6).
    random_state : int, default 0
        Seed; columns are drawn in seeded groups, so any size streams to Zarr.
    dtype : numpy dtype, default float32
        Type of X.

    Returns
    -------
    Synthetic
        ``dataset`` (a lazy ``xarray.Dataset`` with ``X`` and ``y``), ``relevant`` (the
        indices of the relevant features) and ``params``.

    Examples
    --------
    >>> from fsdask.datasets import weston_linear
    >>> syn = weston_linear(n_samples=50, n_features=1000)
    >>> syn.dataset["X"].shape, syn.relevant.tolist()
    ((50, 1000), [0, 1, 2, 3, 4, 5])
    """
    if n_features < 6:
        raise ValueError("the Weston linear problem needs at least 6 features")
    rng = np.random.default_rng([int(random_state), 2**31 - 1])
    y = rng.choice(np.array([-1, 1]), size=n_samples)
    first = rng.random(n_samples) < 0.7  # which triple carries the signal

    def sampler(brng: np.random.Generator, g0: int, g1: int, n: int) -> np.ndarray:
        block = brng.normal(0.0, np.sqrt(20.0), size=(n, g1 - g0))
        for j in range(g0, min(g1, 6)):
            i = j + 1  # the paper's 1-based feature number
            if i <= 3:
                signal = y * brng.normal(i, 1.0, size=n)
                block[:, j - g0] = np.where(first, signal, brng.normal(0.0, 1.0, size=n))
            else:
                signal = y * brng.normal(i - 3, 1.0, size=n)
                block[:, j - g0] = np.where(first, brng.normal(0.0, 1.0, size=n), signal)
        return block

    X = lazy_matrix(random_state, n_samples, n_features, sampler, dtype)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y.astype(np.int64))},
        coords={"sample": np.arange(n_samples), "feature": np.arange(n_features)},
    )
    return Synthetic(
        ds,
        np.arange(6),
        {
            "generator": "weston_linear",
            "n_samples": n_samples,
            "n_features": n_features,
            "random_state": random_state,
        },
    )


def weston_nonlinear(
    n_samples: int = 100, n_features: int = 52, random_state: int = 0, dtype=np.float32
) -> Synthetic:
    """The Weston et al. (2001) "non-linear" problem (2 relevant of ``n_features``), lazy, seeded.

    Wolf & Shashua (§6) only cite it ("the reader is referred to Weston et al."); this is
    our reconstruction of Weston et al. (NIPS 2001, §4): y = ±1 with equal probability;
    for y = −1, (x₁, x₂) is drawn from N(μ₁, I) or N(μ₂, I) with equal probability,
    μ₁ = (−3/4, −3), μ₂ = (3/4, 3); for y = +1 from N(μ₃, I) or N(μ₄, I), μ₃ = (3, −3),
    μ₄ = (−3, 3).  All other features are N(0, 20) (variance 20, as in the linear
    problem).  Relevant features: indices 0 and 1.
    """
    if n_features < 2:
        raise ValueError("the Weston non-linear problem needs at least 2 features")
    rng = np.random.default_rng([int(random_state), 2**31 - 2])
    y = rng.choice(np.array([-1, 1]), size=n_samples)
    second = rng.random(n_samples) < 0.5  # which of the two Gaussians of its class
    means = {
        (-1, False): (-0.75, -3.0),
        (-1, True): (0.75, 3.0),
        (1, False): (3.0, -3.0),
        (1, True): (-3.0, 3.0),
    }
    mu = np.array([means[(int(c), bool(s))] for c, s in zip(y, second)]).reshape(n_samples, 2)

    def sampler(brng: np.random.Generator, g0: int, g1: int, n: int) -> np.ndarray:
        block = brng.normal(0.0, np.sqrt(20.0), size=(n, g1 - g0))
        for j in range(g0, min(g1, 2)):
            block[:, j - g0] = mu[:, j] + brng.normal(0.0, 1.0, size=n)
        return block

    X = lazy_matrix(random_state, n_samples, n_features, sampler, dtype)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y.astype(np.int64))},
        coords={"sample": np.arange(n_samples), "feature": np.arange(n_features)},
    )
    return Synthetic(
        ds,
        np.arange(2),
        {
            "generator": "weston_nonlinear",
            "n_samples": n_samples,
            "n_features": n_features,
            "random_state": random_state,
        },
    )
