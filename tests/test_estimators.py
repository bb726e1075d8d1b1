"""Every fsdask estimator is a scikit-learn estimator: check_estimator, pipelines, set_output,
feature names, sparse input, declarative parameter checks."""

import pickle
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import xarray as xr
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

import fsdask
from fsdask.errors import ParameterError
from fsdask.methods import FILTER_SCORES
from fsdask.methods.cpfs import CPFS
from fsdask.methods.filters import Filter, LaplacianScore
from fsdask.methods.hsic import SparseHSIC
from fsdask.methods.logo import Logo
from fsdask.methods.pca_based import PFA, JolliffeI, JolliffeNI, SparsePCASelector
from fsdask.methods.qalpha import QAlpha
from fsdask.testing import expected_failed_checks

ESTIMATORS = {
    **{f"Filter({s})": (lambda s=s: Filter(s)) for s in FILTER_SCORES},
    "LaplacianScore": LaplacianScore,
    "QAlpha": lambda: QAlpha(max_iter=3, supervised=False),
    "Logo": lambda: Logo(max_iter=5),
    "SparseHSIC": lambda: SparseHSIC(n_features_to_select=1),
    "CPFS": CPFS,
    "JolliffeI": JolliffeI,
    "JolliffeNI": JolliffeNI,
    "PFA": PFA,
    "SparsePCASelector": lambda: SparsePCASelector(max_bisect=3),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_check_estimator(name):
    est = ESTIMATORS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(est, expected_failed_checks=expected_failed_checks(est))


@pytest.fixture
def data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 10))
    y = np.arange(40) % 2
    X[:, [2, 7]] += 2.0 * y[:, None]
    return X, y


def test_pipeline_gridsearch_clone_pickle(data):
    X, y = data
    pipe = Pipeline(
        [("scale", StandardScaler()), ("select", Filter("ttest")), ("clf", LogisticRegression())]
    )
    grid = GridSearchCV(pipe, {"select__n_features_to_select": [1, 2, 4]}, cv=3).fit(X, y)
    assert grid.best_params_["select__n_features_to_select"] in (1, 2, 4)
    sel = grid.best_estimator_.named_steps["select"]
    assert set(np.flatnonzero(sel.get_support())) <= {2, 7} or sel.n_features_to_select == 4
    # a selector as the last step
    last = Pipeline([("scale", StandardScaler()), ("select", Filter("f", n_features_to_select=2))])
    assert last.fit_transform(X, y).shape == (40, 2)
    twin = clone(Filter("f", n_features_to_select=2))
    assert twin.get_params() == Filter("f", n_features_to_select=2).get_params() and not hasattr(
        twin, "scores_"
    )
    back = pickle.loads(pickle.dumps(last))
    np.testing.assert_array_equal(back.transform(X), last.transform(X))


def test_set_output_feature_names_and_inverse_transform(data):
    X, y = data
    cols = [f"gene{j}" for j in range(X.shape[1])]
    df = pd.DataFrame(X, columns=cols)
    f = Filter("ttest", n_features_to_select=2).set_output(transform="pandas").fit(df, y)
    out = f.transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["gene2", "gene7"]
    assert list(f.feature_names_in_) == cols and list(f.get_feature_names_out()) == [
        "gene2",
        "gene7",
    ]
    back = f.inverse_transform(out.to_numpy())
    assert back.shape == X.shape and np.all(back[:, [0, 1]] == 0)
    np.testing.assert_array_equal(back[:, [2, 7]], X[:, [2, 7]])
    xa = xr.DataArray(X, dims=("sample", "feature"), coords={"feature": cols})
    g = Filter("ttest", n_features_to_select=2).fit(xa, y)
    assert list(g.feature_names_in_) == cols and list(g.transform(xa)["feature"].values) == [
        "gene2",
        "gene7",
    ]
    h = Filter("ttest", n_features_to_select=2).fit(X, y)
    assert not hasattr(h, "feature_names_in_") and list(h.get_feature_names_out()) == ["x2", "x7"]


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_scipy_sparse_input(data, fmt):
    X, y = data
    X = np.where(np.abs(X) > 0.8, X, 0.0)
    S = scipy.sparse.csr_matrix(X) if fmt == "csr" else scipy.sparse.csc_matrix(X)
    for est in (Filter("ttest", n_features_to_select=3), JolliffeNI(n_features_to_select=3)):
        dense = clone(est).fit(X, y if est.requires_y else None)
        sparse = clone(est).fit(S, y if est.requires_y else None)
        np.testing.assert_allclose(sparse.scores_, dense.scores_, rtol=1e-12)
        assert sparse.transform(S).shape == (40, 3)


def test_score_keyword_still_works_with_a_future_warning(data):
    X, y = data
    with pytest.warns(FutureWarning, match="statistic"):
        old = Filter(score="snr", n_features_to_select=3)
    assert old.statistic == "snr" and "score" not in old.get_params()
    np.testing.assert_array_equal(
        old.fit(X, y).scores_, Filter(statistic="snr", n_features_to_select=3).fit(X, y).scores_
    )
    with pytest.raises(TypeError, match="scor"):
        Filter(scor="snr")


@pytest.mark.parametrize(
    "est, param, value",
    [
        (Logo(), "sigma", np.nan),
        (Logo(), "lam", np.nan),
        (Logo(), "sigma", np.inf),
        (QAlpha(), "tol", np.nan),
        (QAlpha(), "gamma", np.nan),
        (SparseHSIC(), "tol", np.nan),
        (SparseHSIC(), "gamma", np.nan),
        (CPFS(), "lam", -np.inf),
        (Logo(), "max_iter", 2.0),
        (Logo(), "eliminate", "false"),
    ],
)
def test_issue12_nan_inf_parameters_refused_by_name(data, est, param, value):
    X, y = data
    with pytest.raises(ParameterError, match=f"'{param}' parameter of {type(est).__name__}"):
        est.set_params(**{param: value}).fit(X, y)


def test_cli_bad_parameter_exits_2(tmp_path, data):
    X, y = data
    fsdask.ingest(X, tmp_path / "d.zarr", y=y)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsdask.cli",
            "select",
            str(tmp_path / "d.zarr"),
            "--method",
            "logo",
            "--param",
            "sigma=.nan",
            "-o",
            str(tmp_path / "r.zarr"),
        ],
        capture_output=True,
        text=True,
    )
    assert (
        p.returncode == 2
        and "'sigma' parameter of Logo" in p.stderr
        and "Traceback" not in p.stderr
    )
    assert not (tmp_path / "r.zarr").exists()


def test_feature_names_are_made_strings_only_when_asked(rng):
    # 10⁶ str() calls cost more than a SparseHSIC fit's work after its pass over X
    calls = []

    class Name:
        def __init__(self, j):
            self.j = j

        def __str__(self):
            calls.append(self.j)
            return f"f{self.j}"

    X = rng.normal(size=(20, 12))
    y = np.repeat([0, 1], 10)
    xa = xr.DataArray(
        X, dims=("sample", "feature"), coords={"feature": [Name(j) for j in range(12)]}
    )
    f = Filter("ttest", n_features_to_select=2).fit(xa, y)
    assert calls == []
    assert list(f.feature_names_in_) == [f"f{j}" for j in range(12)]
    assert len(calls) == 12
    f.feature_names_in_  # noqa: B018 - made once
    assert len(calls) == 12
