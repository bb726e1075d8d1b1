"""examples/_peers.py's vectorised ReliefF gives scikit-rebate's ReliefF weights.

The reproductions rank with the vectorised copy (skrebate's loops are too slow for them);
these cases pin it to skrebate on every branch of its rule: two classes and three, continuous,
discrete and mixed features, and k larger than a class (the sample itself becomes a hit)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

skrebate = pytest.importorskip("skrebate")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _peers import relieff_order, relieff_scores  # noqa: E402


def _data(kind: str, n_classes: int, seed: int = 0, n: int = 40, p: int = 12, effect=0.8):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, n)
    y[:n_classes] = np.arange(n_classes)  # every class present
    cont = rng.normal(size=(n, p)) + effect * y[:, None] * (np.arange(p) < 3)
    disc = rng.integers(0, 4, (n, p)).astype(float)
    disc[:, 0] = (y + rng.integers(0, 2, n)) % 4  # one informative discrete feature
    X = {"continuous": cont, "discrete": disc, "mixed": np.hstack([disc[:, :5], cont])}[kind]
    return X, y


def _skrebate(X, y, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = skrebate.ReliefF(n_neighbors=k, n_jobs=1).fit(X.copy(), y.copy())
    return est.feature_importances_


@pytest.mark.parametrize("kind", ["continuous", "discrete", "mixed"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("k", [3, 30])
def test_relieff_equals_skrebate(kind, n_classes, k):
    X, y = _data(kind, n_classes)
    ours = relieff_scores(X, y, k=k)
    np.testing.assert_allclose(ours, _skrebate(X, y, k), rtol=1e-9, atol=1e-12)


def test_relieff_ranks_the_informative_features_first():
    X, y = _data("continuous", 2, n=120, p=40, effect=2.0)
    assert set(relieff_order(X, y)[:3]) == {0, 1, 2}


def test_relieff_refuses_a_continuous_target():
    X, _ = _data("continuous", 2)
    with pytest.raises(ValueError, match="2–10 classes"):
        relieff_scores(X, np.arange(len(X)))
