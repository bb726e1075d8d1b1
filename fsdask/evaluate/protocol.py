"""Cross-validation protocols of the papers: LOO / stratified k-fold, linear SVM or KNN, and
error as a function of the number of top-ranked features fed to the classifier.

Two ways of placing the selection, always labelled in the output:

* ``selection="inside"`` — the selector is refit on the training part of every fold and the
  held-out samples never influence which features are fed in (honest; Ambroise &
  McLachlan, PNAS 99:6562, 2002, show what happens otherwise);
* ``selection="once"`` — features are ranked once on *all* samples, then only the classifier
  is cross-validated.  Several of the papers report this protocol; it is optimistic.

For every m in ``n_features`` the classifier is trained on the m best-ranked features (the
papers' "successively fed" curves).  Features are standardised inside each fold (mean and
standard deviation of the training part only) before the classifier sees them.

Folds run in parallel as dask tasks when X fits in memory (each fold's selection then runs
single-threaded inside its task); otherwise folds run one after another and each selection
uses the active scheduler over the feature blocks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from typing import Any, Literal, Sequence

import dask
import numpy as np
import pandas as pd
import xarray as xr

from fsdask.errors import InputError, MissingDependencyError, ParameterError
from fsdask.evaluate.metrics import jaccard_stability, kuncheva_index
from fsdask.linalg.execution import fits
from fsdask.linalg.reductions import compute_blocks

log = logging.getLogger("fsdask")

PROTOCOLS = ("loo", "kfold")
SELECTIONS = ("inside", "once")
CLASSIFIERS = ("svm", "knn")


def _sklearn():
    try:
        import sklearn  # noqa: F401
        from sklearn.model_selection import LeaveOneOut, StratifiedKFold
        from sklearn.neighbors import KNeighborsClassifier
        from sklearn.svm import SVC
    except ImportError as exc:
        raise MissingDependencyError(
            "evaluation with a classifier needs scikit-learn, an optional dependency: "
            "pip install 'fsdask[eval]'"
        ) from exc
    return SVC, KNeighborsClassifier, LeaveOneOut, StratifiedKFold


# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class EvaluationResult:
    """Cross-validated error of a ranking as a function of the number of top features.

    Attributes
    ----------
    curve : pandas.DataFrame
        Index ``n_features`` (m); columns ``error_rate``, ``n_errors``, ``n_tested``.
    best_error, best_n_features
        The lowest error rate and the smallest m attaining it.
    protocol, n_splits, selection, classifier
        How it was measured (``"loo"``/``"kfold"``; ``"inside"``/``"once"``; ``"svm"``/``"knn"``).
    stability : dict
        ``{"k", "kuncheva", "jaccard"}``: agreement of the top-k sets of the fold rankings
        (NaN for ``selection="once"``, where there is one ranking).
    fold_rankings : numpy.ndarray
        (n_rankings, k_max) feature indices in rank order, one row per fold (one row for "once").
    """

    curve: pd.DataFrame
    protocol: str
    n_splits: int
    selection: str
    classifier: str
    classifier_params: dict
    method: str
    method_params: dict
    n_samples: int
    n_features_total: int
    stability: dict
    fold_rankings: np.ndarray
    feature_names: np.ndarray | None = None
    standardized: bool = True
    random_state: int | None = 0
    wall_time_s: float = 0.0

    @property
    def best_error(self) -> float:
        return float(self.curve["error_rate"].min())

    @property
    def best_n_features(self) -> int:
        er = self.curve["error_rate"]
        return int(er.index[np.argmax(er.values == er.min())])

    @property
    def best_n_errors(self) -> int:
        return int(self.curve.loc[self.best_n_features, "n_errors"])

    @property
    def label(self) -> str:
        """One line saying exactly how the numbers were obtained."""
        prot = (
            f"LOO ({self.n_splits} folds)"
            if self.protocol == "loo"
            else f"stratified {self.n_splits}-fold CV (random_state={self.random_state})"
        )
        sel = (
            "selection refit inside each training fold (honest)"
            if self.selection == "inside"
            else "selection ONCE on all samples, only the classifier cross-validated (optimistic)"
        )
        if self.classifier == "svm":
            clf = f"linear SVM (C={self.classifier_params.get('C', 1.0):g})"
        else:
            clf = f"{self.classifier_params.get('n_neighbors', 3)}-NN (Euclidean, majority vote)"
        std = (
            "features standardised within each training fold"
            if self.standardized
            else "raw features"
        )
        return f"{prot}; {sel}; {clf}; {std}"

    def top_features(self, k: int = 10) -> list[str]:
        """Names (or indices) of the first fold ranking's top ``k`` features."""
        idx = self.fold_rankings[0, :k]
        if self.feature_names is not None:
            return [str(self.feature_names[i]) for i in idx]
        return [str(i) for i in idx]

    def summary(self) -> str:
        st = self.stability
        stab = (
            ""
            if not np.isfinite(st.get("kuncheva", np.nan))
            else f"; stability of top-{st['k']}: Kuncheva {st['kuncheva']:.3f}, Jaccard {st['jaccard']:.3f}"
        )
        return (
            f"{self.method}: best error {self.best_error:.4f} ({self.best_n_errors}/{self.n_samples}) "
            f"with the top {self.best_n_features} feature(s){stab}\n[{self.label}]"
        )

    def to_markdown(self, rows: Sequence[int] | None = None) -> str:
        """Markdown: the protocol label, best error, stability, and the curve at ``rows``
        (default: 1, 2, 3, 5, 10, 20, 30, 40, 50 and the best m; pass ``rows="all"``)."""
        c = self.curve
        if rows == "all":
            sel = list(c.index)
        else:
            wanted = rows or [1, 2, 3, 5, 10, 20, 30, 40, 50, 100, 200]
            sel = sorted(
                {m for m in wanted if m in c.index} | {self.best_n_features, int(c.index[-1])}
            )
        lines = [
            f"**{self.method}** — {self.label}",
            "",
            f"best error {self.best_error:.4f} ({self.best_n_errors}/{self.n_samples} errors) "
            f"at {self.best_n_features} feature(s)",
        ]
        if np.isfinite(self.stability.get("kuncheva", np.nan)):
            lines[-1] += (
                f"; top-{self.stability['k']} stability across folds: Kuncheva "
                f"{self.stability['kuncheva']:.3f}, Jaccard {self.stability['jaccard']:.3f}"
            )
        lines += ["", "| features | errors | error rate |", "|---:|---:|---:|"]
        for m in sel:
            lines.append(f"| {m} | {int(c.loc[m, 'n_errors'])} | {c.loc[m, 'error_rate']:.4f} |")
        return "\n".join(lines) + "\n"

    def to_dataset(self) -> xr.Dataset:
        """The evaluation as an xarray Dataset (``cv_*`` names, so it merges into a result)."""
        c = self.curve
        ds = xr.Dataset(
            {
                "cv_error_rate": ("cv_n_features", c["error_rate"].to_numpy(np.float64)),
                "cv_n_errors": ("cv_n_features", c["n_errors"].to_numpy(np.int64)),
                "cv_n_tested": ("cv_n_features", c["n_tested"].to_numpy(np.int64)),
                "cv_fold_ranking": (
                    ("cv_fold", "cv_top"),
                    np.asarray(self.fold_rankings, np.int64),
                ),
            },
            coords={"cv_n_features": c.index.to_numpy(np.int64)},
        )
        st = self.stability
        ds.attrs = {
            "cv_protocol": self.protocol,
            "cv_n_splits": int(self.n_splits),
            "cv_selection": self.selection,
            "cv_classifier": self.classifier,
            "cv_classifier_params": dict(self.classifier_params),
            "cv_method": self.method,
            "cv_method_params": dict(self.method_params),
            "cv_n_samples": int(self.n_samples),
            "cv_n_features_total": int(self.n_features_total),
            "cv_standardized": int(bool(self.standardized)),
            "cv_random_state": -1 if self.random_state is None else int(self.random_state),
            "cv_best_error": self.best_error,
            "cv_best_n_features": self.best_n_features,
            "cv_stability_k": int(st.get("k", 0)),
            "cv_kuncheva": float(st.get("kuncheva", np.nan)),
            "cv_jaccard": float(st.get("jaccard", np.nan)),
            "cv_label": self.label,
            "cv_wall_time_s": round(float(self.wall_time_s), 3),
        }
        if self.feature_names is not None:
            names = np.asarray(
                [str(v) for v in np.asarray(self.feature_names).ravel()], dtype=object
            )
            ds["cv_fold_ranking_feature"] = (
                ("cv_fold", "cv_top"),
                names[np.asarray(self.fold_rankings)],
            )
        return ds

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> EvaluationResult:
        """Rebuild from :meth:`to_dataset` output (e.g. a store written by ``fsdask evaluate``)."""
        import json

        if "cv_error_rate" not in ds:
            raise InputError(
                "not an fsdask evaluation (no variable 'cv_error_rate'); make one with "
                "`fsdask evaluate DATA … --output EVAL`"
            )
        a = dict(ds.attrs)
        for k in ("cv_classifier_params", "cv_method_params"):
            if isinstance(a.get(k), str):
                try:
                    a[k] = json.loads(a[k])
                except ValueError:
                    a[k] = {}
        curve = pd.DataFrame(
            {
                "error_rate": ds["cv_error_rate"].values,
                "n_errors": ds["cv_n_errors"].values,
                "n_tested": ds["cv_n_tested"].values,
            },
            index=pd.Index(ds["cv_n_features"].values.astype(int), name="n_features"),
        )
        names = None
        if "cv_fold_ranking_feature" in ds:
            n_tot = int(a.get("cv_n_features_total", 0))
            names_map = {}
            for i, f in zip(
                ds["cv_fold_ranking"].values.ravel(), ds["cv_fold_ranking_feature"].values.ravel()
            ):
                names_map[int(i)] = str(f)
            names = np.array([names_map.get(i, str(i)) for i in range(n_tot)], dtype=object)
        rs = int(a.get("cv_random_state", 0))
        return cls(
            curve=curve,
            protocol=a.get("cv_protocol", "?"),
            n_splits=int(a.get("cv_n_splits", 0)),
            selection=a.get("cv_selection", "?"),
            classifier=a.get("cv_classifier", "?"),
            classifier_params=a.get("cv_classifier_params") or {},
            method=a.get("cv_method", "?"),
            method_params=a.get("cv_method_params") or {},
            n_samples=int(a.get("cv_n_samples", 0)),
            n_features_total=int(a.get("cv_n_features_total", 0)),
            stability={
                "k": int(a.get("cv_stability_k", 0)),
                "kuncheva": float(a.get("cv_kuncheva", np.nan)),
                "jaccard": float(a.get("cv_jaccard", np.nan)),
            },
            fold_rankings=ds["cv_fold_ranking"].values,
            feature_names=names,
            standardized=bool(int(a.get("cv_standardized", 1))),
            random_state=None if rs < 0 else rs,
            wall_time_s=float(a.get("cv_wall_time_s", 0.0)),
        )


def write_evaluation(
    res: EvaluationResult | xr.Dataset,
    path: str,
    *,
    storage_options: dict | None = None,
    overwrite: bool = False,
    inputs: tuple = (),
) -> str:
    """Write an evaluation to ``path``: ``.nc`` (local netCDF) or anything else as a Zarr v3 store
    (local or fsspec URL), publish-then-swap; an existing path is replaced only when it is an
    fsdask evaluation and ``overwrite`` is given."""
    from fsdask.results import clean_attrs, write_store

    ds = res.to_dataset() if isinstance(res, EvaluationResult) else res.copy()
    ds.attrs = clean_attrs(ds.attrs)
    ds.attrs = {k: (int(v) if isinstance(v, bool) else v) for k, v in ds.attrs.items()}
    if not str(path).endswith(".nc"):
        return write_store(
            ds,
            path,
            kind="evaluation",
            storage_options=storage_options,
            overwrite=overwrite,
            inputs=inputs,
        )
    from fsdask.errors import StoreError
    from fsdask.io.location import Location
    from fsdask.io.outputs import KIND_ATTR, publish_file

    if not Location.of(path).is_local:
        raise StoreError(
            f"{path}: netCDF is written to local files only; use a .zarr URL for object storage"
        )
    if "cv_fold_ranking_feature" in ds:
        v = ds["cv_fold_ranking_feature"]
        ds["cv_fold_ranking_feature"] = (
            v.dims,
            np.array([[str(x) for x in row] for row in v.values], dtype="U"),
        )
    ds.attrs[KIND_ATTR] = "evaluation"
    with publish_file(path, kind="evaluation", overwrite=overwrite, inputs=inputs) as tmp:
        ds.to_netcdf(tmp)
    return str(path)


def open_evaluation(path: str, storage_options: dict | None = None) -> EvaluationResult:
    """Open an evaluation written by :func:`write_evaluation` / ``fsdask evaluate --output``."""
    import os

    from fsdask.errors import StoreError
    from fsdask.io.location import Location

    if Location.of(path).is_local and not os.path.exists(path):
        raise StoreError(
            f"{path}: no such evaluation; write one with `fsdask evaluate … --output {path}`"
        )
    if str(path).endswith(".nc"):
        try:
            ds = xr.open_dataset(path).load()
        except Exception as exc:
            raise StoreError(
                f"{path}: not a readable evaluation ({type(exc).__name__}: {exc})"
            ) from None
        from fsdask.io.store import plain_strings

        ds = plain_strings(ds)
    else:
        from fsdask.results import open_store

        ds = open_store(path, storage_options, what="evaluation")
    try:
        return EvaluationResult.from_dataset(ds)
    except Exception as exc:
        raise StoreError(
            f"{path}: not an fsdask evaluation ({type(exc).__name__}: {exc})"
        ) from None


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------


def _unpack(X: Any, y: Any) -> tuple[Any, np.ndarray | None, np.ndarray | None]:
    """(X as numpy/dask/DataArray data, y, feature names) from the accepted inputs."""
    from fsdask._validation import feature_names_of

    if isinstance(X, xr.Dataset):
        if "X" not in X:
            raise InputError(f"the Dataset has no variable 'X' (found {list(X.data_vars)})")
        if y is None and "y" in X:
            y = X["y"].values
        X = X["X"]
    names = feature_names_of(X)
    if isinstance(X, xr.DataArray):
        X = (
            X.transpose("sample", "feature").data
            if set(X.dims) == {"sample", "feature"}
            else X.data
        )
    elif hasattr(X, "to_numpy") and not hasattr(X, "dask"):
        X = X.to_numpy()
    return X, (None if y is None else np.asarray(y)), names


def check_labels(y: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Class labels for a classifier, or a clear error; returns (classes, codes)."""
    if y is None:
        raise InputError(
            "the dataset is unlabeled (no y): a classifier cannot be evaluated on it; "
            "judge an unsupervised selection with fsdask.evaluate.reconstruction_error / pev"
        )
    y = np.asarray(y)
    if y.ndim != 1:
        y = y.ravel() if 1 in y.shape else None
        if y is None:
            raise InputError(
                "y has several columns (a multivariate response); a classifier needs one label per sample"
            )
    if y.shape[0] != n:
        raise InputError(f"y has {y.shape[0]} entries but X has {n} samples")
    if y.dtype.kind in "iu" and np.all(y == -1):
        raise InputError(
            "the dataset is unlabeled (every y is -1): a classifier cannot be evaluated on it; "
            "judge an unsupervised selection with fsdask.evaluate.reconstruction_error / pev"
        )
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise InputError(f"y has {int((~np.isfinite(y)).sum())} NaN/Inf label(s)")
        if not np.all(y == np.round(y)) or np.unique(y).size > max(20, n // 2):
            raise InputError(
                "y is a continuous response (regression); the classifiers of `fsdask evaluate` "
                "need class labels"
            )
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise InputError(f"y has a single class ({classes[0]!r}); a classifier needs at least two")
    return classes, codes


def _check_params(
    protocol: str,
    selection: str,
    classifier: str,
    n_splits: int,
    n: int,
    classes: np.ndarray,
    codes: np.ndarray,
    C: float,
    n_neighbors: int,
) -> int:
    if protocol not in PROTOCOLS:
        raise ParameterError(
            f"protocol={protocol!r}; use 'loo' (leave-one-out) or 'kfold' (stratified k-fold)"
        )
    if selection not in SELECTIONS:
        raise ParameterError(
            f"selection={selection!r}; use 'inside' (refit in each fold) or 'once'"
        )
    if classifier not in CLASSIFIERS:
        raise ParameterError(f"classifier={classifier!r}; use 'svm' (linear SVM) or 'knn'")
    if not (isinstance(C, (int, float)) and C > 0):
        raise ParameterError(f"C={C!r}; the SVM's C must be a positive number")
    if not (isinstance(n_neighbors, (int, np.integer)) and n_neighbors >= 1):
        raise ParameterError(f"n_neighbors={n_neighbors!r}; use a positive integer")
    counts = np.bincount(codes)
    if protocol == "loo":
        return n
    if not isinstance(n_splits, (int, np.integer)) or n_splits < 2:
        raise ParameterError(f"n_splits={n_splits!r}; k-fold needs at least 2 folds")
    if n_splits > counts.min():
        c = classes[counts.argmin()]
        raise InputError(
            f"stratified {n_splits}-fold CV needs at least {n_splits} samples in every class, but "
            f"class {c!r} has {counts.min()}; use fewer folds (--folds {counts.min()}) "
            "or --protocol loo"
        )
    return int(n_splits)


def _n_features_list(n_features: int | Sequence[int], p: int) -> list[int]:
    if isinstance(n_features, (int, np.integer)):
        if n_features < 1:
            raise ParameterError(
                f"n_features={n_features}; give a positive maximum or a list of sizes"
            )
        ms = list(range(1, min(int(n_features), p) + 1))
    else:
        ms = sorted({int(m) for m in n_features})
        if not ms or ms[0] < 1:
            raise ParameterError(f"n_features={n_features!r}; sizes must be positive integers")
        if ms[-1] > p:
            log.warning("n_features: sizes above the %d features of X are dropped", p)
            ms = [m for m in ms if m <= p] or [p]
    return ms


def _clone(est: Any) -> Any:
    return type(est)(**est.get_params())


def _resolve_method(method: Any, params: dict | None) -> tuple[Any, str, dict]:
    from fsdask.methods import get_method

    params = dict(params or {})
    if isinstance(method, str):
        est = get_method(method, **params)
        return est, method, params
    if not hasattr(method, "fit"):
        raise ParameterError(
            f"method={method!r}: give a registry name (see fsdask.available_methods()) "
            "or an unfitted estimator with fit()"
        )
    est = _clone(method).set_params(**params) if params else method
    name = getattr(est, "method_name", type(est).__name__)
    gp = est.get_params() if hasattr(est, "get_params") else {}
    return (
        est,
        str(name),
        {
            k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v))
            for k, v in gp.items()
        },
    )


def ranking_of(est: Any) -> np.ndarray:
    """Feature indices best first from a fitted selector (``ranking_``, else ``scores_``)."""
    if hasattr(est, "ranking_"):
        return np.argsort(np.asarray(est.ranking_), kind="stable")
    for attr in ("scores_", "feature_importances_"):
        if hasattr(est, attr):
            return np.argsort(-np.asarray(getattr(est, attr), dtype=np.float64), kind="stable")
    if hasattr(est, "coef_"):
        coef = np.abs(np.atleast_2d(np.asarray(est.coef_))).sum(axis=0)
        return np.argsort(-coef, kind="stable")
    raise ParameterError(
        f"{type(est).__name__} has no ranking_, scores_, feature_importances_ or coef_ "
        "after fit; cannot rank features"
    )


# ---------------------------------------------------------------------------------------------
# one fold
# ---------------------------------------------------------------------------------------------


def knn_predict_prefixes(
    Xtr: np.ndarray,
    ytr: np.ndarray,
    Xte: np.ndarray,
    ms: Sequence[int],
    n_neighbors: int = 3,
    batch_elems: int = 4_000_000,
) -> np.ndarray:
    """k-NN predictions (Euclidean, uniform vote) using the first m columns, for every m in ``ms``.

    All prefixes at once: squared distances are cumulative sums over the feature axis.  Ties
    in the vote go to the smallest label (as scikit-learn's ``KNeighborsClassifier``);
    neighbours at equal distance are taken in training order.  Returns (len(ms), n_test).
    """
    ms_idx = np.asarray(ms, dtype=np.int64) - 1
    k = int(min(n_neighbors, Xtr.shape[0]))
    classes, codes = np.unique(ytr, return_inverse=True)
    out = np.empty((len(ms_idx), Xte.shape[0]), dtype=np.int64)
    M = int(ms_idx.max()) + 1
    step = max(1, batch_elems // max(1, Xtr.shape[0] * M))
    for s0 in range(0, Xte.shape[0], step):
        te = Xte[s0 : s0 + step, :M]
        d2 = np.cumsum((te[:, None, :] - Xtr[None, :, :M]) ** 2, axis=2)[
            :, :, ms_idx
        ]  # t × n_tr × |ms|
        nn = np.argsort(d2, axis=1, kind="stable")[:, :k, :]  # t × k × |ms|
        votes = np.zeros((te.shape[0], len(ms_idx), classes.size), dtype=np.int64)
        lab = codes[nn]  # t × k × |ms|
        for c in range(classes.size):
            votes[:, :, c] = (lab == c).sum(axis=1)
        out[:, s0 : s0 + te.shape[0]] = votes.argmax(axis=2).T
    return classes[out]


def _classify(
    Xtr: np.ndarray,
    ytr: np.ndarray,
    Xte: np.ndarray,
    ms: list[int],
    classifiers: Sequence[str],
    C: float,
    n_neighbors: int,
    standardize: bool,
) -> dict[str, np.ndarray]:
    """Predictions (len(ms) × n_test) for every classifier, feeding the first m columns."""
    Xtr = np.asarray(Xtr, dtype=np.float64)
    Xte = np.asarray(Xte, dtype=np.float64)
    if standardize:
        mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
        sd[sd == 0] = 1.0
        Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    out = {}
    single = np.unique(ytr).size < 2
    for clf_name in classifiers:
        if single:  # a training fold with one class: predict it
            out[clf_name] = np.full((len(ms), Xte.shape[0]), ytr[0], dtype=ytr.dtype)
        elif clf_name == "knn":
            out[clf_name] = knn_predict_prefixes(Xtr, ytr, Xte, ms, n_neighbors)
        else:
            SVC = _sklearn()[0]
            preds = np.empty((len(ms), Xte.shape[0]), dtype=ytr.dtype)
            for i, m in enumerate(ms):
                preds[i] = SVC(kernel="linear", C=C).fit(Xtr[:, :m], ytr).predict(Xte[:, :m])
            out[clf_name] = preds
    return out


@dataclasses.dataclass(frozen=True)
class Feeding:
    """How a fold's classifiers are fed: the top ``ms`` features, each classifier's setting.

    Attributes
    ----------
    ms : list of int
        The numbers of top-ranked features fed in turn (the curve's x axis).
    classifiers : tuple of str
        ``"svm"`` and/or ``"knn"``.
    C, n_neighbors : float, int
        The linear SVM's C and the k-NN's k.
    standardize : bool
        Standardise with the training part's mean and sd.
    """

    ms: list[int]
    classifiers: tuple[str, ...]
    C: float
    n_neighbors: int
    standardize: bool

    @property
    def k_max(self) -> int:
        """The largest number of features fed."""
        return max(self.ms)


def run_fold(
    X: Any,
    codes: np.ndarray,
    split: tuple[np.ndarray, np.ndarray],
    feed: Feeding,
    *,
    est: Any = None,
    fixed_top: np.ndarray | None = None,
    y_fit: np.ndarray | None = None,
    in_task: bool = False,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Select on the training part (unless ``fixed_top``), then classify the test part.

    Returns the fold's top ``feed.k_max`` features and ``{classifier: predictions}``
    (len(ms) × n_test).  ``in_task``: the fold runs inside a dask task, so its own graphs run
    on the synchronous scheduler (a task never waits on the pool it runs in).
    """
    import dask.array as da

    train, test = split
    sync = dask.config.set(scheduler="synchronous") if in_task else contextlib.nullcontext()
    with sync:
        if fixed_top is None:
            e = _clone(est)
            yf = codes if y_fit is None else y_fit
            e.fit(X[train], yf[train])
            fixed_top = ranking_of(e)[: feed.k_max]
        Xtop = X[:, fixed_top]
        if isinstance(Xtop, da.Array):
            Xtop = Xtop.compute()
    Xtop = np.asarray(Xtop)
    preds = _classify(
        Xtop[train],
        codes[train],
        Xtop[test],
        feed.ms,
        feed.classifiers,
        feed.C,
        feed.n_neighbors,
        feed.standardize,
    )
    return np.asarray(fixed_top, dtype=np.int64), preds


def _map_folds(
    X: Any, codes: np.ndarray, splits: list[tuple], feed: Feeding, parallel: bool, **fold: Any
) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """:func:`run_fold` for every split: as parallel dask tasks over an in-memory X shared by
    all of them, or one after another (each selection then parallel over feature blocks)."""
    if not parallel:
        return [run_fold(X, codes, sp, feed, **fold) for sp in splits]
    Xdel = dask.delayed(X, pure=True, traverse=False)
    run = dask.delayed(run_fold, pure=False)
    return list(dask.compute(*[run(Xdel, codes, sp, feed, in_task=True, **fold) for sp in splits]))


# ---------------------------------------------------------------------------------------------
# the protocols
# ---------------------------------------------------------------------------------------------


def _splits(
    protocol: str, n_splits: int, codes: np.ndarray, random_state: int | None
) -> list[tuple]:
    _, _, LeaveOneOut, StratifiedKFold = _sklearn()
    idx = np.zeros(codes.size)
    if protocol == "loo":
        return list(LeaveOneOut().split(idx))
    skf = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    return list(skf.split(idx, codes))


def evaluate_classifiers(
    X: Any,
    y: Any = None,
    method: Any = None,
    params: dict | None = None,
    *,
    protocol: Literal["loo", "kfold"] = "loo",
    n_splits: int = 10,
    classifiers: Sequence[str] = ("svm", "knn"),
    n_neighbors: int = 3,
    C: float = 1.0,
    n_features: int | Sequence[int] = 50,
    selection: Literal["inside", "once"] = "inside",
    random_state: int | None = 0,
    standardize: bool = True,
    stability_k: int | None = None,
    scheduler: str | None = None,
    parallel: Literal["auto", "folds", "within"] = "auto",
    _fixed_ranking: np.ndarray | None = None,
    _method_name: str | None = None,
    _method_params: dict | None = None,
) -> dict[str, EvaluationResult]:
    """Like :func:`evaluate` for several classifiers at once, sharing the fold selections.

    Returns ``{classifier: EvaluationResult}``.
    """
    t0 = time.perf_counter()
    Xa, yv, names = _unpack(X, y)
    Xa, n, p = _as_2d(Xa)
    classes, codes = check_labels(yv, n)
    classifiers = list(classifiers)
    if not classifiers:
        raise ParameterError("give at least one classifier (svm, knn)")
    for c in classifiers:
        k_folds = _check_params(protocol, selection, c, n_splits, n, classes, codes, C, n_neighbors)
    feed = Feeding(_n_features_list(n_features, p), tuple(classifiers), C, n_neighbors, standardize)
    _sklearn()  # fail early and clearly if scikit-learn is missing
    fixed = _fixed_ranking is not None
    est, mname, mparams = (
        (None, _method_name or "ranking", _method_params or {})
        if fixed
        else _method_to_evaluate(method, params)
    )
    # the estimator sees the original labels (regression-style scores such as pearson need numbers)
    y_fit = yv if yv.dtype.kind in "iufb" else codes
    mode = _fold_mode(Xa, n, p, parallel)
    splits = _splits(protocol, k_folds, codes, random_state)
    from fsdask.cluster import scheduler as scheduler_ctx

    with scheduler_ctx(scheduler) if scheduler else contextlib.nullcontext():
        if mode == "folds":
            Xa = _in_memory(Xa)  # X loaded on the client, never whole in one task
        if selection == "once" or fixed:
            outs = _folds_once(Xa, y_fit, codes, splits, feed, est, _fixed_ranking, mode)
        else:
            outs = _map_folds(Xa, codes, splits, feed, mode == "folds", est=est, y_fit=y_fit)
    once = selection == "once" or fixed
    rankings, stability = _fold_stability(np.stack([o[0] for o in outs]), once, stability_k, p)
    common = dict(
        protocol=protocol,
        n_splits=len(splits),
        selection="once" if fixed else selection,
        method=mname,
        method_params=mparams,
        n_samples=n,
        n_features_total=p,
        stability=stability,
        fold_rankings=rankings,
        feature_names=None if names is None else np.asarray(names),
        standardized=standardize,
        random_state=random_state if protocol == "kfold" else None,
        wall_time_s=time.perf_counter() - t0,
    )
    return {clf: _result_of(clf, splits, outs, codes, feed, common) for clf in classifiers}


def _method_to_evaluate(method: Any, params: dict | None) -> tuple[Any, str, dict]:
    """(estimator, name, parameters) of the method to refit in the folds."""
    if method is None:
        raise ParameterError("give a method (registry name or estimator) to evaluate")
    return _resolve_method(method, params)


def _result_of(
    clf: str, splits: list[tuple], outs: list, codes: np.ndarray, feed: Feeding, common: dict
) -> EvaluationResult:
    """The :class:`EvaluationResult` of one classifier from the folds' predictions."""
    return EvaluationResult(
        curve=_error_curve(clf, splits, outs, codes, feed.ms),
        classifier=clf,
        classifier_params={"C": feed.C} if clf == "svm" else {"n_neighbors": feed.n_neighbors},
        **common,
    )


def _as_2d(Xa: Any) -> tuple[Any, int, int]:
    """X (anything with a 2-D shape, else made a NumPy array) and its (n, p)."""
    shape = getattr(Xa, "shape", None)
    if shape is None or len(shape) != 2:
        Xa = np.asarray(Xa)
        shape = Xa.shape
        if Xa.ndim != 2:
            raise InputError(f"X must be 2-D (sample, feature); got shape {Xa.shape}")
    return Xa, int(shape[0]), int(shape[1])


def _fold_mode(Xa: Any, n: int, p: int, parallel: str) -> str:
    """``"folds"`` (folds as parallel tasks, X in memory) or ``"within"`` (folds in turn):
    X that fits the memory budget is loaded and its folds run in parallel."""
    import dask.array as da

    nbytes = n * p * np.dtype(getattr(Xa, "dtype", np.float64)).itemsize
    in_memory = not isinstance(Xa, da.Array) or fits(nbytes)
    mode = parallel if parallel != "auto" else ("folds" if in_memory else "within")
    if mode not in ("folds", "within"):
        raise ParameterError(f"parallel={parallel!r}; use 'auto', 'folds' or 'within'")
    return mode


def _in_memory(Xa: Any) -> np.ndarray:
    """X as NumPy, a dask array joined on the client block by block."""
    import dask.array as da

    return compute_blocks(Xa)[0] if isinstance(Xa, da.Array) else Xa


def _folds_once(
    Xa: Any,
    y_fit: np.ndarray,
    codes: np.ndarray,
    splits: list[tuple],
    feed: Feeding,
    est: Any,
    fixed_ranking: np.ndarray | None,
    mode: str,
) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """The ``selection="once"`` folds: one ranking on all samples (or the given one), then
    only the classifier per fold — still parallel when there are several folds."""
    if fixed_ranking is not None:
        top = np.asarray(fixed_ranking, dtype=np.int64)[: feed.k_max]
    else:
        e = _clone(est)
        e.fit(Xa, y_fit)
        top = ranking_of(e)[: feed.k_max]
    Xsmall = _in_memory(Xa[:, top])
    local = np.arange(top.size)
    parallel = mode == "folds" and len(splits) > 1
    outs = _map_folds(np.asarray(Xsmall), codes, splits, feed, parallel, fixed_top=local)
    return [(top, pr) for _, pr in outs]


def _fold_stability(
    tops: np.ndarray, once: bool, stability_k: int | None, p: int
) -> tuple[np.ndarray, dict[str, Any]]:
    """The rankings to record and the stability of the folds' top-k sets (NaN when the
    ranking was made once)."""
    k_max = tops.shape[1]
    if once:
        k_st = stability_k or k_max
        return tops[:1], {"k": int(k_st), "kuncheva": float("nan"), "jaccard": float("nan")}
    k_st = min(stability_k or k_max, k_max)
    sets = [t[:k_st] for t in tops]
    return tops, {
        "k": int(k_st),
        "kuncheva": kuncheva_index(sets, p) if k_st < p else float("nan"),
        "jaccard": jaccard_stability(sets),
    }


def _error_curve(
    clf: str, splits: list[tuple], outs: list, codes: np.ndarray, ms: list[int]
) -> pd.DataFrame:
    """Errors of ``clf`` over all folds for every m of ``ms``."""
    errors = np.zeros(len(ms), dtype=np.int64)
    tested = 0
    for (_tr, te), (_, preds) in zip(splits, outs):
        errors += (preds[clf] != codes[te][None, :]).sum(axis=1)
        tested += te.size
    return pd.DataFrame(
        {"error_rate": errors / tested, "n_errors": errors, "n_tested": np.full(len(ms), tested)},
        index=pd.Index(ms, name="n_features"),
    )


def evaluate(
    X: Any,
    y: Any = None,
    method: Any = None,
    params: dict | None = None,
    *,
    protocol: Literal["loo", "kfold"] = "loo",
    n_splits: int = 10,
    classifier: Literal["svm", "knn"] = "svm",
    n_neighbors: int = 3,
    C: float = 1.0,
    n_features: int | Sequence[int] = 50,
    selection: Literal["inside", "once"] = "inside",
    random_state: int | None = 0,
    standardize: bool = True,
    stability_k: int | None = None,
    scheduler: str | None = None,
    parallel: Literal["auto", "folds", "within"] = "auto",
) -> EvaluationResult:
    """Cross-validate a feature selector the way the papers did.

    Parameters
    ----------
    X, y
        Data (sample × feature: numpy, dask, xarray DataArray, or an fsdask Dataset whose
        ``y`` is used when ``y`` is None) and class labels.
    method
        A registry name (:func:`fsdask.get_method`, e.g. ``"ttest"``, ``"logo"``) or an
        unfitted estimator (cloned for every fold).
    params
        Keyword arguments of the method, with a registry name.
    protocol
        ``"loo"`` (leave-one-out) or ``"kfold"`` (stratified, shuffled with ``random_state``).
    n_splits
        The number of folds of ``"kfold"`` (default 10).
    classifier
        ``"svm"`` (linear SVM) or ``"knn"`` (k nearest neighbours, Euclidean, majority vote).
    n_neighbors
        k of the k-NN classifier (default 3).
    C
        The linear SVM's regularisation (default 1).
    n_features
        The numbers m of top-ranked features fed to the classifier: an int N (1..N) or a list.
    selection
        ``"inside"``: refit the selector on every training fold (honest).  ``"once"``: rank on
        all samples, cross-validate only the classifier (what some papers did; optimistic).
    random_state
        Seed of the k-fold shuffle (default 0).
    standardize
        Standardise the fed features with the training fold's mean and sd (default True).
    stability_k
        Size of the top-k sets compared across folds (default: the largest m).
    scheduler
        Where to run (:func:`fsdask.cluster.scheduler` spec: ``threads``, ``local:2``,
        ``tcp://…``); None uses the active dask configuration.
    parallel
        ``"folds"``: every fold is one task (X must fit in memory; the fold's selection runs
        single-threaded inside its task); ``"within"``: folds one after another, each
        selection parallel over feature blocks; ``"auto"``: folds when X fits the memory budget (dask config ``fsdask.memory-budget``, 1 GiB).

    Returns
    -------
    EvaluationResult
        The error curve over m (``curve``), ``best_error`` and ``best_n_features``, the
        folds' rankings and their ``stability``; ``to_markdown()`` describes exactly how it
        was measured.

    Examples
    --------
    >>> import numpy as np
    >>> from fsdask.evaluate import evaluate
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(30, 60)), np.repeat([0, 1], 15)
    >>> X[y == 1, :3] += 2.0
    >>> res = evaluate(X, y, method="ttest", protocol="kfold", n_splits=5, n_features=5)
    >>> res.best_error < 0.2
    True
    """
    return evaluate_classifiers(
        X,
        y,
        method,
        params,
        protocol=protocol,
        n_splits=n_splits,
        classifiers=(classifier,),
        n_neighbors=n_neighbors,
        C=C,
        n_features=n_features,
        selection=selection,
        random_state=random_state,
        standardize=standardize,
        stability_k=stability_k,
        scheduler=scheduler,
        parallel=parallel,
    )[classifier]


def check_result_matches(result: xr.Dataset, n_features: int, names: np.ndarray | None) -> None:
    """Refuse a result whose features are not those of the data (count and ids)."""
    if "rank" not in result or "feature" not in result.dims:
        raise InputError(
            "the result has no 'rank' over 'feature'; give a result written by `fsdask select`"
        )
    pr = result.sizes["feature"]
    if pr != n_features:
        raise InputError(
            f"the result ranks {pr} features but the data has {n_features}: the result was not "
            "computed on this dataset"
        )
    if names is not None and "feature" in result.coords:
        a = np.asarray([str(v) for v in result["feature"].values])
        b = np.asarray([str(v) for v in names])
        bad = np.flatnonzero(a != b)
        if bad.size:
            i = bad[0]
            raise InputError(
                f"the result's feature ids do not match the data's: {bad.size} differ, first at "
                f"position {i} (result {a[i]!r}, data {b[i]!r}); evaluate a result on the dataset "
                "it was computed from"
            )


def evaluate_result(
    X: Any,
    y: Any = None,
    result: xr.Dataset | str | None = None,
    *,
    protocol: Literal["loo", "kfold"] = "loo",
    n_splits: int = 10,
    classifier: Literal["svm", "knn"] = "svm",
    n_neighbors: int = 3,
    C: float = 1.0,
    n_features: int | Sequence[int] = 50,
    random_state: int | None = 0,
    standardize: bool = True,
    scheduler: str | None = None,
) -> EvaluationResult:
    """Cross-validate the classifier on a saved result's ranking (``selection="once"``: the
    ranking was computed on all samples, so this is the optimistic protocol; it is labelled so).

    ``result`` is a result Dataset or a path (:func:`fsdask.open_result`).  Its feature ids
    must be the data's (count, and names when both carry names), else :class:`InputError`.
    """
    from fsdask.results import open_result

    if result is None:
        raise ParameterError("give the result to evaluate")
    if not isinstance(result, xr.Dataset):
        result = open_result(result)
    Xa, yv, names = _unpack(X, y)
    p = int(Xa.shape[1])
    check_result_matches(result, p, names)
    ranking = np.argsort(result["rank"].values, kind="stable")
    params = result.attrs.get("parameters")
    res = evaluate_classifiers(
        Xa,
        yv,
        None,
        protocol=protocol,
        n_splits=n_splits,
        classifiers=(classifier,),
        n_neighbors=n_neighbors,
        C=C,
        n_features=n_features,
        selection="once",
        random_state=random_state,
        standardize=standardize,
        scheduler=scheduler,
        _fixed_ranking=ranking,
        _method_name=str(result.attrs.get("method", "result")),
        _method_params=params if isinstance(params, dict) else {},
    )[classifier]
    if names is not None:
        res.feature_names = np.asarray(names)
    elif "feature" in result.coords:
        res.feature_names = np.asarray(result["feature"].values)
    return res
