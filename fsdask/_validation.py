"""Input validation shared by every estimator and command.

The data model: ``X`` is (sample, feature); inside fsdask it is a dask array whose chunks
span *all samples* and a contiguous block of features, so that every per-feature statistic
is a blockwise map and every sample-by-sample statistic is a sum over blocks.

This module is also the one importer of scikit-learn's private
``sklearn.utils._param_validation``: the parameter-constraint types (``Interval``,
``StrOptions``, ``Options``, ``HasMethods``), ``validate_parameter_constraints`` and
``InvalidParameterError`` are re-exported here, so that a scikit-learn release that moves
them is absorbed in one place (pyproject.toml bounds scikit-learn from above for that reason).
"""

from __future__ import annotations

import numbers
import uuid
from typing import Any

import dask
import dask.array as da
import numpy as np
import pandas as pd
import scipy.sparse
import xarray as xr

# scikit-learn's private _param_validation, imported here only (``X as X``: re-exported)
from sklearn.utils._param_validation import HasMethods as HasMethods
from sklearn.utils._param_validation import Interval as Interval
from sklearn.utils._param_validation import InvalidParameterError as InvalidParameterError
from sklearn.utils._param_validation import Options as Options
from sklearn.utils._param_validation import StrOptions as StrOptions
from sklearn.utils._param_validation import (
    validate_parameter_constraints as validate_parameter_constraints,
)

from fsdask._blocks import compute_blocks
from fsdask.errors import InputError, InputTypeError

#: default target size in bytes of one feature block (chunk) of X
DEFAULT_CHUNK_BYTES = 64 * 2**20


def feature_block_size(
    n_samples: int, itemsize: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> int:
    """Number of features per block so that a block (all samples) is about ``chunk_bytes``."""
    return max(1, int(chunk_bytes // max(1, n_samples * itemsize)))


def as_feature_blocks(
    X: da.Array, block: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> da.Array:
    """Rechunk ``X`` (sample, feature) to (all samples, feature block) if it is not already."""
    n, p = X.shape
    if block is None:
        if len(X.chunks[0]) == 1:
            return X
        block = feature_block_size(n, X.dtype.itemsize, chunk_bytes)
    return X.rechunk({0: -1, 1: block})


def is_anndata(X: Any) -> bool:
    """Whether ``X`` is an ``anndata.AnnData`` (tested by duck type: anndata stays optional)."""
    return type(X).__module__.split(".")[0] == "anndata" and hasattr(X, "var_names")


def _anndata_matrix(X: Any, name: str) -> Any:
    """The matrix of an in-memory AnnData; a backed one is refused (its ``X`` is a file handle)."""
    if getattr(X, "isbacked", False):
        raise InputError(
            f"{name} is a backed AnnData ({X.filename}); open the file with "
            "fsdask.open_dataset(path), which streams it block by block, and fit on that"
        )
    return X.X


def check_dims(X: xr.DataArray, name: str = "X") -> xr.DataArray:
    """``X`` with dims ``(sample, feature)``; dims named otherwise are refused, never guessed.

    xarray names its dims, so fsdask matches them by name: a ``(gene, cell)`` array taken by
    position would return one score per cell.
    """
    if X.ndim != 2:
        raise InputError(f"{name} must be 2-D (sample, feature); got dims {X.dims}")
    if set(X.dims) != {"sample", "feature"}:
        raise InputError(
            f"{name} has dims {tuple(X.dims)}; fsdask matches dims by name, not position: rename "
            f"them to 'sample' and 'feature', e.g. X.rename({{{X.dims[0]!r}: 'sample', "
            f"{X.dims[1]!r}: 'feature'}}) (or the other way round), or name them when opening "
            "a store (open_dataset(..., sample_dim=, feature_dim=))"
        )
    return X.transpose("sample", "feature")


def feature_names_of(X: Any) -> np.ndarray | None:
    """Feature ids of ``X`` if it carries them (DataArray ``feature`` coord, DataFrame columns,
    AnnData ``var_names``)."""
    if is_anndata(X):
        return np.asarray(X.var_names)
    if isinstance(X, xr.DataArray) and "feature" in X.coords:
        return np.asarray(X.coords["feature"].values)
    cols = getattr(X, "columns", None)
    if cols is not None:
        return np.asarray(cols)
    return None


def check_array(
    X: Any,
    *,
    name: str = "X",
    allow_nan: bool = False,
    dtype: Any = None,
    min_samples: int = 1,
    min_features: int = 1,
    check_finite: bool = True,
    layout: str = "features",
) -> da.Array:
    """Turn numpy / dask / xarray / pandas / AnnData input into a 2-D dask array.

    Non-finite values are checked lazily-but-once: the check is a single streaming pass
    (``isfinite`` reduction) and the error says how many bad values there are and in which
    features, so the user can fix the input or pick a NaN policy at ingest.

    Parameters
    ----------
    X : array-like (n_samples, n_features)
    name : str, for messages
    allow_nan, check_finite : whether non-finite values are refused here (one pass)
    dtype : dtype of the result, or None (floats kept; others float64)
    min_samples, min_features : int, the least the caller needs
    layout : {"features", "samples", "stored"}
        ``features``: (all samples, feature block) — a dask X with several row blocks is
        rechunked in the graph.  ``samples``: a sample-blocked X is kept as it is — dask
        blocks NumPy or ``scipy.sparse`` CSR (never densified), integer counts kept;
        an in-memory scipy.sparse X becomes CSR row blocks.  ``stored``: as ``features``
        for in-memory X; a dask X stays in its stored blocks, for the caller to convert
        (:meth:`fsdask.base.Selector.fit` does, through ``fsdask.io.rechunk``).

    Returns
    -------
    dask array (n, p)
    """
    if layout not in ("features", "samples", "stored"):
        raise ValueError(f"check_array: layout={layout!r} is not one of features, samples, stored")
    X = _as_dask(X, name, sparse_rows=layout == "samples")
    _check_blocks_and_kind(X, name)
    if (
        X.dtype == np.float16
    ):  # too coarse for the sums fsdask forms, and not supported by its kernels
        X = X.astype(np.float32)
    _check_size(X, name, min_samples, min_features)
    keep_counts = layout == "samples" and X.dtype.kind in "iu"  # the kernels widen them
    if dtype is not None:
        X = X.astype(dtype)
    elif not (np.issubdtype(X.dtype, np.floating) or keep_counts):
        X = X.astype(np.float64)
    if layout == "features":
        X = as_feature_blocks(X)
    elif layout == "samples":
        X = merged_row_blocks(X)
    if check_finite and not allow_nan:
        assert_all_finite(X, name=name)
    return X


def _as_dask(X: Any, name: str, sparse_rows: bool = False) -> da.Array:
    """Any accepted input kind as a dask array (sample, feature); numbers only.  An in-memory
    scipy.sparse X becomes CSR row blocks (``sparse_rows``) or dense feature blocks."""
    if isinstance(X, xr.Dataset):
        if "X" not in X:
            raise InputError(
                f"{name}: the Dataset has no variable 'X' (found {list(X.data_vars)}); "
                "pass ds['X'] or a dataset made by fsdask.ingest"
            )
        X = X["X"]
    if is_anndata(X):
        X = _anndata_matrix(X, name)
    if isinstance(X, xr.DataArray):
        X = check_dims(X, name).data
    elif hasattr(X, "to_numpy") and not isinstance(X, da.Array):  # pandas
        try:
            X = X.to_numpy()
        except Exception as exc:  # pragma: no cover - defensive
            raise InputError(f"{name}: could not convert to an array: {exc}") from exc
    if scipy.sparse.issparse(X):
        X = sparse_sample_blocks(X) if sparse_rows else sparse_feature_blocks(X)
    if isinstance(X, da.Array):
        return X
    X = _numeric_numpy(np.asarray(X), name)
    if X.ndim != 2:
        raise InputError(
            f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}"
            + ("; for a single feature use X.reshape(-1, 1)" if X.ndim == 1 else "")
        )
    return da.from_array(X, chunks=(-1, feature_block_size(X.shape[0], max(X.dtype.itemsize, 4))))


def _numeric_numpy(X: np.ndarray, name: str) -> np.ndarray:
    """``X`` with numbers held as objects converted; anything non-numeric refused."""
    if X.dtype == object:
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InputTypeError(
                f"{name} has non-numeric values ({exc}); convert the columns to "
                "numbers or drop the non-numeric ones"
            ) from None
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        raise InputTypeError(
            f"{name} has non-numeric values (dtype {X.dtype}); convert the columns to numbers "
            "or drop the non-numeric ones (for CSV ingest, name the label column with --label)"
        )
    return X


def _check_blocks_and_kind(X: da.Array, name: str) -> None:
    """Refuse a dask array fsdask cannot split into features or compute on."""
    if X.ndim != 2:
        raise InputError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}")
    if any(np.isnan(c) for dim in X.chunks for c in dim):
        raise InputError(
            f"{name} has unknown chunk sizes (shape {X.shape}); call X.compute_chunk_sizes() "
            "first (dask cannot split unknown blocks into features)"
        )
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        raise InputError(f"{name} has non-numeric dtype {X.dtype}; expected float or int values")
    if np.issubdtype(X.dtype, np.complexfloating):
        raise InputError(
            f"{name} is complex ({X.dtype}): Complex data not supported; fsdask works on real values"
        )


def _check_size(X: da.Array, name: str, min_samples: int, min_features: int) -> None:
    """Refuse an empty X or one smaller than the method needs."""
    n, p = X.shape
    for count, what in ((n, "sample"), (p, "feature")):
        if count == 0:
            raise InputError(
                f"{name} is empty: 0 {what}(s) (shape={X.shape}) while a minimum of 1 is "
                "required; pass a non-empty X"
            )
    if n < min_samples:
        raise InputError(f"{name} has {n} samples; this method needs at least {min_samples}")
    if p < min_features:
        raise InputError(f"{name} has {p} features; this method needs at least {min_features}")


def assert_all_finite(
    X: da.Array, name: str = "X", feature_names: np.ndarray | None = None
) -> None:
    """Raise :class:`InputError` naming the count and first features of non-finite values."""
    # p counts: joined on the client, not in one task
    counts = X.map_blocks(_nonfinite_counts, dtype=np.int64, meta=np.empty((0, 0), np.int64))
    (bad_per_feature,) = compute_blocks(counts.sum(axis=0))
    total = int(bad_per_feature.sum())
    if total:
        idx = np.flatnonzero(bad_per_feature)
        shown = [str(feature_names[i]) if feature_names is not None else str(i) for i in idx[:5]]
        raise InputError(
            f"{name} contains {total} NaN/Inf value(s) in {idx.size} feature(s) "
            f"(first: {', '.join(shown)}); impute or drop them first, e.g. "
            "`--nan-policy zero|mean|drop-feature` on select, evaluate or ingest, or X.fillna(...)"
        )


def _nonfinite_counts(xb: Any) -> np.ndarray:
    """NaN/Inf values per column of one block (NumPy or scipy.sparse: its stored values), as
    one row of a (row blocks, p) array of counts."""
    if scipy.sparse.issparse(xb):
        xb = scipy.sparse.csr_matrix(xb)
        bad = ~np.isfinite(xb.data)
        return np.bincount(xb.indices[bad], minlength=xb.shape[1])[None, :].astype(np.int64)
    return (~np.isfinite(xb)).sum(axis=0, dtype=np.int64)[None, :]


def constant_features(X: da.Array) -> da.Array:
    """Boolean mask (lazy) of features whose values are all equal (zero norm after centring)."""
    return X.max(axis=0) == X.min(axis=0)


def check_y(y: Any, n_samples: int, *, name: str = "y", task: str = "any") -> np.ndarray:
    """Validate a response vector of length ``n_samples``.

    ``task`` is ``"classification"`` (needs ≥ 2 classes), ``"regression"`` (numeric,
    finite, not constant) or ``"any"``.
    """
    if y is None:
        raise InputError(
            f"{name} is required by this method; pass labels or a response with fit(X, y)"
        )
    if isinstance(y, (xr.DataArray, da.Array)):
        y = np.asarray(y.compute() if hasattr(y, "compute") else y)
    y = np.asarray(y)
    if y.ndim == 0:
        raise InputError(f"{name} is a scalar ({y!r}); give one label per sample")
    if y.ndim == 2 and 1 in y.shape and task == "classification":
        y = y.ravel()
    if y.ndim != 1 and task == "classification":
        raise InputError(f"{name} must be 1-D (one class label per sample); got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise InputError(
            f"{name} has {y.shape[0]} entries but X has {n_samples} samples; "
            "they must describe the same samples in the same order"
        )
    missing = missing_labels(y)
    if missing.any() and (
        task == "classification" or y.dtype.kind in "OUST"
    ):  # a response: its own NaN check
        idx = np.flatnonzero(
            missing if missing.ndim == 1 else missing.any(axis=tuple(range(1, y.ndim)))
        )
        raise InputError(
            f"{name} has {idx.size} missing label(s) (NaN, None or empty; first at sample(s) "
            f"{', '.join(map(str, idx[:5]))}); fill them in or drop those samples "
            "(--drop-unlabelled, or open_dataset(..., drop_unlabelled=True))"
        )
    if task == "classification":
        classes = class_codes(y)[0]
        if classes.size < 2:
            raise InputError(
                f"{name} has a single class ({classes[0]!r}); a supervised method needs "
                "at least two classes"
            )
    elif task == "regression":
        if y.dtype == object:  # numbers held as objects convert; anything else is refused
            try:
                y = y.astype(np.float64)
            except (TypeError, ValueError):
                raise InputError(
                    f"{name} has values that are not numbers (Unknown label type for a "
                    "continuous response); pass a numeric y"
                ) from None
        if not np.issubdtype(y.dtype, np.number):
            raise InputError(f"{name} must be numeric for a continuous response (dtype {y.dtype})")
        if not np.all(np.isfinite(y)):
            raise InputError(f"{name} has {int((~np.isfinite(y)).sum())} NaN/Inf value(s)")
        if np.ptp(y, axis=0).min() == 0:
            raise InputError(f"{name} is constant; a response must vary across samples")
    return y


def string_ids(values: Any) -> np.ndarray:
    """Sample or feature ids as an object array of Python ``str`` (a dataset's coordinates).

    Ids read from AnnData or Zarr are usually Python strings already; they are then taken as
    they are, after one C-level look at their types.  Anything else (numbers, bytes, a
    fixed-width array) goes through ``astype(str)``, which would otherwise build every one of
    a million cell names twice.

    Parameters
    ----------
    values : array-like (m,)

    Returns
    -------
    numpy.ndarray (m,) of str, dtype object.  Memory: m pointers (the strings are shared
    when they already were ``str``).
    """
    arr = np.asarray(values)
    if arr.dtype == object and pd.api.types.infer_dtype(arr, skipna=False) == "string":
        return arr.copy()
    return arr.astype(str).astype(object)


def sparse_feature_blocks(X: Any, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> da.Array:
    """A scipy.sparse matrix as a dask array whose blocks are densified one feature block at a time."""
    Xc = scipy.sparse.csc_matrix(X)
    n, p = Xc.shape
    dtype = Xc.dtype if np.issubdtype(Xc.dtype, np.floating) else np.dtype(np.float64)
    step = feature_block_size(max(n, 1), dtype.itemsize, chunk_bytes)
    blocks = [
        da.from_delayed(
            dask.delayed(_densify)(Xc[:, j : j + step], dtype), (n, min(step, p - j)), dtype=dtype
        )
        for j in range(0, p, step)
    ]
    if not blocks:
        return da.zeros((n, 0), dtype=dtype)
    return da.concatenate(blocks, axis=1)


def sparse_sample_blocks(X: Any, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> da.Array:
    """A scipy.sparse matrix as a dask array of CSR row blocks, kept sparse.

    Parameters
    ----------
    X : scipy.sparse matrix or array (n, p), any format (converted to CSR once)
    chunk_bytes : int, the stored values (and their column indices) of one row block

    Returns
    -------
    dask array (n, p) whose blocks are ``scipy.sparse.csr_matrix`` row slices (all features);
    integer counts keep their dtype.  Memory: the CSR copy of X (none if X is a CSR matrix).
    """
    Xr = scipy.sparse.csr_matrix(X)
    if not Xr.has_canonical_format:  # duplicates summed, as densifying would
        Xr = Xr.copy()
        Xr.sum_duplicates()
    n = Xr.shape[0]
    row_bytes = (Xr.data.itemsize + Xr.indices.itemsize) * Xr.nnz / max(n, 1)
    rows = max(1, int(chunk_bytes // max(row_bytes, 1.0)))
    # not da.from_array: it copies X and hashes every stored value for the graph's name, and
    # scipy's row slicing copies the rows — together as long as the statistics themselves
    step = min(rows, max(n, 1))
    name = f"csr-rows-{uuid.uuid4().hex}"
    source = ("csr-source-" + name[9:],)
    graph: dict = {source: Xr}
    starts = range(0, max(n, 1), step)  # an empty X: one empty block
    for i, a in enumerate(starts):
        graph[(name, i, 0)] = (_csr_rows, source, a, min(a + step, n))
    chunks = (tuple(min(step, n - a) for a in starts), (Xr.shape[1],))
    meta = scipy.sparse.csr_matrix((0, 0), dtype=Xr.dtype)
    return da.Array(graph, name, chunks, meta=meta)


def _csr_rows(X: Any, a: int, b: int) -> Any:
    """Rows a … b − 1 (all columns) of the canonical CSR matrix X, as views of its arrays."""
    s, e = int(X.indptr[a]), int(X.indptr[b])
    indptr = X.indptr[a : b + 1] - s
    if e - s < 2**31 and X.indices.dtype == np.int32:  # scipy would upcast the indices
        indptr = indptr.astype(np.int32)
    # set, not passed to the constructor: scipy copies a view of a much larger array
    M = scipy.sparse.csr_matrix((b - a, X.shape[1]), dtype=X.dtype)
    M.data, M.indices, M.indptr = X.data[s:e], X.indices[s:e], indptr
    M.has_canonical_format = True  # X is canonical; scipy would look at every index again
    return M


#: assumed share of stored values in a CSR row, to size its row blocks before reading it
CSR_DENSITY = 0.1


def merged_row_blocks(X: da.Array, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> da.Array:
    """X with runs of small consecutive row blocks merged (in the graph, whole blocks only),
    so that a store chunked by one or a few samples does not make a task per sample.

    Parameters
    ----------
    X : dask array (n, p), NumPy or CSR blocks
    chunk_bytes : int, the target size of a block (a CSR block is sized for
        :data:`CSR_DENSITY` stored values, 12 bytes each)

    Returns
    -------
    X itself when its row blocks are at least a quarter of the target; else merged.
    Memory: one merged block per task.
    """
    rows = X.chunks[0]
    if len(rows) == 1:
        return X
    width = max(X.chunks[1])
    if scipy.sparse.issparse(getattr(X, "_meta", None)):
        row_bytes = 12.0 * CSR_DENSITY * width
    else:
        row_bytes = float(width * X.dtype.itemsize)
    target = max(1, int(chunk_bytes // max(row_bytes, 1.0)))
    if np.median(rows) >= target / 4:
        return X
    merged, acc = [], 0
    for r in rows:
        if acc and acc + r > target:
            merged.append(acc)
            acc = 0
        acc += r
    merged.append(acc)
    return X.rechunk({0: tuple(merged)})


def is_sample_blocked(X: Any) -> bool:
    """Whether a dask X is not in fsdask's feature blocks: several row blocks, or sparse blocks."""
    if not isinstance(X, da.Array):
        return False
    return len(X.chunks[0]) > 1 or scipy.sparse.issparse(getattr(X, "_meta", None))


def _densify(block: Any, dtype: Any) -> np.ndarray:
    return np.asarray(block.toarray(), dtype=dtype)


class _Number(Interval):
    """scikit-learn's ``Interval`` without booleans (``True`` is not a number of iterations)."""

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


def Real(low: float | None = None, high: float | None = None, closed: str = "both") -> Interval:
    """Constraint: a *finite* real in [low, high] (``closed`` as in scikit-learn's Interval).

    scikit-learn's ``Interval(Real, 0, None)`` refuses NaN but lets +Inf through; here an open
    end is -Inf/+Inf excluded, so every float parameter is finite.
    """
    left = closed in ("left", "both") and low is not None
    right = closed in ("right", "both") and high is not None
    kind = {
        (True, True): "both",
        (True, False): "left",
        (False, True): "right",
        (False, False): "neither",
    }
    return _Number(
        numbers.Real,
        -np.inf if low is None else low,
        np.inf if high is None else high,
        closed=kind[left, right],
    )


def Int(low: int | None = None, high: int | None = None, closed: str = "both") -> Interval:
    """Constraint: an integer (not a bool, not a float) in [low, high]."""
    left = closed in ("left", "both") and low is not None
    right = closed in ("right", "both") and high is not None
    kind = {
        (True, True): "both",
        (True, False): "left",
        (False, True): "right",
        (False, False): "neither",
    }
    return _Number(numbers.Integral, low, high, closed=kind[left, right])


def missing_labels(y: np.ndarray) -> np.ndarray:
    """Elementwise mask of NaN, None and empty / blank string labels."""
    if y.dtype.kind == "f":
        return np.isnan(y)
    if y.dtype.kind in "OUST":
        # each distinct label is looked at once: a million cells carry a handful of labels
        inverse, uniq = pd.factorize(y.ravel(), use_na_sentinel=False)
        flat = [
            v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip())
            for v in uniq
        ]
        return np.array(flat, dtype=bool)[inverse].reshape(y.shape)
    return np.zeros(y.shape, dtype=bool)


def class_codes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted classes of a 1-D label vector and the code of each label.

    The same as ``np.unique(y, return_inverse=True)``; object and string labels are hashed
    first, so that only the distinct labels are sorted (NumPy sorts every label as a
    Python object, 0.06 s per 2·10⁵).
    """
    if y.dtype.kind not in "OUS":
        return np.unique(y, return_inverse=True)
    inverse, uniq = pd.factorize(y, use_na_sentinel=False)
    classes, position = np.unique(np.asarray(uniq, dtype=y.dtype), return_inverse=True)
    return classes, position[inverse]


def class_counts(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`class_codes` and the number of labels in each class: the same as
    ``np.unique(y, return_inverse=True, return_counts=True)``."""
    classes, codes = class_codes(y)
    return classes, codes, np.bincount(codes, minlength=classes.size)
