"""The reproductions' readings behind issue 44's Q-α and Zarkoob misses (examples/).

* Zarkoob's ρ sweep: with two classes SparseHSIC's selection at every count is the top m of
  one ranking (|μ₁ − μ₀|), and the fast nested LOO gives fsdask.evaluate's errors.
* Ben-Dor: read with μs a standard deviation, Q-α is exactly invariant to d.
* Weston: the population correlation the diagnosis uses is the generator's, and the
  unsupervised criterion's optimum on it gives features 4–6 no weight.
"""

from __future__ import annotations

import numpy as np
import pytest

import fsdask
from fsdask.datasets import ben_dor, weston_linear


def _two_class(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], [13, 11])
    X = rng.normal(size=(y.size, 40)) * rng.uniform(0.5, 3, size=40)
    X[:, :4] += 0.9 * y[:, None] * np.array([1.0, -1.0, 0.7, 0.5])
    return X, y


def test_hsic_rho_sweep_is_nested_and_its_loo_is_evaluate_s(examples_import):
    from fsdask.evaluate import evaluate

    ht = examples_import("reproduce_hsic_tables", ["reproduce_hsic_tables.py", "--quick"])
    peers = examples_import("_peers", ["reproduce_hsic_tables.py", "--quick"])
    X, y = _two_class()
    order = ht.mean_difference_order(X, y)
    ms = [1, 3, 8, 40]
    fast = peers.loo_svm_errors_nested(X, y, order, ms)
    assert fast.max() > 0  # the check compares real error counts, not a row of zeros
    for m, e in zip(ms, fast):
        hsic = fsdask.SparseHSIC(n_features_to_select=m, rho_grid=None, standardize=False)
        assert set(np.flatnonzero(hsic.fit(X, y).support_)) == set(order[:m])
        ref = evaluate(
            X, y, hsic, protocol="loo", classifier="svm", n_features=[m], selection="once"
        )
        assert ref.best_n_errors == e, m


def test_hsic_sweep_counts_cover_one_to_the_total(examples_import):
    ht = examples_import("reproduce_hsic_tables", ["reproduce_hsic_tables.py", "--quick"])
    ms = ht.sweep_counts(12600)
    assert ms[: ht.SWEEP_EVERY] == list(range(1, ht.SWEEP_EVERY + 1))
    assert ms[-1] == 12600 and ms == sorted(set(ms))
    assert ht.sweep_counts(7) == list(range(1, 8))


def test_lymphoma_splits_are_the_documented_class_sizes(examples_import):
    ht = examples_import("reproduce_hsic_tables", ["reproduce_hsic_tables.py", "--quick"])
    # lymphoma_alizadeh96's codes 1 … 9 (y 0 … 8) have the sizes 46 2 2 10 6 6 9 4 11
    y = np.repeat(np.arange(9), [46, 2, 2, 10, 6, 6, 9, 4, 11])
    assert np.bincount(ht.two_class("lymphoma_alizadeh96", y)).tolist() == [50, 46]
    assert np.bincount(ht.two_class("lymphoma_alizadeh96/malignant", y)).tolist() == [30, 66]


def _alpha(**kw) -> np.ndarray:
    syn = ben_dor(m=200, random_state=5, **kw)
    return fsdask.QAlpha(k=2, max_iter=40, tol=1e-5, supervised=False).fit(syn.X.values).scores_


def test_ben_dor_read_with_a_standard_deviation_is_invariant_to_d():
    a1 = _alpha(d=1.0, spread="std")
    np.testing.assert_allclose(_alpha(d=555.0, spread="std"), a1, atol=1e-5)
    # read as a variance, the class separation grows like √d: the weights change
    assert np.abs(_alpha(d=555.0) - _alpha(d=1.0)).max() > 1e-2


def test_weston_population_correlation_is_the_generator_s(examples_import):
    rq = examples_import("reproduce_qalpha_synthetic", ["reproduce_qalpha_synthetic.py", "--quick"])
    X = weston_linear(n_samples=20000, n_features=8, random_state=3).X.values[:, :6]
    np.testing.assert_allclose(np.corrcoef(X.T), rq.weston_population_corr(), atol=0.03)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_weston_population_optimum_gives_features_4_to_6_no_weight(examples_import, k):
    rq = examples_import("reproduce_qalpha_synthetic", ["reproduce_qalpha_synthetic.py", "--quick"])
    alpha = np.abs(rq.weston_population_alpha(k))
    assert alpha[:3].min() > 0.3
    assert alpha[3:].max() < 1e-6
