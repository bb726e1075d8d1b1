"""PCA-based baselines (Jolliffe I/NI, PFA, SPCA) against dense numpy references."""

import dask.array as da
import numpy as np
import pytest

import fsdask
from fsdask.testing import SelectorChecks


@pytest.fixture
def X(rng):
    return rng.normal(size=(40, 12)) @ rng.normal(size=(12, 12)) + 0.3 * rng.normal(size=(40, 12))


def _pcs(X):
    Xc = X - X.mean(0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    return s, Vt.T


def test_jolliffe_ni_matches_numpy(X):
    q = 5
    e = fsdask.JolliffeNI(n_features_to_select=q).fit(da.from_array(X, chunks=(40, 5)))
    _, V = _pcs(X)
    picked = []
    for k in range(q):
        order = np.argsort(-np.abs(V[:, k]))
        picked.append(next(j for j in order if j not in picked))
    assert set(e.get_support(indices=True)) == set(picked)
    assert list(np.argsort(e.ranking_)[:q]) == picked


def test_jolliffe_i_matches_numpy(X):
    q = 6
    e = fsdask.JolliffeI(n_features_to_select=q).fit(X)
    picked, rest = [], list(range(X.shape[1]))
    for _ in range(q):
        _, V = _pcs(X[:, rest])
        j = rest[int(np.argmax(np.abs(V[:, 0])))]
        picked.append(j)
        rest.remove(j)
    assert e.result_.attrs["pick_order"] == picked
    assert set(e.get_support(indices=True)) == set(picked)


def test_pfa_one_feature_per_cluster_and_seeded(X):
    a = fsdask.PFA(n_features_to_select=4, random_state=3).fit(X)
    b = fsdask.PFA(n_features_to_select=4, random_state=3).fit(X)
    assert a.support_.sum() == 4
    np.testing.assert_array_equal(a.support_, b.support_)
    # duplicated features have identical loadings → same cluster → at most one of them is kept
    Xd = np.column_stack([X, X[:, 0], X[:, 0]])
    c = fsdask.PFA(n_features_to_select=3, n_components=2).fit(Xd)
    assert c.support_[[0, 12, 13]].sum() <= 1


def test_spca_selects_q_nonzero_loadings(X):
    e = fsdask.SparsePCASelector(n_features_to_select=3).fit(X)
    assert e.support_.sum() == 3
    assert e.result_.attrs["nnz"] >= 3
    assert fsdask.get_method("spca", n_features_to_select=2).fit(X).support_.sum() == 2


def test_cpfs_beats_or_ties_jolliffe_i_on_reconstruction(X):
    from fsdask.evaluate import reconstruction_error

    for q in (3, 6):
        c = fsdask.CPFS(n_features_to_select=q).fit(X)
        j = fsdask.JolliffeI(n_features_to_select=q).fit(X)
        assert (
            reconstruction_error(X, c.get_support(indices=True))
            <= reconstruction_error(X, j.get_support(indices=True)) + 0.05
        )


class _PCAChecks(SelectorChecks):
    cluster_exact = False  # the Gram / eigh run in threaded BLAS on the driver

    cls = "JolliffeI"

    def make_estimator(self, **params):
        return getattr(fsdask, self.cls)(**{"n_features_to_select": 3, **params})


class TestJolliffeI(_PCAChecks):
    cls = "JolliffeI"


class TestJolliffeNI(_PCAChecks):
    cls = "JolliffeNI"


class TestPFA(_PCAChecks):
    cls = "PFA"


class TestSparsePCASelector(_PCAChecks):
    cls = "SparsePCASelector"

    def make_estimator(self, **params):
        return fsdask.SparsePCASelector(**{"n_features_to_select": 3, "max_bisect": 8, **params})
