"""Synthetic models of Wolf & Shashua (JMLR 2005), §6, lazy and block-seeded.

* :func:`qalpha_clusters` — the class-scaling experiment behind Fig. 3(b): ``n_clusters``
  clusters in 5 relevant coordinates, plus 120 irrelevant coordinates drawn by the same
  rules and then permuted one by one (which breaks their joint structure).
* :func:`qalpha_sessions` — the kernel experiment behind Fig. 6(b): 12 relevant of 60
  coordinates, three clusters of 40 points, every entry multiplied by a hidden ±1 that
  changes every 8 samples ("sessions") independently per feature.
* :func:`ben_dor` — the microarray model of Ben-Dor, Friedman & Yakhini (2001) with
  parameters m, a, b, e, d, s.

Every column is drawn from its own seeded group (:func:`fsdask.datasets._stream.lazy_matrix`),
so the data do not depend on chunking and stream to Zarr at 10⁶+ features.  Relevant
features come first (indices ``0 … n_relevant − 1``); samples are ordered by class.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from fsdask.datasets._stream import Synthetic, lazy_matrix


def _dataset(X, y: np.ndarray, n_features: int) -> xr.Dataset:
    return xr.Dataset(
        {"X": (("sample", "feature"), X), "y": ("sample", y.astype(np.int64))},
        coords={"sample": np.arange(y.size), "feature": np.arange(n_features)},
    )


def _permute_columns(rng: np.random.Generator, block: np.ndarray) -> np.ndarray:
    """An independent random permutation of the samples of every column."""
    idx = np.argsort(rng.random(block.shape), axis=0, kind="stable")
    return np.take_along_axis(block, idx, axis=0)


def _cluster_columns(
    rng: np.random.Generator,
    labels: np.ndarray,
    n_clusters: int,
    width: int,
    mean_low: float,
    mean_high: float,
    var_low: float,
    var_high: float,
) -> np.ndarray:
    """Columns whose values are N(centre_c, var_c) around per-column, per-cluster centres."""
    centres = rng.uniform(mean_low, mean_high, size=(n_clusters, width))
    variances = rng.uniform(var_low, var_high, size=(n_clusters, width))
    noise = rng.standard_normal((labels.size, width))
    return centres[labels] + np.sqrt(variances[labels]) * noise


def qalpha_clusters(
    n_clusters: int = 3,
    n_points: int = 60,
    n_relevant: int = 5,
    n_irrelevant: int = 120,
    max_variance: float = 0.02,
    random_state: int = 0,
    dtype=np.float32,
) -> Synthetic:
    """The cluster model of §6 (Fig. 3b): ``n_clusters`` classes, 5 relevant + 120 permuted coordinates.

    As in the paper: ``n_clusters`` centres drawn uniformly in [−1, 1]^5; per cluster a
    diagonal covariance with entries uniform in [0, ``max_variance``] (= [0, .02]);
    ⌈``n_points``/n_c⌉ points around each centre (so n_c·⌈60/n_c⌉ samples in all — the
    paper's "60 points" is exact only when n_c divides 60).  The irrelevant coordinates are
    drawn "similarly around n_c centres sampled uniformly inside the 120D hypercube with
    edges of length 2" ([−1, 1]) by the same rules, then each is permuted by its own random
    permutation.  ``y`` is the cluster index; relevant features are 0 … ``n_relevant`` − 1.

    Parameters
    ----------
    n_clusters : int, default 3
        n_c, the number of clusters.
    n_points : int, default 60
        Samples in all (rounded up to a multiple of ``n_clusters``).
    n_relevant : int, default 5
        Coordinates that show the clusters.
    n_irrelevant : int, default 120
        Coordinates permuted across samples.
    max_variance : float, default 0.02
        Upper end of the clusters' diagonal variances.
    random_state : int, default 0
        Seed.
    dtype : numpy dtype, default float32
        Type of X.

    Returns
    -------
    Synthetic
        ``dataset`` (a lazy ``xarray.Dataset`` with ``X`` and ``y``, the cluster index),
        ``relevant`` (the indices of the relevant features) and ``params``.

    Examples
    --------
    >>> from fsdask.datasets import qalpha_clusters
    >>> syn = qalpha_clusters(n_clusters=3)
    >>> syn.dataset["X"].shape, syn.relevant.tolist()
    ((60, 125), [0, 1, 2, 3, 4])
    """
    if n_clusters < 1 or n_points < n_clusters:
        raise ValueError(
            f"need 1 ≤ n_clusters ≤ n_points; got n_clusters={n_clusters}, n_points={n_points}"
        )
    per = math.ceil(n_points / n_clusters)
    labels = np.repeat(np.arange(n_clusters), per)
    n_features = n_relevant + n_irrelevant

    def sampler(brng: np.random.Generator, g0: int, g1: int, n: int) -> np.ndarray:
        block = _cluster_columns(brng, labels, n_clusters, g1 - g0, -1.0, 1.0, 0.0, max_variance)
        permuted = _permute_columns(brng, block)
        rel = np.arange(g0, g1) < n_relevant
        return np.where(rel[None, :], block, permuted)

    X = lazy_matrix(random_state, labels.size, n_features, sampler, dtype)
    return Synthetic(
        _dataset(X, labels, n_features),
        np.arange(n_relevant),
        {
            "generator": "qalpha_clusters",
            "n_clusters": n_clusters,
            "n_points": n_points,
            "n_samples": int(labels.size),
            "n_relevant": n_relevant,
            "n_irrelevant": n_irrelevant,
            "max_variance": max_variance,
            "random_state": random_state,
        },
    )


def qalpha_sessions(
    lam: float = 0.05,
    n_samples: int = 120,
    n_features: int = 60,
    n_relevant: int = 12,
    n_clusters: int = 3,
    session: int = 8,
    random_state: int = 0,
    dtype=np.float32,
) -> Synthetic:
    """The kernel experiment of §6 (Fig. 6): hidden ±1 "sessions" hide 12 relevant of 60 features.

    Relevant coordinates: ``n_clusters`` = 3 clusters of 40 points, Normal around a mean
    drawn uniformly from the unit hypercube [0, 1]^12 with a diagonal covariance whose
    entries are uniform in [λ, 2λ] (``lam``).  Irrelevant coordinates: drawn the same way,
    then each permuted over the samples independently.  Then every entry is multiplied by
    a hidden ±1 which is redrawn every ``session`` = 8 samples, independently per feature.
    ``y`` is the cluster index.  Relevant features are 0 … ``n_relevant`` − 1.
    """
    if n_samples % n_clusters:
        raise ValueError(f"n_samples={n_samples} must be a multiple of n_clusters={n_clusters}")
    if lam <= 0:
        raise ValueError(f"lam must be > 0; got {lam}")
    labels = np.repeat(np.arange(n_clusters), n_samples // n_clusters)
    n_sessions = math.ceil(n_samples / session)

    def sampler(brng: np.random.Generator, g0: int, g1: int, n: int) -> np.ndarray:
        width = g1 - g0
        block = _cluster_columns(brng, labels, n_clusters, width, 0.0, 1.0, lam, 2 * lam)
        permuted = _permute_columns(brng, block)
        rel = np.arange(g0, g1) < n_relevant
        block = np.where(rel[None, :], block, permuted)
        hidden = np.repeat(
            brng.choice(np.array([-1.0, 1.0]), size=(n_sessions, width)), session, axis=0
        )[:n]
        return block * hidden

    X = lazy_matrix(random_state, n_samples, n_features, sampler, dtype)
    return Synthetic(
        _dataset(X, labels, n_features),
        np.arange(n_relevant),
        {
            "generator": "qalpha_sessions",
            "lam": lam,
            "n_samples": n_samples,
            "n_features": n_features,
            "n_relevant": n_relevant,
            "n_clusters": n_clusters,
            "session": session,
            "random_state": random_state,
        },
    )


def ben_dor(
    m: int = 600,
    a: int = 25,
    b: int = 47,
    e: float = 0.72,
    d: float = 555.0,
    s: float = 0.75,
    random_state: int = 0,
    spread: str = "variance",
    dtype=np.float32,
) -> Synthetic:
    """Ben-Dor et al. (2001) microarray model as described in Wolf & Shashua §6.

    ``a`` samples of class A (y = 0) then ``b`` of class B (y = 1); ``m`` features of which
    a fraction ``e`` are irrelevant, N(0, s); the other (1 − e)·m are N(μ_A, μ_A s) or
    N(μ_B, μ_B s) by class, with μ_A, μ_B drawn per feature uniformly from [−1.5d, 1.5d].
    Defaults: the leukemia fit m = 600, a = 25, b = 47, e = 0.72, d = 555, s = 0.75.
    Relevant features come first: indices 0 … round((1 − e)·m) − 1.

    ``spread`` says how the second argument of N(·,·) is read — the paper does not say:

    * ``"variance"`` (default, the usual N(μ, σ²)): relevant entries have variance |μ|·s
      (|μ| since μ_A s < 0 for μ_A < 0), irrelevant ones variance s.  This reading agrees
      with the paper's findings ("robust to s … even for s > 1000", "the data set is not
      very difficult"): at s = 1000 the class means still differ by ≈ 0.75 standard
      deviations.
    * ``"std"``: standard deviations |μ|·s and s.  Then the class means differ by ≈ 1/s
      standard deviations, so for s ≥ 10 the relevant features are nearly pure noise and no
      selector can find them (Q-α: 0.3 of the top-R relevant at s = 10 in our check).
    """
    if not 0 <= e <= 1:
        raise ValueError(f"e must be in [0, 1]; got {e}")
    if a < 1 or b < 1 or m < 1:
        raise ValueError(f"need a, b, m ≥ 1; got a={a}, b={b}, m={m}")
    if spread not in ("variance", "std"):
        raise ValueError(f"spread={spread!r}; use 'variance' or 'std'")
    n_rel = int(round((1 - e) * m))
    labels = np.r_[np.zeros(a, int), np.ones(b, int)]

    def sampler(brng: np.random.Generator, g0: int, g1: int, n: int) -> np.ndarray:
        width = g1 - g0
        noise = brng.standard_normal((n, width))
        mu = brng.uniform(-1.5 * d, 1.5 * d, size=(2, width))
        sd_rel = np.abs(mu[labels]) * s if spread == "std" else np.sqrt(np.abs(mu[labels]) * s)
        informative = mu[labels] + sd_rel * noise
        rel = np.arange(g0, g1) < n_rel
        return np.where(rel[None, :], informative, (s if spread == "std" else np.sqrt(s)) * noise)

    X = lazy_matrix(random_state, a + b, m, sampler, dtype)
    return Synthetic(
        _dataset(X, labels, m),
        np.arange(n_rel),
        {
            "generator": "ben_dor",
            "m": m,
            "a": a,
            "b": b,
            "e": e,
            "d": d,
            "s": s,
            "spread": spread,
            "random_state": random_state,
        },
    )
