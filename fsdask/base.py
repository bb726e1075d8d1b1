"""The scikit-learn estimator every fsdask selector derives from.

A subclass declares its parameters (``__init__`` plus ``_parameter_constraints``) and
implements ``_fit(X, y, ctx)``, which receives X as a dask array in feature blocks (non-finite
values already refused, constant features already removed according to ``on_constant``) —
or, for a method that declares ``streams_samples``, in the blocks it came in (sample blocks,
NumPy or CSR, which it sweeps with ``ctx.execution.sum_blocks``) — and
the fit's :class:`~fsdask.fitting.FitContext` (budget, passes, checkpoints, warnings), and
returns a :class:`FitOutput`.  The template does the rest: validation, scores / ranking /
support, ``transform``, and the ``result_`` Dataset with provenance.  Nothing else is
overridden: what a method knows about its own ranking or selection travels in the
:class:`FitOutput`.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import logging
import time
from typing import Any, Callable

import dask
import dask.array as da
import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin as _SklearnSelectorMixin
from sklearn.utils.validation import _get_feature_names, check_is_fitted

from fsdask._sort import stable_argsort
from fsdask._validation import (
    InvalidParameterError,
    check_array,
    check_y,
    feature_names_of,
    is_anndata,
    is_sample_blocked,
    validate_parameter_constraints,
)
from fsdask.errors import InputError, ParameterError
from fsdask.fitting import (
    CLIENT_ARRAY_REMEDY,
    FitContext,
    check_client_array,
    progress_line,
)
from fsdask.io.rechunk import to_feature_blocks
from fsdask.linalg.colstats import column_screen
from fsdask.linalg.reductions import compute_blocks
from fsdask.linalg.threads import fit_threads

log = logging.getLogger("fsdask")


@dataclasses.dataclass
class FitOutput:
    """Everything a method's ``_fit`` returns; per-feature arrays cover the active features.

    ``scores`` (higher = more relevant); ``rank_key`` orders the features when the scores
    alone do not (one array, or a tuple of arrays compared in turn, higher first; default:
    the scores); ``support`` is the method's own selection, used when
    ``n_features_to_select`` is None — or always, with ``support_is_final`` (the method
    already honoured ``n_features_to_select``).  ``active`` is given only by methods that
    screen X in their own pass (``screen_in_fit``): the mask of non-constant features over
    all of X.  ``extras``: per-feature arrays become result variables over ``feature``;
    arrays with dims in ``extra_dims`` become variables over those dims (a trailing
    ``feature`` dim is expanded to all features); scalars go to attrs.  ``coords`` are
    extra result coordinates; ``deferred`` maps a variable name to a (picklable) callable giving
    its per-feature values, evaluated the first time ``result_`` is read (NaN for inactive
    features).  ``warnings``: what the result itself tells the user (e.g. an FDR whose
    permutations were too few to select anything), said through the fit's context once
    the fit is done.
    """

    scores: np.ndarray
    support: np.ndarray | None = None
    support_is_final: bool = False
    rank_key: np.ndarray | tuple[np.ndarray, ...] | None = None
    active: np.ndarray | None = None
    n_iter: int | None = None
    converged: bool | None = None
    objective: list[float] | None = None
    extras: dict[str, Any] = dataclasses.field(default_factory=dict)
    extra_dims: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    coords: dict[str, Any] = dataclasses.field(default_factory=dict)
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    deferred: dict[str, Callable[[], np.ndarray]] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)


#: n × n matrices of at most this many bytes in all are never refused: a budget set small
#: to send X down the chunked path (small workers, tests) must not make a fit on a few
#: hundred samples impossible; the check exists for the sample counts that cannot fit
SAMPLE_MATRIX_FLOOR = 32 * 2**20

#: what the three variables every result holds mean (their ``description`` attribute)
RESULT_VARIABLES = {
    "weight": "{method} score of each feature; higher is more relevant (0 for constant features)",
    "rank": "position of the feature when sorted by relevance; 1 is the most relevant",
    "selected": "whether the feature is in the selection (n_features_to_select or the "
    "method's own rule)",
}


class Selector(_SklearnSelectorMixin, BaseEstimator):
    """Base of the fsdask feature selectors: a scikit-learn ``SelectorMixin`` + ``BaseEstimator``.

    fit / transform / inverse_transform / get_support / get_feature_names_out /
    set_output as in scikit-learn; ``scores_``, ``ranking_``, ``support_``, ``result_``.
    ``transform`` is lazy for dask and xarray input (dask in, dask out).
    """

    #: method name used in results and the CLI
    method_name: str = "selector"
    #: whether ``fit`` requires y
    requires_y: bool = False
    #: "classification", "regression" or "any" — how y is validated
    y_task: str = "any"
    #: minimum number of samples the method needs
    min_samples: int = 2
    #: the method finds NaN/Inf and constant features in its own first pass (then ``_fit``
    #: gets all of X, calls :meth:`_apply_screen` itself and returns ``FitOutput.active``)
    screen_in_fit: bool = False
    #: the method's cost is linear in n and it needs only sums over samples that merge
    #: across sample blocks (``ctx.execution.sum_blocks``): a sample-blocked X (an AnnData
    #: CSR matrix, a store chunked by samples) reaches ``_fit`` as it is, never copied or
    #: densified.  Other methods get feature blocks (:meth:`_method_blocks`)
    streams_samples: bool = False
    #: scikit-learn's declarative parameter constraints, checked at the start of ``fit``
    _parameter_constraints: dict = {}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = bool(self.requires_y)
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = False
        return tags

    # ---- hooks for subclasses ----
    def _validate_params(self) -> None:
        """Check ``_parameter_constraints``; raise :class:`ParameterError` naming the parameter."""
        try:
            validate_parameter_constraints(
                self._parameter_constraints,
                self.get_params(deep=False),
                caller_name=type(self).__name__,
            )
        except InvalidParameterError as exc:
            raise ParameterError(str(exc)) from None

    def _fit(
        self, X: da.Array, y: np.ndarray | None, ctx: FitContext
    ) -> FitOutput:  # pragma: no cover - abstract
        raise NotImplementedError

    def _default_support(self, scores: np.ndarray) -> np.ndarray:
        """Selection when ``n_features_to_select`` is None and the method gives none."""
        k = max(1, int(np.ceil(scores.size / 2)))
        return top_k_mask(scores, k)

    def _fit_lazy(self, X: da.Array, y: np.ndarray | None):
        """Optional single-pass protocol for methods whose statistics are per feature.

        Return ``(lazy, finish)``: ``lazy`` (dask collections over *all* features) is computed
        in the same pass as the screen (NaN/Inf, constant features), then
        ``finish(computed, active, lo, hi)`` returns the :class:`FitOutput` with scores of the
        active features.  Return ``(lazy, finish, True)`` when ``lazy`` is a (rows, p) array
        whose last three rows are each block's NaN/Inf count, minimum and maximum (the screen
        then costs no extra tasks).  The default (None) uses the screen then ``_fit``.
        """
        return None

    # ---- the public API ----
    def fit(self, X: Any, y: Any = None) -> Selector:
        """Fit on X (sample × feature: numpy, scipy.sparse, pandas, dask, xarray) and optional y.

        An ``xarray.Dataset`` made by :func:`fsdask.open_dataset` may be passed whole; its
        ``y`` is used when ``y`` is not given, and its provenance goes into ``result_``.
        """
        t0 = time.perf_counter()
        self._validate_params()
        source_attrs: dict = {}
        self._class_names = None  # the label's names when y comes coded from a dataset
        if isinstance(X, xr.Dataset):
            source_attrs = {
                k: X.attrs[k]
                for k in ("fingerprint", "source", "store", "icechunk")
                if k in X.attrs
            }
            if y is None and self.requires_y:
                y = next((X[v].values for v in ("y", "Y") if v in X), None)
                self._class_names = X.attrs.get("class_names")
            X = X["X"] if "X" in X else X
        names = feature_names_of(X)
        self._names_in = _sklearn_feature_names(X, names)
        self.__dict__.pop("_names_in_str", None)
        Xd = check_array(
            X,
            min_samples=self.min_samples,
            check_finite=False,
            layout="samples" if self.streams_samples else "stored",
        )
        n, p = Xd.shape
        self.n_features_in_ = p
        self._check_shape(n, p)
        Xd = self._method_blocks(Xd)
        if y is not None:
            y = check_y(y, n, task=self.y_task if self.requires_y else "any")
        elif self.requires_y:
            raise InputError(
                f"{type(self).__name__} requires y to be passed, but the target y is None; "
                "pass labels: fit(X, y) (or a dataset with a 'y' variable)"
            )
        log.info(
            "%s: fitting on %d samples × %d features (%d feature block(s))",
            self.method_name,
            n,
            p,
            len(Xd.chunks[1]),
        )
        ctx = FitContext(self, memory_budget=getattr(self, "memory_budget", None))
        Xd = ctx.admit(Xd)  # a task too big for the workers stops here, before any read
        with fit_threads(Xd):  # BLAS threads: one per task, or one for a small fit
            out, active = self._screen_and_fit(Xd, y, names, ctx)
        for message in out.warnings:  # on every route, the lazy one's included
            ctx.warn(message, UserWarning)
        self.n_passes_ = ctx.passes
        self._set_fitted(
            out, active, names if names is not None else np.arange(p), source_attrs, t0
        )
        return self

    def _method_blocks(self, Xd: da.Array) -> da.Array:
        """X in the blocks the method reads: as it came for a method that streams samples;
        else feature blocks, through the one conversion
        :func:`fsdask.io.rechunk.to_feature_blocks` (on the fly within the memory budget,
        else a scratch copy, or a message saying how to open the source)."""
        if self.streams_samples or not is_sample_blocked(Xd):
            return Xd
        return to_feature_blocks(Xd, where="X")

    def _check_shape(self, n: int, p: int) -> None:
        """Refuse a problem by its shape alone, before X is read (a method whose cost would be
        prohibitive says so here, not hours into the fit)."""

    def _check_client_array(
        self, nbytes: float, what: str, n: int, p: int, remedy: str = CLIENT_ARRAY_REMEDY
    ) -> None:
        """Refuse (or announce) the array this method holds in the fitting process, before X
        is read: :func:`fsdask.fitting.check_client_array` at this estimator's budget.

        Parameters
        ----------
        nbytes : float
            The array's size in bytes.
        what : str
            What it is and its shape, for the message.
        n, p : int
            Samples and features of X.
        remedy : str
            What to do, for the message (default: fewer features or samples).
        """
        from fsdask._config import memory_budget

        check_client_array(
            nbytes,
            what,
            n=n,
            p=p,
            name=type(self).__name__,
            method=self.method_name,
            budget=memory_budget(getattr(self, "memory_budget", None)),
            remedy=remedy,
        )

    def _check_sample_matrices(self, cost: Any) -> None:
        """Refuse a fit whose n × n matrices exceed the memory budget; announce its cost.

        For the methods that hold matrices between samples (their :meth:`_check_shape`
        calls it, before X is read): ``cost`` is the fit's
        :class:`~fsdask.methods.quadratic.SampleCost`.  Without the check the fit would fail
        only when NumPy cannot allocate them, hours in.  The budget is the estimator's
        ``memory_budget``, else the dask config key ``fsdask.memory-budget``; a budget of 0
        (every other decision on the chunked path) leaves the check off, and sample matrices
        of at most :data:`SAMPLE_MATRIX_FLOOR` in all are never refused.  A fit that goes on
        starts with one progress line: its samples, the matrices' size and its work.

        Parameters
        ----------
        cost : SampleCost
            The samples the fit uses, its n × n matrices and its work.

        Raises
        ------
        InputError
            Naming the sample count, the estimate, the budget and the remedies.
        """
        from dask.utils import format_bytes

        from fsdask._config import memory_budget

        budget = memory_budget(getattr(self, "memory_budget", None))
        room = max(budget, SAMPLE_MATRIX_FLOOR)
        if budget == 0 or cost.nbytes <= room:
            progress_line(f"{self.method_name}: {cost.summary()}")
            return
        largest = cost.largest_n(room)
        params = self.get_params()
        subsample = (
            f"use fewer samples: max_samples={largest} (CLI: --max-samples {largest}; a "
            "seeded, class-stratified subsample) or "
            if "max_samples" in params
            else f"use fewer samples (at most ~{largest} at this budget) or "
        )
        param = (
            "memory_budget=SIZE (CLI: --param memory_budget=SIZE) or "
            if "memory_budget" in params
            else ""
        )
        raise InputError(
            f"{type(self).__name__} on {cost.n_samples} samples needs about "
            f"{format_bytes(cost.nbytes)} for its {cost.what} ({cost.copies} × n × n float64) "
            f"and {cost.work()}, above the memory budget of {format_bytes(budget)}; "
            f"{subsample}raise the budget: {param}the dask config fsdask.memory-budget "
            "(DASK_FSDASK__MEMORY_BUDGET=SIZE)"
        )

    def _screen_and_fit(
        self, Xd: da.Array, y: np.ndarray | None, names: np.ndarray | None, ctx: FitContext
    ) -> tuple[FitOutput, np.ndarray]:
        """The screen (NaN/Inf, constant features) and the method's work: one of three routes.

        ``ctx.passes`` ends as the passes over X after the screen; on the single-pass route
        the screen and the method's statistics share one pass, counted once.
        """
        plan = self._fit_lazy(Xd, y)
        if plan is not None:
            # single pass: the screen and the method's per-feature statistics share one read of X
            lazy, finish, *rest = plan
            # per-feature results reach the client block by block (compute_blocks), never
            # concatenated in one task on a worker: task memory is bounded by the block, not by p
            if rest and rest[0]:  # the block function appended the screen rows of X_b
                (computed,) = compute_blocks(lazy)
                bad, lo, hi = computed[-3], computed[-2], computed[-1]
                computed = computed[:-3]
            else:
                bad, lo, hi, computed = compute_blocks(*_screen_stats(Xd), lazy)
            active = self._apply_screen(bad, lo, hi, names)
            ctx.execution.passes += 1
            return finish(computed, active, lo, hi), active
        if self.screen_in_fit:
            out = self._fit(Xd, y, ctx.bind(Xd, y))
            return out, np.asarray(out.active, bool)
        bad, lo, hi = column_screen(Xd)  # any layout, NumPy or CSR blocks
        active = self._apply_screen(bad, lo, hi, names)
        self.active_features_ = active  # known to _fit (e.g. to lay out coef_ over all features)
        X_act = Xd if active.all() else Xd[:, active]
        if len(X_act.chunks[1]) > 1 and not active.all():
            X_act = X_act.rechunk({1: Xd.chunks[1][0]})
        return self._fit(X_act, y, ctx.bind(X_act, y)), active

    def _set_fitted(
        self, out: FitOutput, active: np.ndarray, feature: np.ndarray, source_attrs: dict, t0: float
    ) -> None:
        """The public attributes and ``result_`` from the method's output."""
        p = active.size
        scores = np.zeros(p)
        scores[active] = np.asarray(out.scores, dtype=np.float64)
        if not np.all(np.isfinite(scores)):
            raise InputError(
                f"{type(self).__name__}: the computation produced {int((~np.isfinite(scores)).sum())} "
                "non-finite score(s); this is a bug or degenerate input — please report it with the data shape"
            )
        self.active_features_ = active
        self.scores_ = scores
        key = out.rank_key if out.rank_key is not None else out.scores
        self.ranking_ = _ranking_by(key, active)
        self.support_ = self._select(out, active)
        self.n_iter_ = out.n_iter
        self.converged_ = out.converged
        self.objective_ = None if out.objective is None else np.asarray(out.objective)
        self.wall_time_ = time.perf_counter() - t0
        self._result = self._make_result(out, active, feature, source_attrs)
        self._result_deferred = {
            name: functools.partial(_expand, fn, active, np.nan)
            for name, fn in out.deferred.items()
        }
        log.info(
            "%s: done in %.1f s%s",
            self.method_name,
            self.wall_time_,
            ""
            if out.n_iter is None
            else f" after {out.n_iter} iteration(s)"
            + (
                ""
                if out.converged is None
                else (", converged" if out.converged else ", NOT converged")
            ),
        )

    @property
    def feature_names_in_(self) -> np.ndarray:
        """Names of the features seen in ``fit``, as strings (scikit-learn's attribute): a
        DataFrame's columns or an xarray ``feature`` coordinate; absent for plain arrays.

        Made on first access: 10⁶ Python strings take longer than a SparseHSIC fit's work
        after its pass over X.
        """
        names = self.__dict__.get("_names_in")
        if names is None:
            raise AttributeError(f"{type(self).__name__} was not fitted on named features")
        if "_names_in_str" not in self.__dict__:
            self._names_in_str = np.asarray([str(v) for v in names], dtype=object)
        return self._names_in_str

    @property
    def result_(self) -> xr.Dataset:
        """The result Dataset (weights, ranks, selection, the method's variables, provenance)."""
        check_is_fitted(self, "scores_")
        res = self.__dict__["_result"]
        pending = self.__dict__.get("_result_deferred")
        if pending:  # variables that are computed only when asked for (e.g. p-values)
            for name, fn in pending.items():
                res[name] = ("feature", fn())
            self._result_deferred = {}
        return res

    def _apply_screen(
        self, bad: np.ndarray, lo: np.ndarray, hi: np.ndarray, names: np.ndarray | None = None
    ) -> np.ndarray:
        """Mask of active features from the screen's statistics (raises on NaN/Inf)."""
        if names is None:  # the raw names: only the (at most 5) shown are made strings
            names = self.__dict__.get("_names_in")
        if bad.sum():
            idx = np.flatnonzero(bad)
            shown = ", ".join(str(names[i]) if names is not None else f"#{i}" for i in idx[:5])
            raise InputError(
                f"X contains {int(bad.sum())} NaN/Inf value(s) in {idx.size} feature(s) "
                f"(first: {shown}); impute or drop them first (e.g. `--nan-policy "
                "zero|mean|drop-feature` on select, evaluate or ingest)"
            )
        const = lo == hi
        if const.all():
            raise InputError(
                f"all {const.size} features of X are constant; there is nothing to select"
            )
        policy = getattr(self, "on_constant", "drop")
        if const.any() and policy == "error":
            idx = np.flatnonzero(const)
            shown = ", ".join(str(names[i]) if names is not None else f"#{i}" for i in idx[:5])
            raise InputError(
                f"X has {idx.size} constant feature(s) (first: {shown}); drop them or use "
                "on_constant='drop' (CLI: --param on_constant=drop) to give them weight 0"
            )
        if const.any():
            log.info("%d constant feature(s) get weight 0 and are never selected", int(const.sum()))
        return ~const

    def _select(self, out: FitOutput, active: np.ndarray) -> np.ndarray:
        """support_: the method's own selection, or the top ``n_features_to_select`` by ranking_."""
        k = getattr(self, "n_features_to_select", None)
        p = active.size
        sup = np.zeros(p, bool)
        if out.support is not None and (k is None or isinstance(k, str) or out.support_is_final):
            sup[active] = np.asarray(out.support, bool)
            return sup
        if k is None:
            sup[active] = self._default_support(self.scores_[active])
            return sup
        if isinstance(k, str):
            raise ParameterError(
                f"n_features_to_select={k!r} is not understood by {type(self).__name__}"
            )
        if isinstance(k, float) and 0 < k < 1:
            k = max(1, int(round(k * p)))
        if k > p:
            raise ParameterError(f"n_features_to_select={k} but X has only {p} features")
        return self.ranking_ <= k  # ranking_ is a permutation of 1..p

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "support_")
        return self.support_

    def transform(self, X: Any) -> Any:
        """Keep the selected features; lazy in, lazy out (dask stays dask, xarray stays xarray)."""
        check_is_fitted(self, "support_")
        if isinstance(X, xr.Dataset):
            X = X["X"]
        if not isinstance(X, (xr.DataArray, da.Array)):
            return super().transform(X)  # numpy, pandas, scipy.sparse: scikit-learn's checks
        if X.ndim != 2:
            raise InputError(f"X must be 2-D (n_samples, n_features); got shape {X.shape}")
        if X.shape[-1] != self.n_features_in_:
            raise InputError(
                f"X has {X.shape[-1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        idx = np.flatnonzero(self.support_)
        if isinstance(X, xr.DataArray):
            return X.isel(feature=idx) if "feature" in X.dims else X[..., idx]
        return X[:, idx]

    def _make_result(
        self, out: FitOutput, active: np.ndarray, feature: np.ndarray, source_attrs: dict
    ) -> xr.Dataset:
        import distributed
        import zarr

        from fsdask.version import current

        p = self.n_features_in_
        data_vars: dict = {
            "weight": ("feature", self.scores_),
            "rank": ("feature", self.ranking_.astype(np.int64)),
            "selected": ("feature", self.support_),
        }
        attrs: dict = {}
        for name, val in out.extras.items():
            arr = np.asarray(val) if not np.isscalar(val) else val
            if name in out.extra_dims:
                dims = out.extra_dims[name]
                if dims[-1] == "feature":
                    arr = _expand(arr, active)
                data_vars[name] = (dims, arr)
            elif isinstance(arr, np.ndarray) and arr.ndim == 1 and arr.size == int(active.sum()):
                data_vars[name] = ("feature", _expand(arr, active))
            else:
                attrs[name] = val
        ds = xr.Dataset(data_vars, coords={"feature": np.asarray(feature), **out.coords})
        for var, text in RESULT_VARIABLES.items():
            ds[var].attrs["description"] = text.format(method=self.method_name)
        params = {
            k: (v if isinstance(v, (int, float, str, bool, type(None), list, tuple)) else repr(v))
            for k, v in self.get_params().items()
        }
        attrs.update(
            {
                "method": self.method_name,
                "estimator": type(self).__name__,
                "parameters": params,
                "n_iter": -1 if out.n_iter is None else int(out.n_iter),
                "converged": "n/a" if out.converged is None else bool(out.converged),
                "objective": [] if out.objective is None else [float(v) for v in out.objective],
                "wall_time_s": round(self.wall_time_, 3),
                "n_features": int(p),
                "n_selected": int(self.support_.sum()),
                "n_constant_features": int((~active).sum()),
                "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "fsdask_version": current(),
                "dask_version": dask.__version__,
                "distributed_version": distributed.__version__,
                "zarr_version": zarr.__version__,
                "xarray_version": xr.__version__,
            }
        )
        attrs.update({f"input_{k}": v for k, v in source_attrs.items()})
        attrs.update(out.attrs)
        ds.attrs = attrs
        return ds


def _screen_stats(X: da.Array) -> tuple[da.Array, da.Array, da.Array]:
    """Lazy per-feature NaN/Inf count, minimum and maximum (one pass over X)."""
    return (~da.isfinite(X)).sum(axis=0), X.min(axis=0), X.max(axis=0)


def _sklearn_feature_names(X: Any, names: np.ndarray | None) -> np.ndarray | None:
    """The names behind ``feature_names_in_``: DataFrame string columns (as scikit-learn
    defines them), or the xarray ``feature`` coordinate (made strings on access)."""
    if isinstance(X, xr.DataArray) or is_anndata(X):
        return names
    if hasattr(X, "columns"):
        return _get_feature_names(X)
    return None


def _expand(
    values: np.ndarray | Callable[[], np.ndarray], active: np.ndarray, fill: Any = 0
) -> np.ndarray:
    """A per-active-feature array (last axis; or a callable giving it) laid out over all
    features; inactive get ``fill``."""
    arr = np.asarray(values() if callable(values) else values)
    if arr.shape[-1] == active.size:  # already over all features
        return arr
    kind = arr.dtype.kind
    full = np.full(
        arr.shape[:-1] + (active.size,),
        fill,
        dtype=arr.dtype if kind in "fiub" and not (fill != 0 and kind != "f") else np.float64,
    )
    full[..., active] = arr
    return full


def _ranking_by(key: np.ndarray | tuple, active: np.ndarray) -> np.ndarray:
    """Ranks (1 = best) from one key or a tuple of keys compared in turn (higher first)."""
    if not isinstance(key, tuple):
        full = np.zeros(active.size)
        full[active] = key
        return _ranking(full, active)
    fulls = [_expand(np.asarray(k, dtype=np.float64), active) for k in key]
    order = np.lexsort(tuple(-k for k in reversed(fulls)) + (~active,))  # lexsort is stable
    ranks = np.empty(active.size, dtype=np.int64)
    ranks[order] = np.arange(1, active.size + 1)
    return ranks


#: heavily tied scores with at most this many distinct values are ranked by a radix sort
_DENSE_MAX = 1 << 16
#: from this many features on, the stable order comes from a radix sort of the keys' bits.
#: The sort is numba code: its first call in a process loads the JIT runtime (~40 MiB of
#: RSS, measured on a client that had not used numba yet), so it is used only where it saves
#: tens of milliseconds and the client already holds tens of MiB of per-feature results.
_RADIX_MIN = 1 << 18


def _ranking(scores: np.ndarray, active: np.ndarray) -> np.ndarray:
    """1 = best; ties keep feature order; inactive (constant) features rank last.

    The result equals a stable argsort of ``-scores``.  From ``_RADIX_MIN`` features on it
    is a radix sort of the keys' bits (:func:`fsdask._sort.stable_argsort`, O(p)); below,
    :func:`_stable_order`.
    """
    zero = active & (scores == 0)
    if zero.sum() > scores.size // 2:  # sparse weights (SparseHSIC, Logo): sort the rest only
        return _ranking_sparse(scores, active, zero)
    key = np.where(active, -scores, np.inf)
    if key.size >= _RADIX_MIN and not np.isnan(key).any():
        order = stable_argsort(key)
    else:
        order = _stable_order(key)
    ranks = np.empty(scores.size, dtype=np.int64)
    ranks[order] = np.arange(1, scores.size + 1)
    return ranks


def _stable_order(key: np.ndarray) -> np.ndarray:
    """A stable argsort of ``key`` by NumPy's (SIMD) introsort, ~3× faster than the stable
    merge sort, then only the runs of tied keys put back in feature order.  When more than
    1/16 of the keys are tied (e.g. the KS D = k/(n₁n₂)) each feature's dense rank (its run
    of equal keys) is stably sorted instead — by NumPy's radix sort when there are ≤ 2¹⁶
    runs, else by the stable merge sort of the keys."""
    order = np.argsort(key)
    sk = key[order]
    tie = sk[1:] == sk[:-1]
    if tie.sum() > key.size // 16:  # heavily tied scores
        run = np.concatenate(([0], np.cumsum(~tie)))  # dense rank of each sorted key
        if run[-1] < _DENSE_MAX:
            dense = np.empty(key.size, np.uint16)
            dense[order] = run
            order = np.argsort(dense, kind="stable")  # radix sort: O(p)
        else:
            order = np.argsort(key, kind="stable")
    elif tie.any():
        in_run = np.zeros(key.size, bool)
        in_run[1:] |= tie
        in_run[:-1] |= tie
        pos = np.flatnonzero(in_run)
        run = np.cumsum(np.concatenate(([True], ~tie)))[pos]  # id of each position's tie run
        sub = order[pos]
        order[pos] = sub[np.lexsort((sub, run))]
    return order


def _ranking_sparse(scores: np.ndarray, active: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """:func:`_ranking` when most scores are exactly 0: the positive scores (sorted), the zeros
    and the negative scores (sorted) in turn, then the inactive features — each group in
    feature order where tied, as the stable sort; only the nonzero scores are sorted."""
    groups = []
    for sel in (active & (scores > 0), zero, active & (scores < 0)):
        idx = np.flatnonzero(sel)
        if sel is not zero and idx.size:
            idx = idx[np.argsort(_ranking(scores[idx], np.ones(idx.size, bool)))]
        groups.append(idx)
    groups.append(np.flatnonzero(~active))
    ranks = np.empty(scores.size, dtype=np.int64)
    ranks[np.concatenate(groups)] = np.arange(1, scores.size + 1)
    return ranks


def top_k_mask(scores: np.ndarray, k: int) -> np.ndarray:
    """The k highest scores, ties broken by feature order (as a stable sort would), in O(p)."""
    n = scores.size
    if k >= n:
        return np.ones(n, bool)
    kth = np.partition(-scores, k - 1)[k - 1]  # minus the k-th largest score
    mask = -scores < kth
    ties = np.flatnonzero(-scores == kth)[: k - int(mask.sum())]
    mask[ties] = True
    return mask
