"""Open matrices other tools wrote: Zarr v2/v3 stores of xarray or zarr-python, consolidated or not.

Rules (documented in the README, "Opening data other tools wrote"):

* **variable** — the matrix: ``variable`` if given (a path such as ``layers/counts`` reaches
  into subgroups), else ``X`` if it is 2-D, else the only 2-D numeric array; several and no
  ``variable`` is an error listing them.
* **dims, by name, never by position** — ``sample_dim``/``feature_dim`` if given (one is
  enough, the other is the remaining dim); else dims named ``sample`` and ``feature``, or one
  of them and the other by elimination.  Anything else is an error listing the dims and the
  option.  Dims come from Zarr v3 ``dimension_names`` or xarray's ``_ARRAY_DIMENSIONS``;
  unnamed dims are called ``dim_0``, ``dim_1``.
* **label** — ``label`` if given (an array along the sample dim); else the first 1-D array
  along the sample dim named one of :data:`LABEL_NAMES`; else unlabelled.  Text labels
  become integer codes with ``class_names``; NaN labels are refused.
* **ids** — a 1-D array named like a dim gives that dim's ids (sample ids, feature ids).
* **dtypes** — float32/64 as stored; float16 is read as float32; integers and booleans as
  stored (estimators convert); anything else is refused.

A foreign store is only read: nothing is written into it, and its dataset carries the
attribute ``foreign`` that ``fsdask info`` shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
import zarr

from fsdask._validation import DEFAULT_CHUNK_BYTES, missing_labels, string_ids
from fsdask.errors import InputError, StoreError
from fsdask.io.blocks import block_bytes, merged_chunks
from fsdask.io.guard import GuardedArray, guarded_dask
from fsdask.io.location import safe_url
from fsdask.io.options import ReadOptions

#: 1-D variables along the sample dim taken as the label when ``label`` is not given, in this order
LABEL_NAMES = ("y", "label", "labels", "class", "classes", "target", "cell_type")


def dims_of(arr: Any) -> tuple[str, ...]:
    """Dimension names of a Zarr array (v3 metadata or xarray's v2 attribute); ``dim_i`` if unnamed."""
    names = getattr(arr.metadata, "dimension_names", None)
    if not names:
        names = arr.attrs.get("_ARRAY_DIMENSIONS")
    if not names or len(names) != arr.ndim:
        names = [None] * arr.ndim
    return tuple(str(n) if n is not None else f"dim_{i}" for i, n in enumerate(names))


def map_dims(
    dims: tuple[str, ...], sample_dim: str | None, feature_dim: str | None, where: str
) -> tuple[str, str]:
    """(sample dim, feature dim) among ``dims``, matched by name; an error says which option to use."""
    how = "pass --sample-dim NAME and/or --feature-dim NAME (Python: sample_dim=, feature_dim=)"
    if sample_dim is not None and sample_dim == feature_dim:
        raise InputError(
            f"{where}: --sample-dim and --feature-dim are both {sample_dim!r}; they must name "
            f"the two different dims of {dims}"
        )
    for opt, given in (("--sample-dim", sample_dim), ("--feature-dim", feature_dim)):
        if given is not None and given not in dims:
            raise InputError(
                f"{where}: {opt} {given!r} is not a dim of the matrix (dims: {dims}); {how}"
            )
    if len(set(dims)) != 2:
        raise InputError(
            f"{where}: the matrix's dims {dims} are ambiguous (the same name twice); "
            "rename them in the store"
        )
    other = {dims[0]: dims[1], dims[1]: dims[0]}
    if sample_dim is None and feature_dim is None:
        if "sample" in dims:
            sample_dim = "sample"
        elif "feature" in dims:
            feature_dim = "feature"
        else:
            raise InputError(
                f"{where}: the matrix has dims {dims}, none named 'sample' or 'feature', and "
                f"fsdask never guesses by position; {how}"
            )
    if sample_dim is None:
        sample_dim = other[feature_dim]
    if feature_dim is None:
        feature_dim = other[sample_dim]
    return sample_dim, feature_dim


def encode_labels(y: np.ndarray, where: str, name: str) -> tuple[np.ndarray, list[str] | None]:
    """Labels as numbers: text → integer codes (sorted classes).

    A missing label (None, NaN, a blank string) becomes NaN, never a class of its own;
    :func:`fsdask.io.open.open_dataset` refuses it or drops the sample (``drop_unlabelled``).
    """
    y = np.asarray(y)
    if y.dtype.kind in "OUST":
        missing = missing_labels(y)
        classes, codes = np.unique(y[~missing].astype(object).astype(str), return_inverse=True)
        if missing.any():
            codes, known = np.full(y.shape, np.nan), codes
            codes[~missing] = known
        return codes if missing.any() else codes.astype(np.int64), [str(c) for c in classes]
    if y.dtype.kind == "f" and np.isinf(y).any():
        raise InputError(
            f"{where}: label {name!r} has {int(np.isinf(y).sum())} infinite value(s); "
            "a label must be a class or a finite number"
        )
    if y.dtype.kind not in "fiub":
        raise InputError(f"{where}: label {name!r} has dtype {y.dtype}; expected numbers or text")
    return y, None


def check_numeric(dtype: np.dtype, where: str, name: str) -> np.dtype:
    """The dtype X is read as: float16 → float32; other non-numeric dtypes are refused."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "fiub":
        raise InputError(
            f"{where}: variable {name!r} has dtype {dtype}, not numbers; choose a numeric "
            "matrix with --variable"
        )
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _ids(group: zarr.Group, dim: str, size: int) -> np.ndarray:
    if dim in group and isinstance(group[dim], zarr.Array) and group[dim].shape == (size,):
        v = np.asarray(group[dim][...])
        return string_ids(v) if v.dtype.kind in "OUST" else v
    return np.arange(size)


def _choose_variable(group: zarr.Group, variable: str | None, where: str) -> tuple[str, zarr.Array]:
    arrays = dict(group.arrays())
    if variable is not None:
        try:
            node = group[variable]
        except KeyError:
            raise InputError(
                f"{where}: no variable {variable!r} (found {sorted(arrays)}); check --variable"
            ) from None
        if not isinstance(node, zarr.Array):
            raise InputError(
                f"{where}: {variable!r} is a group, not an array; name an array with --variable"
            )
        return variable, node
    if "X" in arrays and arrays["X"].ndim == 2:
        return "X", arrays["X"]
    two = sorted(k for k, a in arrays.items() if a.ndim == 2 and a.dtype.kind in "fiub")
    if len(two) == 1:
        return two[0], arrays[two[0]]
    found = ", ".join(f"{k}{dims_of(a)}" for k, a in sorted(arrays.items())) or "nothing"
    if not two:
        raise StoreError(
            f"{where}: no variable 'X' and no 2-D numeric variable (found {found}) — not an "
            "fsdask dataset nor a matrix fsdask can read; name it with --variable or create "
            "one with `fsdask ingest`"
        )
    raise InputError(
        f"{where}: several 2-D variables ({', '.join(two)}) and none named X; choose one "
        "with --variable NAME (Python: variable=)"
    )


def _label(
    group: zarr.Group, label: str | None, sdim: str, n: int, where: str, skip: set[str]
) -> tuple[np.ndarray | None, list[str] | None, str | None]:
    if label is not None:
        name = label.removeprefix("obs:")
        if name not in group or not isinstance(group[name], zarr.Array):
            cands = sorted(k for k, a in group.arrays() if a.ndim == 1)
            raise InputError(
                f"{where}: no label variable {name!r} (1-D variables: {cands}); check --label"
            )
        arr = group[name]
        if arr.ndim != 1 or arr.shape[0] != n:
            raise InputError(
                f"{where}: label {name!r} has shape {arr.shape}, but there are {n} samples "
                f"along {sdim!r}; give a 1-D variable along the sample dim"
            )
        d = dims_of(arr)[0]
        if not d.startswith("dim_") and d != sdim:
            raise InputError(
                f"{where}: label {name!r} runs along {d!r}, not the sample dim {sdim!r}"
            )
    else:
        name = next(
            (
                k
                for k in LABEL_NAMES
                if k in group
                and k not in skip
                and isinstance(group[k], zarr.Array)
                and group[k].ndim == 1
                and group[k].shape[0] == n
                and dims_of(group[k])[0] in (sdim, "dim_0")
            ),
            None,
        )
        if name is None:
            return None, None, None
    y, classes = encode_labels(np.asarray(group[name][...]), where, name)
    return y, classes, name


def open_foreign_zarr(
    node: Any, url: str, options: ReadOptions, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> xr.Dataset:
    """An fsdask dataset (lazy) from a Zarr group or array that fsdask did not write.

    Parameters
    ----------
    node : zarr.Group or zarr.Array
        The store's root, opened read-only.
    url : str
        Its URL (for messages; credentials are never shown).
    options : ReadOptions
        ``variable``, ``sample_dim``, ``feature_dim`` and ``label`` are used.
    chunk_bytes : int
        About how much one task reads: consecutive stored chunks along the samples are
        merged up to it (a store chunked one sample per chunk is not read a chunk a task).

    Returns
    -------
    xarray.Dataset
        ``X`` lazy in the stored chunks, merged along the samples (then kept by sample
        blocks or re-blocked by :mod:`fsdask.io.rechunk`), ``y`` when a label is found,
        attribute ``foreign`` saying how the store was read.
    """
    variable, label = options.variable, options.label
    where = safe_url(url)
    if isinstance(node, zarr.Array):
        group, name, arr = None, variable or "(root array)", node
        if variable is not None:
            raise InputError(f"{where}: the store is a single array; --variable does not apply")
    else:
        group = node
        name, arr = _choose_variable(group, variable, where)
    if arr.ndim != 2:
        raise InputError(
            f"{where}: variable {name!r} is {arr.ndim}-D (dims {dims_of(arr)}); fsdask needs a "
            "2-D (sample, feature) matrix; choose one with --variable"
        )
    dtype = check_numeric(arr.dtype, where, name)
    dims = dims_of(arr)
    sdim, fdim = map_dims(
        dims, options.sample_dim, options.feature_dim, f"{where} (variable {name!r})"
    )
    guarded = GuardedArray(arr, url if group is None else f"{url.rstrip('/')}/{name}")
    from dask.base import tokenize

    size = block_bytes(chunk_bytes, options.memory_budget)
    chunks = _merged_sample_chunks(arr, dims.index(sdim), size)
    token = tokenize(where, name, arr.shape, chunks, str(arr.metadata))
    X = guarded_dask(guarded, chunks, name="fsdask-foreign-" + token)
    if dims.index(sdim) == 1:
        X = X.T
    if X.dtype != dtype:
        X = X.astype(dtype)
    n, p = X.shape
    coords = {"sample": np.arange(n), "feature": np.arange(p)}
    y = classes = lname = None
    if group is not None:
        coords = {"sample": _ids(group, sdim, n), "feature": _ids(group, fdim, p)}
        y, classes, lname = _label(group, label, sdim, n, where, skip={name})
    elif label is not None:
        raise InputError(
            f"{where}: the store is a single array; there is no label variable {label!r}"
        )
    ds = xr.Dataset({"X": (("sample", "feature"), X)}, coords=coords)
    if y is not None:
        ds["y"] = ("sample", y, {"label": lname})
    attrs = dict(group.attrs) if group is not None else {}
    ds.attrs = {k: v for k, v in attrs.items() if isinstance(v, (str, int, float, bool))}
    if classes is not None:
        ds.attrs["class_names"] = classes
    fmt = arr.metadata.zarr_format
    ds.attrs["foreign"] = (
        f"Zarr v{fmt} store not written by fsdask, opened read-only: X = {name!r} "
        f"({sdim} → sample, {fdim} → feature)" + (f", y = {lname!r}" if lname else ", no label")
    )
    ds.attrs["source"] = where
    return ds


def _merged_sample_chunks(arr: Any, axis: int, chunk_bytes: int) -> tuple[tuple[int, ...], ...]:
    """The stored chunks of ``arr`` with those along the sample ``axis`` merged, whole, up to
    ``chunk_bytes`` per block (the features keep their stored chunks)."""
    shape, stored = arr.shape, arr.chunks
    other = 1 - axis
    width = min(stored[other], shape[other]) or 1
    target = chunk_bytes // max(1, width * arr.dtype.itemsize)
    out = [None, None]
    out[axis] = merged_chunks(shape[axis], stored[axis], target)
    out[other] = merged_chunks(shape[other], stored[other], 1)
    return tuple(out)


def xarray_matrix(
    obj: xr.Dataset | xr.DataArray, options: ReadOptions, where: str = "in-memory xarray object"
) -> tuple[xr.DataArray, np.ndarray | None, list[str] | None]:
    """The matrix of an in-memory xarray object with dims ``(sample, feature)``, and its label.

    The rules of a foreign store (module docstring) hold: the variable by ``variable``, else
    ``X``, else the only 2-D one; dims by name (``sample_dim``/``feature_dim``, or dims named
    ``sample``/``feature``), never by position; the label by ``label``, else a 1-D variable
    along the sample dim named as in :data:`LABEL_NAMES`.

    Returns
    -------
    (X, y, class_names)
        X a DataArray (sample, feature), lazy if it was; y integer codes or numbers (None
        when unlabelled); the class names of text labels.  Memory: no copy of X.
    """
    if isinstance(obj, xr.DataArray):
        if options.variable is not None:
            raise InputError(f"{where}: a DataArray has one matrix; variable= does not apply")
        ds, name = obj.to_dataset(name=obj.name or "X"), obj.name or "X"
    else:
        ds, name = obj, _xarray_variable(obj, options.variable, where)
    arr = ds[name]
    if arr.ndim != 2:
        raise InputError(f"{where}: variable {name!r} has dims {arr.dims}; fsdask needs 2-D")
    check_numeric(arr.dtype, where, name)
    dims = tuple(str(d) for d in arr.dims)
    sdim, fdim = map_dims(dims, options.sample_dim, options.feature_dim, where)
    X = arr.transpose(sdim, fdim).rename({sdim: "sample", fdim: "feature"})
    lname = options.label.removeprefix("obs:") if options.label else None
    if lname is None:
        lname = next(
            (k for k in LABEL_NAMES if k in ds and k != name and ds[k].dims == (sdim,)), None
        )
    if lname is None:
        return X, None, None
    if lname not in ds or ds[lname].dims != (sdim,):
        raise InputError(f"{where}: no label {lname!r} along the sample dim {sdim!r}; check label=")
    y, classes = encode_labels(np.asarray(ds[lname].values), where, lname)
    return X, y, classes


def _xarray_variable(ds: xr.Dataset, variable: str | None, where: str) -> str:
    if variable is not None:
        if variable not in ds.data_vars:
            raise InputError(
                f"{where}: no variable {variable!r} (found {sorted(ds.data_vars)}); check variable="
            )
        return variable
    if "X" in ds.data_vars:
        return "X"
    two = sorted(str(k) for k, v in ds.data_vars.items() if v.ndim == 2)
    if len(two) != 1:
        raise InputError(
            f"{where}: {'several' if two else 'no'} 2-D variables ({', '.join(two) or 'none'}) "
            "and none named X; choose one with variable="
        )
    return two[0]
