"""No dask task holds all p features: per-feature results are joined on the client.

``dask.compute`` of an array chunked by feature block ends in one finalize task that
concatenates every chunk — on a worker, under distributed, so that task's memory grows with
p whatever the block size (tests/test_infra_outofcore.py shows it on 500 MB workers).  Here
a dask callback sees every task's result on a small X of 5 feature blocks: none may have an
axis of length p.  Seconds, on the synchronous scheduler.
"""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

import fsdask
from fsdask._validation import check_array
from fsdask.evaluate import evaluate
from fsdask.io.ingest import apply_nan_policy
from fsdask.linalg import gram_factor
from fsdask.linalg.execution import Execution

N, P, BLOCK = 24, 250, 50  # 5 feature blocks; p differs from every other size involved


class WideTasks(Callback):
    """Records the tasks whose result has an axis of length p (one task holding every feature)."""

    def __init__(self):
        super().__init__()
        self.wide: list[tuple[str, tuple]] = []

    def _posttask(self, key, result, dsk, state, id):
        for r in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(r, np.ndarray) and P in r.shape:
                self.wide.append((str(key), r.shape))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], N // 2)
    X = rng.normal(size=(N, P))
    X[y == 1, :5] += 2.0
    # inlined: no graph key holds X whole, every read task gives one block
    return da.from_array(X, chunks=(N, BLOCK), inline_array=True), y


def _fit(name, **params):
    return lambda X, y: fsdask.get_method(name, **params).fit(X, y)


CASES = {
    "laplacian_score": _fit("laplacian_score"),
    "logo": _fit("logo", max_iter=3),
    "logo_out_of_budget": _fit("logo", max_iter=2, memory_budget=0, standardize=False),
    "persisted_columns": lambda X, y: _persisted(X).columns(np.arange(P)),
    "cpfs": _fit("cpfs", n_features_to_select=5),
    "jolliffe_i": _fit("jolliffe_i", n_features_to_select=5),
    "pfa": _fit("pfa", n_features_to_select=5),
    "spca": _fit("spca", n_features_to_select=5, max_bisect=3),
    "hsic": _fit("hsic", n_features_to_select=5),
    "qalpha": _fit("qalpha", max_iter=2, random_state=0),
    "ttest": _fit("ttest"),
    "gram_factor_gram": lambda X, y: gram_factor(X),
    "gram_factor_tsqr": lambda X, y: gram_factor(X, method="tsqr"),
    "check_finite": lambda X, y: check_array(X),
    "nan_policy_mean": lambda X, y: apply_nan_policy(X.map_blocks(_with_nan, meta=X._meta), "mean"),
    "evaluate_folds": lambda X, y: evaluate(
        X, y, "ttest", protocol="kfold", n_splits=2, n_features=3, parallel="folds"
    ),
}


def _persisted(X):
    """A persisted operator (budget 0), as Logo's Z̄ out of budget, whose columns are gathered."""
    return Execution(0).operator(lambda xb: 2.0 * xb, X)


def _with_nan(b: np.ndarray) -> np.ndarray:
    b = b.copy()
    b[3, ::7] = np.nan
    return b


@pytest.mark.parametrize("case", list(CASES))
def test_no_task_holds_every_feature(data, case):
    X, y = data
    spy = WideTasks()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence on a toy X is not the point here
        with spy, dask.config.set(scheduler="sync"):
            CASES[case](X, y)
    assert spy.wide == [], f"{case}: tasks with a p-long axis {sorted(set(spy.wide))[:3]}"
