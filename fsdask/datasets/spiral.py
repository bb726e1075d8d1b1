"""Fermat's spiral problem of Sun, Todorovic & Goodison (TPAMI 2010), §4.1 and Fig. 1.

Two classes of 230 samples each lie on the two arms of Fermat's spiral in the plane of the
first two features; every other feature is an irrelevant N(0, 1) variable.  Only the two
relevant features *together* separate the classes.

The paper gives neither the number of turns nor the scale of its spiral.  Our choice
(defaults): the arm of class 0 is ``r = scale·sqrt(θ / θ_max)`` at angle θ, θ drawn
uniformly in ``[0, θ_max]`` with ``θ_max = 2π·turns``; class 1 is the point reflection
(the other branch ``r = −sqrt(θ)``).  ``turns=1.0`` and ``scale=3.0`` (so the relevant
features have a spread comparable to, a little larger than, the N(0, 1) noise), and a small
N(0, ``noise``²) jitter (``noise=0.0`` by default: the paper's figure shows clean arms).
With more turns the arms come closer together and the problem gets harder; with λ = 1
several turns can make Logo settle on a fixed point dominated by noise features
(see ``examples/results/logo_spiral.md``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from fsdask.datasets._stream import Synthetic, lazy_matrix


def spiral_points(
    n_per_class: int = 230,
    turns: float = 1.0,
    scale: float = 3.0,
    noise: float = 0.0,
    random_state: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The two relevant features (2·n_per_class × 2, float64) and labels (0 then 1)."""
    rng = np.random.default_rng([int(random_state), 2**31 - 2])
    theta_max = 2.0 * np.pi * turns
    theta = rng.uniform(0.0, theta_max, size=n_per_class)
    r = scale * np.sqrt(theta / theta_max)
    arm = np.column_stack([r * np.cos(theta), r * np.sin(theta)])
    pts = np.vstack([arm, -arm])  # class 1: the second branch of Fermat's spiral
    if noise:
        pts = pts + rng.normal(0.0, noise, size=pts.shape)
    y = np.repeat(np.array([0, 1], dtype=np.int64), n_per_class)
    return pts, y


def fermat_spiral(
    n_irrelevant: int = 50,
    n_per_class: int = 230,
    turns: float = 1.0,
    scale: float = 3.0,
    noise: float = 0.0,
    random_state: int = 0,
    dtype=np.float32,
) -> Synthetic:
    """Fermat's spiral (features 0 and 1) plus ``n_irrelevant`` N(0, 1) features, lazy and seeded.

    Parameters
    ----------
    n_irrelevant : int, default 50
        Number of irrelevant N(0, 1) features appended (the paper: 50 … 10⁶).
    n_per_class : int, default 230
        Samples per class (the paper: 230, so N = 460).
    turns, scale, noise : float
        The spiral's shape (not given in the paper; see the module docstring).
    random_state : int, default 0
        Seed; the irrelevant features are drawn in seeded blocks, so they do not depend on
        chunking and can be streamed to Zarr at 10⁶ features.
    dtype : numpy dtype, default float32
        Type of X.

    Returns
    -------
    Synthetic
        ``dataset`` (a lazy ``xarray.Dataset`` with ``X`` and ``y`` (two classes)), ``relevant`` (the
        indices of the relevant features) and ``params``.

    Examples
    --------
    >>> from fsdask.datasets import fermat_spiral
    >>> syn = fermat_spiral(n_irrelevant=100, n_per_class=50)
    >>> syn.dataset["X"].shape, syn.relevant.tolist()
    ((100, 102), [0, 1])
    """
    if n_irrelevant < 0:
        raise ValueError("n_irrelevant must be >= 0")
    if n_per_class < 2:
        raise ValueError("n_per_class must be >= 2")
    pts, y = spiral_points(n_per_class, turns, scale, noise, random_state)
    n = pts.shape[0]
    p = 2 + int(n_irrelevant)

    def sampler(brng: np.random.Generator, g0: int, g1: int, n_s: int) -> np.ndarray:
        block = brng.standard_normal(size=(n_s, g1 - g0))
        for j in range(g0, min(g1, 2)):
            block[:, j - g0] = pts[:, j]
        return block

    X = lazy_matrix(random_state, n, p, sampler, dtype)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y)},
        coords={"sample": np.arange(n), "feature": np.arange(p)},
    )
    return Synthetic(
        ds,
        np.arange(2),
        {
            "generator": "fermat_spiral",
            "n_irrelevant": int(n_irrelevant),
            "n_per_class": n_per_class,
            "turns": turns,
            "scale": scale,
            "noise": noise,
            "random_state": random_state,
        },
    )
