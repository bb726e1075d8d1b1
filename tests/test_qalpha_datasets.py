"""The synthetic generators of Wolf & Shashua §6 (and Weston's non-linear problem)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fsdask
from fsdask.datasets import (
    ben_dor,
    qalpha_clusters,
    qalpha_sessions,
    weston_linear,
    weston_nonlinear,
    write_synthetic,
)


@pytest.mark.parametrize("n_c", [1, 2, 4, 7])
def test_clusters_shape_labels_and_relevant(n_c):
    syn = qalpha_clusters(n_c, random_state=3)
    per = math.ceil(60 / n_c)
    X = syn.X.values.astype(float)
    assert X.shape == (n_c * per, 125)
    assert np.array_equal(syn.relevant, np.arange(5))
    assert np.array_equal(np.bincount(syn.y), np.full(n_c, per))
    # relevant coordinates: within-cluster variance ≤ .02 (plus sampling slack), centres in [-1, 1]
    for c in range(n_c):
        rows = X[syn.y == c]
        assert np.all(rows[:, :5].var(axis=0) < 0.05)
        assert np.all(np.abs(rows[:, :5].mean(axis=0)) < 1.1)
    if n_c >= 2:
        # permuted coordinates lose the cluster structure: within-cluster spread ≈ total spread
        within = np.mean([X[syn.y == c, 5:].var(axis=0) for c in range(n_c)], axis=0)
        assert np.median(within / X[:, 5:].var(axis=0)) > 0.5
        within_rel = np.mean([X[syn.y == c, :5].var(axis=0) for c in range(n_c)], axis=0)
        assert np.all(within_rel / X[:, :5].var(axis=0) < 0.5)
    assert np.all(np.abs(X) < 2)


def test_clusters_seeded_and_streamed(tmp_path):
    a = qalpha_clusters(3, random_state=1).X.values
    b = qalpha_clusters(3, random_state=1).X.values
    c = qalpha_clusters(3, random_state=2).X.values
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    from fsdask import open_dataset

    syn = qalpha_clusters(3, n_irrelevant=3000, random_state=1)
    write_synthetic(syn, tmp_path / "c.zarr", chunk_bytes=60 * 4 * 700)  # many small chunks
    ds = open_dataset(tmp_path / "c.zarr")
    assert len(ds["X"].chunks[1]) > 1
    assert np.array_equal(ds["X"].values, syn.X.values)


def test_sessions_hidden_signs_and_clusters():
    syn = qalpha_sessions(lam=0.01, random_state=0)
    X = syn.X.values.astype(float)
    assert X.shape == (120, 60)
    assert np.array_equal(syn.relevant, np.arange(12))
    assert np.array_equal(np.bincount(syn.y), [40, 40, 40])
    A = np.abs(X)
    # |x| keeps the cluster structure of the relevant coordinates: small within-cluster variance
    for c in range(3):
        assert np.all(A[syn.y == c, :12].var(axis=0) < 4 * 0.02 + 0.05)
    # the sign is constant within each 8-sample session when the mean is far from 0
    s = np.sign(X[:, :12]).reshape(15, 8, 12)
    mean = np.abs(X[:, :12]).reshape(15, 8, 12).mean(axis=1)
    std = np.abs(X[:, :12]).reshape(15, 8, 12).std(axis=1)
    clear = mean > 4 * std + 0.05
    assert clear.sum() > 50
    assert np.all(np.abs(s.sum(axis=1))[clear] == 8)
    # signs differ between sessions and between features: raw relevant features are uncorrelated on average
    C = np.corrcoef(X[:, :12].T)[np.triu_indices(12, 1)]
    assert abs(C.mean()) < 0.15
    assert np.mean(np.abs(np.diff(s[:, 0, :], axis=0)) > 0) > 0.3


def test_ben_dor_defaults_and_statistics():
    syn = ben_dor(random_state=0)
    X = syn.X.values.astype(float)
    assert X.shape == (72, 600)
    assert syn.relevant.size == round(0.28 * 600) == 168
    assert np.array_equal(np.bincount(syn.y), [25, 47])
    irr = X[:, 168:]
    assert abs(irr.var() - 0.75) < 0.03 and abs(irr.mean()) < 0.02  # N(0, s), s a variance
    rel = X[:, :168]
    within = np.r_[
        rel[syn.y == 0].var(0) / np.abs(rel[syn.y == 0].mean(0)),
        rel[syn.y == 1].var(0) / np.abs(rel[syn.y == 1].mean(0)),
    ]
    assert 0.6 < np.median(within) < 0.9  # variance |μ|·s
    old = ben_dor(random_state=0, spread="std").X.values.astype(float)
    assert abs(old[:, 168:].std() - 0.75) < 0.03  # the std reading
    with pytest.raises(ValueError, match="spread"):
        ben_dor(spread="sd")
    mA, mB = rel[syn.y == 0].mean(0), rel[syn.y == 1].mean(0)
    assert np.all(np.abs(np.r_[mA, mB]) < 1.5 * 555 * 1.5)
    # class means differ by about d in spread: |μ_A − μ_B| has mean ≈ d (difference of two U[-1.5d, 1.5d])
    assert 300 < np.abs(mA - mB).mean() < 800
    assert ben_dor(m=5, e=0.2).X.shape == (72, 5)


def test_weston_nonlinear_xor_structure():
    syn = weston_nonlinear(n_samples=2000, random_state=0)
    X = syn.X.values.astype(float)
    y = syn.y
    assert X.shape == (2000, 52) and np.array_equal(syn.relevant, [0, 1])
    assert 0.45 < (y == 1).mean() < 0.55
    prod = X[:, 0] * X[:, 1]
    assert (prod[y == 1] < 0).mean() > 0.85  # means (3, −3), (−3, 3)
    assert (prod[y == -1] > 0).mean() > 0.6  # means (−3/4, −3), (3/4, 3)
    assert abs(X[:, 2:].var() - 20) < 1.0


def test_weston_full_protocol_redraws_what_the_supervised_qalpha_cannot_fit(examples_import):
    """The reproduction's Fig. 3a protocol at its smallest training size (10 samples): every
    draw it uses holds ≥ 3 samples per class, so the supervised Q-α (k_within = 2) fits the
    tightest of them; a draw it skipped raises (that stopped the full run)."""
    from fsdask.errors import InputError

    rq = examples_import("reproduce_qalpha_synthetic", ["reproduce_qalpha_synthetic.py"])  # full

    def train(seed):
        syn = weston_linear(n_samples=510, random_state=seed)
        return syn.X.values[:10].astype(float), syn.y[:10]

    def smallest_class(seed):
        return np.unique(train(seed)[1], return_counts=True)[1].min(initial=10)

    seeds = rq._weston_seeds(10)
    assert len(seeds) == rq.WESTON_RUNS == 30
    assert min(smallest_class(s) for s in seeds) == 3
    skipped = sorted(set(range(seeds[0], seeds[-1])) - set(seeds))
    assert skipped and all(smallest_class(s) < 3 for s in skipped)
    qa = dict(k=2, max_iter=2, n_init=1, supervised=True)
    tight = min(seeds, key=smallest_class)
    with pytest.warns(Warning):  # not converged in 2 iterations
        assert np.isfinite(fsdask.QAlpha(**qa).fit(*train(tight)).scores_).all()
    with pytest.raises(InputError, match="fewer than 3 samples"):
        fsdask.QAlpha(**qa).fit(*train(skipped[0]))
