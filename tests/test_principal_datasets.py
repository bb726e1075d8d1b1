"""The principal-features model (fsdask.datasets.principal_sources) and CPFS on it."""

from __future__ import annotations

import numpy as np
import pytest

import fsdask
from fsdask.datasets import principal_sources, write_synthetic


def test_every_column_is_a_noisy_multiple_of_one_source():
    syn = principal_sources(n_samples=400, n_features=300, n_sources=4, random_state=1)
    X = syn.X.values.astype(np.float64)
    assert X.shape == (400, 300) and "y" not in syn.dataset
    assert np.array_equal(syn.relevant, np.arange(4))
    S = X[:, :4]
    assert np.allclose(S.T @ S / 400, np.eye(4), atol=0.2)  # independent N(0, 1) sources
    coef, *_ = np.linalg.lstsq(S, X[:, 4:], rcond=None)
    top = np.abs(coef).max(axis=0)
    rest = np.sort(np.abs(coef), axis=0)[-2]  # the second-largest loading of each column
    assert np.all((top > 0.12) & (top < 0.5)) and np.all(rest < 0.12)  # |w| in [0.2, 0.4]
    noise = (X[:, 4:] - S @ coef).std(axis=0)
    assert np.allclose(noise, 0.5, rtol=0.2)
    assert set(np.abs(coef).argmax(axis=0)) == set(range(4))  # every source has copies


def test_data_do_not_depend_on_the_store_chunks(tmp_path):
    syn = principal_sources(n_samples=20, n_features=3000, n_sources=3, random_state=2)
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    write_synthetic(syn, a, chunk_bytes=20 * 4 * 700)
    write_synthetic(syn, b)
    xa, xb = fsdask.open_dataset(a)["X"].values, fsdask.open_dataset(b)["X"].values
    assert np.array_equal(xa, xb)
    assert np.array_equal(xa, syn.X.values)


@pytest.mark.parametrize(
    "kw", [{"n_sources": 0}, {"n_sources": 50, "n_features": 50}, {"weights": (0.5, 1.2)}]
)
def test_bad_parameters_are_refused(kw):
    with pytest.raises(ValueError, match="n_sources|weights"):
        principal_sources(**kw)


@pytest.mark.parametrize("seed", [0, 1])
def test_cpfs_at_its_defaults_keeps_the_sources(seed):
    syn = principal_sources(n_samples=100, n_features=2000, n_sources=10, random_state=seed)
    est = fsdask.CPFS(n_features_to_select=10).fit(syn.X.values)
    assert set(np.flatnonzero(est.support_)) == set(range(10))
