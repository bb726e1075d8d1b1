"""A principal-features model: a few source columns that reconstruct all the others.

CPFS (Masaeli et al., SDM 2010) keeps the q columns of X whose span reconstructs X best
with the fewest, least redundant columns (eq. 4.2).  Here that answer is known: every
column is a noisy multiple of one of ``n_sources`` source columns, so the sources rebuild
each column with a coefficient |w| < 1 and leave only its noise, while a derived column
would need 1/|w| > 1 times its own noise to stand in for its source.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from fsdask.datasets._stream import Synthetic, lazy_matrix


def principal_sources(
    n_samples: int = 100,
    n_features: int = 20_000,
    n_sources: int = 10,
    weights: tuple[float, float] = (0.2, 0.4),
    noise: float = 0.5,
    random_state: int = 0,
    dtype=np.float32,
) -> Synthetic:
    """``n_sources`` independent N(0, 1) columns (features 0 … n_sources − 1) and their copies.

    Every other feature j is ``w_j · s_{c(j)} + ε_j`` with the source c(j) uniform, ``|w_j|``
    uniform in ``weights`` with a random sign, and ε_j ~ N(0, ``noise``²).  No labels: the
    relevant features are the sources, the q = ``n_sources`` principal features of X.

    The default ``weights`` keep ``|w| ≤ 0.4``: a copy standing in for its source then needs a
    coefficient ``1/|w| ≥ 2.5`` on the source's column, against at most 1 in the source's own row
    of A, so the ℓ∞ penalty of (4.2) separates them.  With ``|w|`` up to 0.6 a copy can tie with
    its source in that penalty (seed 0 at 20 000 features: one source replaced by a copy).

    Parameters
    ----------
    n_samples : int, default 100
        Number of samples.
    n_features : int, default 20 000
        Number of features, sources included.
    n_sources : int, default 10
        Number of source columns (the first ones).
    weights : (float, float), default (0.2, 0.4)
        Range of ``|w_j|``.
    noise : float, default 0.5
        Standard deviation of ε.
    random_state : int, default 0
        Seed.
    dtype : numpy dtype, default float32
        Type of X.

    Returns
    -------
    Synthetic
        ``dataset`` (a lazy ``xarray.Dataset`` with ``X`` only (no labels)), ``relevant`` (the
        indices of the relevant features) and ``params``.

    Examples
    --------
    >>> from fsdask.datasets import principal_sources
    >>> syn = principal_sources(n_samples=30, n_features=200, n_sources=5)
    >>> syn.dataset["X"].shape, syn.relevant.tolist()
    ((30, 200), [0, 1, 2, 3, 4])
    """
    if not 0 < n_sources < n_features:
        raise ValueError(f"need 0 < n_sources < n_features; got {n_sources}, {n_features}")
    lo, hi = weights
    if not 0 < lo <= hi < 1:
        raise ValueError(f"weights must satisfy 0 < low ≤ high < 1; got {weights}")
    # the sources are shared by every seeded group of columns: drawn once, from their own seed
    sources = np.random.default_rng([int(random_state), 2**32 - 1]).standard_normal(
        (n_samples, n_sources)
    )

    def sampler(rng: np.random.Generator, g0: int, g1: int, n: int) -> np.ndarray:
        width = g1 - g0
        which = rng.integers(0, n_sources, size=width)
        w = rng.uniform(lo, hi, size=width) * rng.choice([-1.0, 1.0], size=width)
        block = sources[:, which] * w + noise * rng.standard_normal((n, width))
        is_source = np.arange(g0, g1) < n_sources
        block[:, is_source] = sources[:, np.arange(g0, g1)[is_source]]
        return block

    X = lazy_matrix(random_state, n_samples, n_features, sampler, dtype)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X)},
        coords={"sample": np.arange(n_samples), "feature": np.arange(n_features)},
    )
    return Synthetic(
        ds,
        np.arange(n_sources),
        {
            "generator": "principal_sources",
            "n_samples": n_samples,
            "n_features": n_features,
            "n_sources": n_sources,
            "weights": [float(lo), float(hi)],
            "noise": float(noise),
            "random_state": random_state,
        },
    )
