"""The Logo paper's generators: Fermat's spiral (§4.1) and N(0, 1) noise features (§4.2)."""

import numpy as np
import pytest

from fsdask.datasets import add_noise_features, fermat_spiral, write_synthetic
from fsdask.io import open_dataset


def test_spiral_matches_the_papers_description():
    syn = fermat_spiral(300, random_state=3)
    X, y = syn.X.values, syn.y
    assert X.shape == (460, 302)  # 230 samples per class, 2 + 300 features
    assert np.bincount(y).tolist() == [230, 230]
    assert syn.relevant.tolist() == [0, 1]
    a, b = X[y == 0, :2].astype(float), X[y == 1, :2].astype(float)
    np.testing.assert_allclose(b, -a, rtol=1e-6)  # class 1 is the other branch of the spiral
    r = np.hypot(a[:, 0], a[:, 1])
    theta = np.arctan2(a[:, 1], a[:, 0]) % (2 * np.pi)
    np.testing.assert_allclose(
        r, 3.0 * np.sqrt(theta / (2 * np.pi)), atol=1e-5
    )  # r = c·sqrt(θ) (Fermat)
    noise = X[:, 2:].astype(float)
    assert abs(noise.mean()) < 0.02 and abs(noise.std() - 1.0) < 0.02
    # irrelevant features carry no class information: class means agree
    diff = noise[y == 0].mean(0) - noise[y == 1].mean(0)
    assert np.abs(diff).max() < 0.5


def test_spiral_relevant_pair_separates_classes_only_jointly():
    from sklearn.model_selection import cross_val_score
    from sklearn.neighbors import KNeighborsClassifier

    syn = fermat_spiral(2, random_state=0)
    X, y = syn.X.values.astype(float), syn.y
    both = cross_val_score(KNeighborsClassifier(3), X[:, :2], y, cv=5).mean()
    one = max(cross_val_score(KNeighborsClassifier(3), X[:, [j]], y, cv=5).mean() for j in (0, 1))
    assert both > 0.95 and one < 0.8


def test_spiral_is_lazy_seeded_and_chunking_independent(tmp_path):
    big = fermat_spiral(1_000_000, random_state=1)
    assert big.X.shape == (460, 1_000_002)
    assert len(big.X.data.chunks[1]) > 1  # nothing computed: a lazy block graph
    a = big.X.data[:, 500_000:500_010].compute()
    b = fermat_spiral(1_000_000, random_state=1).X.data[:, 500_000:500_010].compute()
    np.testing.assert_array_equal(a, b)
    small = fermat_spiral(3000, random_state=1)
    write_synthetic(small, tmp_path / "a.zarr", chunk_bytes=460 * 4 * 700)
    write_synthetic(small, tmp_path / "b.zarr", chunk_bytes=460 * 4 * 3000)
    A, B = open_dataset(tmp_path / "a.zarr"), open_dataset(tmp_path / "b.zarr")
    assert len(A["X"].chunks[1]) > len(B["X"].chunks[1])
    np.testing.assert_array_equal(A["X"].values, B["X"].values)
    np.testing.assert_array_equal(A["X"].values[:, :1002], big.X.data[:, :1002].compute())
    assert A.attrs.get("relevant_features", [0, 1]) == [0, 1]
    assert not np.array_equal(fermat_spiral(5, random_state=2).X.values, small.X.values[:, :7])


def test_add_noise_features_appends_lazy_standard_normals():
    rng = np.random.default_rng(0)
    X = rng.uniform(5, 6, size=(80, 7)).astype(np.float32)
    y = np.arange(80) % 2
    syn = add_noise_features(X, 5000, random_state=4, y=y)
    Xn = syn.X
    assert Xn.shape == (80, 5007) and syn.relevant.tolist() == list(range(7))
    vals = Xn.values
    np.testing.assert_array_equal(vals[:, :7], X)  # originals first, unchanged
    noise = vals[:, 7:].astype(float)
    assert abs(noise.mean()) < 0.01 and abs(noise.std() - 1.0) < 0.01
    np.testing.assert_array_equal(syn.y, y)
    again = add_noise_features(X, 5000, random_state=4).X.values
    np.testing.assert_array_equal(again, vals)
    other = add_noise_features(X, 5000, random_state=5).X.values
    assert not np.array_equal(other[:, 7:], vals[:, 7:])


def test_add_noise_features_to_a_dataset_streams(tmp_path):
    import xarray as xr

    X = np.arange(40, dtype=np.float64).reshape(10, 4)
    ds = xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", np.arange(10) % 2)})
    syn = add_noise_features(ds, 2500, random_state=0)
    assert syn.X.dtype == np.float64 and syn.y.tolist() == (np.arange(10) % 2).tolist()
    write_synthetic(syn, tmp_path / "n.zarr", chunk_bytes=10 * 8 * 1024)
    back = open_dataset(tmp_path / "n.zarr")
    np.testing.assert_array_equal(back["X"].values, syn.X.values)
    with pytest.raises(ValueError):
        add_noise_features(X, -1)
