"""Irrelevant N(0, 1) features appended to a real data set, as in Sun et al. (2010), §4.2.

"For each data set, the set of original features is augmented by 5,000 irrelevant
features, independently sampled from a Gaussian distribution with zero mean and unit
variance."  The noise block is lazy and drawn in seeded groups, so it streams to Zarr at
any size and does not depend on chunking; the original features come first.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from fsdask.datasets._stream import Synthetic, lazy_matrix


def add_noise_features(
    X: Any, J: int, random_state: int = 0, y: Any = None, dtype: Any = None
) -> Synthetic:
    """Append ``J`` independent N(0, 1) features to ``X`` (n × p) lazily.

    Parameters
    ----------
    X : the real data (numpy, dask, DataArray or a Dataset with ``X`` and ``y``).
    J : number of noise features (the paper: 5000).
    random_state : seed of the noise.
    y : labels to carry along (taken from a Dataset when not given).
    dtype : dtype of the result (default: X's floating dtype, float32 for integers).

    Returns
    -------
    Synthetic whose ``relevant`` are the original features ``0 … p−1`` (the paper's
    "irrelevant" ones are ``p … p+J−1``, which the false-discovery rate counts).
    """
    if isinstance(X, xr.Dataset):
        if y is None and "y" in X:
            y = X["y"].values
        X = X["X"]
    if isinstance(X, xr.DataArray):
        X = X.data
    if J < 0:
        raise ValueError("J (number of noise features) must be >= 0")
    Xd = X if isinstance(X, da.Array) else da.from_array(np.asarray(X))
    if Xd.ndim != 2:
        raise ValueError(f"X must be 2-D (sample, feature); got shape {Xd.shape}")
    if dtype is None:
        dtype = Xd.dtype if np.issubdtype(Xd.dtype, np.floating) else np.float32
    n, p = Xd.shape
    parts = [Xd.astype(dtype).rechunk({0: -1})]
    if J:
        parts.append(
            lazy_matrix(
                random_state,
                n,
                int(J),
                lambda rng, g0, g1, n_s: rng.standard_normal(size=(n_s, g1 - g0)),
                dtype,
            )
        )
    Xn = da.concatenate(parts, axis=1)
    data = {"X": (("sample", "feature"), Xn)}
    if y is not None:
        data["y"] = ("sample", np.asarray(y))
    ds = xr.Dataset(data, coords={"sample": np.arange(n), "feature": np.arange(p + int(J))})
    return Synthetic(
        ds,
        np.arange(p),
        {
            "generator": "add_noise_features",
            "n_original": int(p),
            "n_noise": int(J),
            "random_state": random_state,
        },
    )
