"""Turn user data into fsdask Zarr datasets, streaming where the source allows.

Sources: ``.npz`` in the layout of ``shared/data`` (keys ``X``, ``y``, ``feature_names``,
``sample_names``, ``class_names``), CSV/TSV (samples as rows or features as rows; features
as rows stream in batches, so 10⁶ feature rows never sit in memory), MATLAB ``.mat``,
AnnData ``.h5ad`` and in-memory numpy / dask / xarray objects.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr

from fsdask._blocks import compute_blocks
from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size
from fsdask.errors import InputError
from fsdask.io.store import write_dataset

log = logging.getLogger("fsdask")

NanPolicy = Literal["error", "zero", "mean", "drop-feature"]
NAN_POLICIES = ("error", "zero", "mean", "drop-feature")


def lazy_from_blocks(
    block_fn: Callable[[int, int], np.ndarray],
    n_samples: int,
    n_features: int,
    block: int,
    dtype: Any = np.float32,
) -> da.Array:
    """A lazy (sample, feature) dask array whose block ``[j0, j1)`` is ``block_fn(j0, j1)``.

    Nothing is computed until the array is used; writing it with
    :func:`fsdask.write_dataset` streams block by block (this is how the synthetic
    generators write 10⁶+ features without holding them).
    """
    starts = list(range(0, n_features, block))
    blocks = [
        da.from_delayed(
            dask.delayed(block_fn)(j0, min(j0 + block, n_features)),
            shape=(n_samples, min(j0 + block, n_features) - j0),
            dtype=dtype,
        )
        for j0 in starts
    ]
    return da.concatenate(blocks, axis=1)


def apply_nan_policy(
    X: da.Array, policy: NanPolicy, feature_names: np.ndarray | None = None, where: str = "X"
) -> tuple[da.Array, np.ndarray | None, dict]:
    """Check X for NaN/Inf and apply ``policy``; return X, the kept feature names and a report.

    ``error`` raises naming how many values and which features; ``zero`` / ``mean`` impute
    per feature (a blockwise map: every block holds all samples); ``drop-feature`` removes
    features with any non-finite value.
    """
    if policy not in NAN_POLICIES:
        raise InputError(f"nan_policy={policy!r}; choose one of {', '.join(NAN_POLICIES)}")
    (bad,) = compute_blocks((~da.isfinite(X)).sum(axis=0))  # p counts: joined on the client
    total = int(bad.sum())
    report = {"nonfinite_values": total, "nan_policy": policy}
    if total == 0:
        return X, feature_names, report
    idx = np.flatnonzero(bad)
    shown = ", ".join(
        str(feature_names[i]) if feature_names is not None else f"#{i}" for i in idx[:5]
    )
    if policy == "error":
        raise InputError(
            f"{where}: {total} NaN/Inf value(s) in {idx.size} feature(s) (first: {shown}); "
            "choose a policy: --nan-policy zero|mean|drop-feature"
        )
    if policy == "zero":
        X = X.map_blocks(lambda b: np.where(np.isfinite(b), b, 0).astype(b.dtype), dtype=X.dtype)
    elif policy == "mean":

        def impute(b):
            ok = np.isfinite(b)
            cnt = ok.sum(0)
            mean = np.where(ok, b, 0).sum(0) / np.maximum(cnt, 1)
            return np.where(ok, b, mean[None, :]).astype(b.dtype)

        (n_obs,) = compute_blocks(da.isfinite(X).sum(axis=0))
        empty = np.flatnonzero(n_obs == 0)
        if empty.size:
            names = ", ".join(
                str(feature_names[i]) if feature_names is not None else f"#{i}" for i in empty[:5]
            )
            raise InputError(
                f"{where}: {empty.size} feature(s) have no finite value at all (first: {names}); "
                "a mean cannot be imputed for them — use --nan-policy drop-feature"
            )
        X = X.map_blocks(impute, dtype=X.dtype)
    else:
        keep = bad == 0
        if not keep.any():
            raise InputError(
                f"{where}: every feature has a NaN/Inf value; nothing would be left to select from"
            )
        X = X[:, keep]
        feature_names = None if feature_names is None else np.asarray(feature_names)[keep]
        report["dropped_features"] = int(idx.size)
    report["affected_features"] = int(idx.size)
    return X, feature_names, report


def _build_dataset(
    X: da.Array,
    y: Any = None,
    feature_names: Any = None,
    sample_names: Any = None,
    class_names: Any = None,
    extra_attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    n, p = X.shape
    coords = {
        "sample": np.asarray(sample_names).astype(str).astype(object)
        if sample_names is not None
        else np.arange(n),
        "feature": np.asarray(feature_names).astype(str).astype(object)
        if feature_names is not None
        else np.arange(p),
    }
    if len(coords["feature"]) != p:
        raise InputError(
            f"feature_names has {len(coords['feature'])} entries but X has {p} features"
        )
    if len(coords["sample"]) != n:
        raise InputError(f"sample_names has {len(coords['sample'])} entries but X has {n} samples")
    ds = xr.Dataset({"X": (("sample", "feature"), X)}, coords=coords)
    if y is not None:
        y = np.asarray(y)
        if y.shape[0] != n:
            raise InputError(f"y has {y.shape[0]} entries but X has {n} samples")
        if y.dtype.kind in "OUS":
            classes, codes = np.unique(y.astype(str), return_inverse=True)
            y, class_names = codes.astype(np.int64), classes
        if y.ndim == 1:
            ds["y"] = ("sample", y)
        else:
            ds["Y"] = (("sample", "target"), y)
    if class_names is not None:
        ds.attrs["class_names"] = [str(c) for c in np.asarray(class_names).ravel()]
    ds.attrs.update(extra_attrs or {})
    return ds


def _read_npz(path: Path) -> dict:
    import zipfile

    try:
        return _read_npz_arrays(path)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, InputError):
            raise
        msg = " ".join(str(exc).split())
        raise InputError(
            f"{path}: not a readable .npz of numeric arrays ({type(exc).__name__}: {msg}); "
            "save it with numpy.savez (no object arrays / pickles)"
        ) from None


def _read_npz_arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as d:
        keys = set(d.files)
        if "X" not in keys:
            raise InputError(
                f"{path}: no array 'X' in the .npz (found {sorted(keys)}); "
                "expected the layout of shared/data/README.md"
            )
        out = {"X": d["X"], "y": d["y"] if "y" in keys else None}
        for k in ("feature_names", "sample_names", "class_names"):
            out[k] = d[k] if k in keys else None
        task = str(d["task"]) if "task" in keys else None
    if task == "unlabeled" or (out["y"] is not None and np.all(out["y"] == -1)):
        out["y"] = None
    return out


def _read_mat(path: Path, x_key: str | None, y_key: str | None) -> dict:
    import scipy.io

    try:
        d = scipy.io.loadmat(path)
    except NotImplementedError:  # MATLAB v7.3 = HDF5
        try:
            import h5py
        except ImportError as exc:
            raise InputError(
                f"{path}: a MATLAB v7.3 file needs h5py: pip install 'fsdask[mat]'"
            ) from exc
        # HDF5 stores MATLAB's column-major arrays transposed: .T restores (sample, feature)
        with h5py.File(path, "r") as f:
            d = {
                k: np.asarray(f[k]).T
                for k in f.keys()
                if isinstance(f[k], h5py.Dataset) and f[k].dtype.kind in "fiub"
            }
    except Exception as exc:
        raise InputError(
            f"{path}: not a readable MATLAB .mat file ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    arrays = {k: v for k, v in d.items() if not k.startswith("__")}
    xk = x_key or next((k for k in ("X", "x", "data") if k in arrays), None)
    if xk is None:
        raise InputError(
            f"{path}: no 'X' variable in the .mat file (found {sorted(arrays)}); name it with --x-key"
        )
    if xk not in arrays:
        raise InputError(
            f"{path}: no 'X' variable named {xk!r} in the .mat file (found {sorted(arrays)}); "
            "name the data variable with --x-key"
        )
    yk = y_key or next((k for k in ("Y", "y", "labels", "gnd") if k in arrays), None)
    if yk is not None and yk not in arrays:
        raise InputError(
            f"{path}: no label variable {yk!r} in the .mat file (found {sorted(arrays)})"
        )
    X = arrays[xk]
    if hasattr(X, "toarray"):
        X = X.toarray()
    y = None if yk is None else np.asarray(arrays[yk]).ravel()
    return {
        "X": np.asarray(X),
        "y": y,
        "feature_names": None,
        "sample_names": None,
        "class_names": None,
    }


@contextlib.contextmanager
def _csv_errors(path: Path, sep: str):
    """Turn pandas' parse and decode failures into one-line InputErrors."""
    import pandas as pd

    try:
        yield
    except pd.errors.ParserError as exc:
        raise InputError(
            f"{path}: malformed CSV ({' '.join(str(exc).split())}); check the separator "
            "(--sep) and that every row has as many fields as the header"
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not a text CSV file (byte {exc.start} is not UTF-8); give a .csv/.tsv "
            "text file, or the right extension for a binary format"
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: no columns to read; the file is empty or not a CSV") from None


def _guess_orient(path: Path, sep: str, label: str | None) -> str:
    import pandas as pd

    head = pd.read_csv(path, sep=sep, nrows=200, index_col=0)
    if label is not None:
        if label in head.columns:
            return "samples"
        if label in head.index:
            return "features"
        # the label row may lie beyond the first 200 rows of a features-as-rows file
        ids = pd.read_csv(path, sep=sep, usecols=[0]).iloc[:, 0].astype(str)
        if label in set(ids):
            return "features"
        raise InputError(
            f"{path}: --label {label!r} names neither a column (columns start "
            f"{[str(c) for c in head.columns[:6]]}) nor a row (rows start {list(ids[:4])}); "
            "check the spelling"
        )
    return "samples" if head.shape[1] >= head.shape[0] else "features"


def _is_missing(y: np.ndarray) -> np.ndarray:
    """Mask of missing labels: NaN, None, or an empty / blank string."""
    import pandas as pd

    y = np.asarray(y)
    miss = np.asarray(pd.isna(y), dtype=bool)
    if y.dtype.kind in "OUST":
        miss |= np.array([isinstance(v, str) and not v.strip() for v in y.ravel()]).reshape(y.shape)
    return miss if miss.ndim == 1 else miss.any(axis=tuple(range(1, miss.ndim)))


def _missing_labels(X: Any, y: Any, sample_names: Any, drop: bool, where: str):
    """Refuse (or drop, with ``drop``) samples without a label; return X, y, sample names, count."""
    if y is None:
        return X, None, sample_names, 0
    y = np.asarray(y)
    miss = _is_missing(y)
    if not miss.any():
        return X, _integral_labels(y), sample_names, 0
    idx = np.flatnonzero(miss)
    if not drop:
        names = [str(sample_names[i]) if sample_names is not None else f"#{i}" for i in idx[:5]]
        raise InputError(
            f"{where}: {idx.size} sample(s) have no label (NaN, None or an empty cell; first: "
            f"{', '.join(names)}); fill them in, or drop those samples with --drop-unlabelled"
        )
    keep = ~miss
    if not keep.any():
        raise InputError(f"{where}: no sample has a label; nothing would be left")
    X = X[keep] if not isinstance(X, da.Array) else X[np.flatnonzero(keep)]
    sample_names = None if sample_names is None else np.asarray(sample_names)[keep]
    return X, _integral_labels(y[keep]), sample_names, int(idx.size)


def _integral_labels(y: np.ndarray) -> np.ndarray:
    """Float labels that are all whole numbers (a CSV column that had an empty cell) → int64."""
    if y.dtype.kind == "f" and y.size and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    if y.dtype == object and all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in y.ravel()
    ):
        return _integral_labels(y.astype(np.float64))
    return y


def _sniff_sep(path: Path, sep: str | None) -> str:
    if sep:
        return sep
    return "\t" if path.suffix.lower() in (".tsv", ".tab") or ".tsv" in path.name.lower() else ","


def _csv_samples_as_rows(path: Path, label: str | None, sep: str) -> dict:
    """A row per sample: optional first column of sample ids, a label column, numeric features."""
    import pandas as pd

    df = pd.read_csv(path, sep=sep)
    if df.shape[0] == 0:
        raise InputError(f"{path}: no data rows; the file is empty apart from its header")
    y = None
    if label is not None:
        if label not in df.columns:
            raise InputError(
                f"{path}: no column {label!r} for the labels (columns start {list(df.columns[:8])}); "
                "for a file with a row per feature use --orient features"
            )
        y = df.pop(label).to_numpy()
    sample_names = None
    first = df.columns[0] if df.shape[1] else None
    if (
        first is not None
        and df.shape[1] > 1
        and not np.issubdtype(df[first].dtype, np.number)
        and not df[first].is_unique
        and pd.to_numeric(df[first], errors="coerce").isna().all()
    ):
        dup = df[first][df[first].duplicated()].iloc[0]
        raise InputError(
            f"{path}: duplicate sample id {dup!r} in the first column ({int(df[first].duplicated().sum())} "
            "repeat(s)); every sample needs its own id"
        )
    if (
        first is not None
        and (not np.issubdtype(df[first].dtype, np.number) or str(first).startswith("Unnamed"))
        and df[first].is_unique
        and df.shape[1] > 1
    ):
        sample_names = df.pop(first).to_numpy()
    nonnum = [c for c in df.columns if not np.issubdtype(df[c].dtype, np.number)]
    if nonnum:
        col = nonnum[0]
        bad = df[col][pd.to_numeric(df[col], errors="coerce").isna() & df[col].notna()]
        example = f"; e.g. row {bad.index[0] + 2}: {bad.iloc[0]!r}" if len(bad) else ""
        raise InputError(
            f"{path}: {len(nonnum)} non-numeric column(s) (first: {[str(c) for c in nonnum[:5]]}"
            f"{example}); name the label column with --label, or drop/encode them"
        )
    if df.shape[1] == 0:
        raise InputError(f"{path}: no feature columns")
    return {
        "X": df.to_numpy(dtype=np.float64),
        "y": y,
        "feature_names": np.asarray(df.columns).astype(str),
        "sample_names": sample_names,
        "class_names": None,
    }


def _csv_features_as_rows_stream(
    path: Path,
    url: str,
    *,
    sep: str,
    label_row: str | None,
    batch: int,
    nan_policy: NanPolicy,
    storage_options,
    overwrite: bool,
    chunk_bytes: int,
    attrs: dict,
    dtype: Any = np.float32,
    drop_unlabelled: bool = False,
) -> str:
    """Stream a features-as-rows CSV (first column: feature id; header: sample ids).

    The file is read ``batch`` rows at a time; rows are buffered until they fill one Zarr
    chunk (all samples × ``block`` features), which is then appended to the store, so
    memory holds one chunk buffer plus one batch whatever the number of rows.
    The optional label row (``label_row``) may appear anywhere.
    """
    import hashlib

    import pandas as pd

    from fsdask.io.store import (
        FORMAT_ATTR,
        FORMAT_VERSION,
        _provenance,
        _zarr_kwargs,
        atomic_store,
        checksum_encoding,
        combine_digests,
        mark_complete,
    )

    header = pd.read_csv(path, sep=sep, nrows=0, index_col=0)
    sample_names = np.asarray(header.columns).astype(str)
    n = sample_names.size
    if n == 0:
        raise InputError(
            f"{path}: no sample columns in the header; a features-as-rows file has a header "
            "'feature_id,sample1,sample2,…' and a row per feature"
        )
    dtype = np.dtype(dtype)
    block = feature_block_size(n, dtype.itemsize, chunk_bytes)
    kwargs = _zarr_kwargs(url, storage_options)
    state = {"written": 0, "y": None}
    buf = np.empty((n, block), dtype=dtype)  # one Zarr chunk, filled batch by batch
    buf_names = np.empty(block, dtype=object)
    state["filled"] = 0
    digests: list[np.ndarray] = []
    report = {"nonfinite_values": 0, "nan_policy": nan_policy, "dropped_features": 0}

    def write_chunk(target: str, xb: np.ndarray, nb: np.ndarray) -> None:
        if state["written"] == 0:  # xarray lays out the store (dimension names, coordinates)
            ds = xr.Dataset(
                {"X": (("sample", "feature"), xb)},
                coords={"feature": nb, "sample": sample_names.astype(object)},
                attrs={FORMAT_ATTR: FORMAT_VERSION},
            )  # recognisable as fsdask's while written
            ds.to_zarr(
                target,
                mode="w",
                zarr_format=3,
                consolidated=False,
                encoding=checksum_encoding(ds.variables, {"X": {"chunks": (n, block)}}),
                **kwargs,
            )
            state["group"] = zarr.open_group(target, mode="r+", zarr_format=3, **kwargs)
        else:  # then grow X and the feature ids in place: nothing already written is read back
            _append_columns(state["group"], state["written"], xb, nb)
        digests.append(
            np.frombuffer(
                hashlib.blake2b(np.ascontiguousarray(xb).tobytes(), digest_size=16).digest(),
                dtype=np.uint8,
            )
        )
        state["written"] += xb.shape[1]

    def add(target: str, xb: np.ndarray, fn: np.ndarray) -> None:
        """Copy a batch (samples × rows) into the chunk buffer, writing each chunk as it fills."""
        s = 0
        while s < xb.shape[1]:
            f = state["filled"]
            take = min(block - f, xb.shape[1] - s)
            buf[:, f : f + take] = xb[:, s : s + take]
            buf_names[f : f + take] = fn[s : s + take]
            state["filled"] = f + take
            s += take
            if state["filled"] == block:
                write_chunk(target, buf, buf_names)
                state["filled"] = 0

    with atomic_store(url, storage_options, overwrite=overwrite, inputs=(str(path),)) as target:
        try:
            reader = pd.read_csv(path, sep=sep, index_col=0, chunksize=batch)
            for chunk in reader:
                if label_row is not None and label_row in chunk.index:
                    state["y"] = chunk.loc[label_row].to_numpy()
                    chunk = chunk.drop(index=label_row)
                if chunk.shape[0] == 0:
                    continue
                nonnum = [c for c in chunk.columns if not np.issubdtype(chunk[c].dtype, np.number)]
                if (
                    nonnum
                ):  # a text label row read in the same batch makes columns text: convert back
                    conv = chunk[nonnum].apply(pd.to_numeric, errors="coerce")
                    still = [c for c in nonnum if (conv[c].isna() & chunk[c].notna()).any()]
                    if not still:
                        chunk = (
                            chunk.assign(**{str(c): conv[c] for c in nonnum})
                            if all(isinstance(c, str) for c in nonnum)
                            else chunk.astype({c: float for c in nonnum})
                        )
                    nonnum = still
                if nonnum:
                    col = chunk[nonnum[0]]
                    bad = col[pd.to_numeric(col, errors="coerce").isna() & col.notna()]
                    where = (
                        f"feature {bad.index[0]!r}: {bad.iloc[0]!r}"
                        if len(bad)
                        else f"near feature {chunk.index[0]!r}"
                    )
                    hint = (
                        " (is it the label row? name it with --label)" if label_row is None else ""
                    )
                    raise InputError(
                        f"{path}: non-numeric value in sample column {str(nonnum[0])!r} at {where}"
                        f"{hint}; a features-as-rows CSV must be numeric apart from the label row"
                    )
                xb = chunk.to_numpy(dtype=dtype).T
                fn = np.asarray(chunk.index).astype(str)
                if not np.isfinite(xb).all():
                    xd, fn, rep = apply_nan_policy(
                        da.from_array(xb, chunks=xb.shape),
                        nan_policy,
                        fn,
                        where=f"{path} (rows near feature {chunk.index[0]!r})",
                    )
                    report["nonfinite_values"] += rep["nonfinite_values"]
                    report["dropped_features"] += rep.get("dropped_features", 0)
                    xb = np.asarray(xd.compute())
                add(target, xb, fn)
            if state["filled"]:
                write_chunk(target, buf[:, : state["filled"]], buf_names[: state["filled"]])
        except pd.errors.ParserError as exc:
            raise InputError(
                f"{path}: malformed CSV ({str(exc).splitlines()[0]}); check the separator "
                "(--sep) and that every row has as many fields as the header"
            ) from None
        written = state["written"]
        if written == 0:
            raise InputError(f"{path}: no feature rows; the file is empty apart from its header")
        extra = {}
        if state["y"] is not None and _is_missing(state["y"]).any():
            miss = np.flatnonzero(_is_missing(state["y"]))
            what = (
                "--drop-unlabelled is not available for a features-as-rows file (it is streamed); "
                if drop_unlabelled
                else ""
            )
            raise InputError(
                f"{path}: {miss.size} sample(s) have no label in row {label_row!r} (first: "
                f"{', '.join(sample_names[miss[:5]])}); {what}fill them in or remove those columns"
            )
        if state["y"] is not None:
            state["y"] = _integral_labels(state["y"])
            yds = _build_dataset(da.zeros((n, 1), chunks=(n, 1)), state["y"])
            extra = {k: v for k, v in yds.attrs.items()}
            xr.Dataset({"y": ("sample", yds["y"].values)}).to_zarr(
                target,
                mode="a",
                zarr_format=3,
                consolidated=False,
                encoding=checksum_encoding(["y"]),
                **kwargs,
            )
        fingerprint = combine_digests(np.stack(digests), (n, written), dtype)
        X_meta = da.zeros((n, written), dtype=dtype, chunks=(n, block))
        final = _provenance(str(path), X_meta, {**attrs, **extra, **report})
        final.update(
            {
                "fingerprint": fingerprint,
                "chunk_features": int(block),
                "block_digests": np.stack(digests).tobytes().hex(),
            }
        )
        mark_complete(target, kwargs, final)
    return fingerprint


def _append_columns(group: zarr.Group, start: int, xb: np.ndarray, names: np.ndarray) -> None:
    """Write ``xb`` (samples × w) and its feature ids at feature offset ``start``.

    ``xarray.Dataset.to_zarr(append_dim=…)`` would re-read the whole growing feature
    coordinate on every append (O(p²) time, O(p) memory); resizing the two arrays does not.
    """
    stop = start + xb.shape[1]
    X, F = group["X"], group["feature"]
    X.resize((xb.shape[0], stop))
    X[:, start:stop] = xb
    F.resize((stop,))
    F[start:stop] = names


def ingest(
    source: Any,
    url: str | os.PathLike,
    *,
    y: Any = None,
    feature_names: Any = None,
    sample_names: Any = None,
    label: str | None = None,
    orient: Literal["auto", "samples", "features"] = "auto",
    sep: str | None = None,
    nan_policy: NanPolicy = "error",
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    dtype: Any = np.float32,
    x_key: str | None = None,
    y_key: str | None = None,
    batch: int = 10_000,
    drop_unlabelled: bool = False,
    variable: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    rechunk_to: str | None = None,
    memory_budget: Any = None,
) -> str:
    """Convert ``source`` to an fsdask Zarr dataset at ``url``; return its fingerprint.

    Parameters
    ----------
    source
        Path to ``.npz`` / ``.csv`` / ``.tsv`` / ``.mat`` / ``.h5ad``, or an in-memory numpy /
        dask array (sample × feature), an ``xarray.DataArray`` with dims (sample, feature) or
        an ``xarray.Dataset`` with ``X``.
    url
        Destination (local path or fsspec URL).
    y, feature_names, sample_names
        For in-memory sources.  String labels are encoded as codes with ``class_names``.
    label
        CSV: the column (samples as rows) or row (features as rows) holding the labels;
        ``.h5ad``/AnnData/Zarr stores: the label variable or ``obs`` column.
    variable, sample_dim, feature_dim, rechunk_to, memory_budget
        For a Zarr store (any writer), an ``.h5ad`` file, an AnnData-on-Zarr store or an
        in-memory ``AnnData``: read with :func:`fsdask.open_dataset` (block by block) and
        copied to the canonical layout — e.g. to fix a store's chunking once for many runs.
    orient
        CSV orientation: ``samples`` (a row per sample), ``features`` (a row per feature,
        streamed in ``batch`` rows), or ``auto`` (more columns than rows → samples as rows).
    nan_policy
        ``error`` (default), ``zero``, ``mean`` (per-feature mean) or ``drop-feature``.
    drop_unlabelled
        Drop samples whose label is missing (NaN, None, empty) instead of refusing the input.
    overwrite
        Replace an existing fsdask dataset at ``url`` (nothing else is ever replaced); the
        old one stays whole until the new one is complete.
    """
    url = os.fspath(url)
    attrs: dict = {}
    from fsdask.io.outputs import check_output
    from fsdask.io.store import check_reachable

    check_reachable(url, storage_options)
    inputs = (os.fspath(source),) if isinstance(source, (str, os.PathLike)) else ()
    # before anything is read: the target must be free, or an fsdask dataset to replace
    check_output(url, storage_options, kind="dataset", overwrite=overwrite, inputs=inputs)
    if _readable_store(source):
        from fsdask.io.store import open_dataset

        ds = open_dataset(
            source,
            storage_options,
            variable=variable,
            sample_dim=sample_dim,
            feature_dim=feature_dim,
            label=label,
            rechunk_to=rechunk_to,
            memory_budget=memory_budget,
            nan_policy=nan_policy,
            chunk_bytes=chunk_bytes,
            drop_unlabelled=drop_unlabelled,
        )
        return _ingest_dataset(
            ds,
            url,
            storage_options=storage_options,
            nan_policy=nan_policy,
            overwrite=overwrite,
            chunk_bytes=chunk_bytes,
            dtype=dtype,
            inputs=inputs,
        )
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise InputError(f"{path}: no such file; give a .npz, .csv/.tsv, .mat or .h5ad file")
        if path.stat().st_size == 0:
            raise InputError(f"{path}: the file is empty")
        suffix = (
            "".join(path.suffixes[-2:]).lower() if path.suffix == ".gz" else path.suffix.lower()
        )
        attrs["source_file"] = path.name
        if suffix == ".npz":
            d = _read_npz(path)
        elif suffix == ".mat":
            d = _read_mat(path, x_key, y_key)
        elif suffix in (".csv", ".tsv", ".txt", ".tab", ".csv.gz", ".tsv.gz"):
            s = _sniff_sep(path, sep)
            with _csv_errors(path, s):
                if orient == "auto":
                    orient = _guess_orient(path, s, label)
                if orient == "features":
                    return _csv_features_as_rows_stream(
                        path,
                        url,
                        sep=s,
                        label_row=label,
                        batch=batch,
                        nan_policy=nan_policy,
                        storage_options=storage_options,
                        overwrite=overwrite,
                        chunk_bytes=chunk_bytes,
                        attrs=attrs,
                        dtype=dtype,
                        drop_unlabelled=drop_unlabelled,
                    )
                d = _csv_samples_as_rows(path, label, s)
        else:
            raise InputError(
                f"{path}: unknown file type {suffix!r}; fsdask ingests .npz, .csv, .tsv, .mat, "
                ".h5ad files and Zarr stores (.zarr, any writer)"
            )
        source_desc = str(path)
    else:
        source_desc = f"in-memory {type(source).__name__}"
        if isinstance(source, xr.Dataset):
            if "X" not in source:
                raise InputError("the Dataset has no variable 'X'")
            y = source["y"].values if y is None and "y" in source else y
            Xa = source["X"].transpose("sample", "feature")
            feature_names = (
                Xa["feature"].values
                if feature_names is None and "feature" in Xa.coords
                else feature_names
            )
            sample_names = (
                Xa["sample"].values
                if sample_names is None and "sample" in Xa.coords
                else sample_names
            )
            source = Xa.data
        elif isinstance(source, xr.DataArray):
            Xa = (
                source.transpose("sample", "feature")
                if set(source.dims) == {"sample", "feature"}
                else source
            )
            feature_names = (
                Xa["feature"].values
                if feature_names is None and "feature" in Xa.coords
                else feature_names
            )
            sample_names = (
                Xa["sample"].values
                if sample_names is None and "sample" in Xa.coords
                else sample_names
            )
            source = Xa.data
        d = {
            "X": source,
            "y": y,
            "feature_names": feature_names,
            "sample_names": sample_names,
            "class_names": None,
        }
    X = d["X"]
    if not isinstance(X, da.Array):
        X = np.asarray(X)
        if X.dtype == object or not np.issubdtype(X.dtype, np.number):
            raise InputError(f"{source_desc}: X is not numeric (dtype {X.dtype})")
    if X.ndim != 2:
        raise InputError(f"{source_desc}: X must be 2-D (samples × features); got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"{source_desc}: X is empty (shape {X.shape})")
    n = X.shape[0]
    block = feature_block_size(n, np.dtype(dtype).itemsize, chunk_bytes)
    if not isinstance(X, da.Array):
        X = da.from_array(X, chunks=(n, block))
    X = X.astype(dtype).rechunk({0: -1})
    X, y, snames, dropped = _missing_labels(
        X, d.get("y"), d.get("sample_names"), drop_unlabelled, source_desc
    )
    if dropped:
        attrs["dropped_unlabelled_samples"] = dropped
        log.warning(
            "%s: dropped %d sample(s) without a label (--drop-unlabelled)", source_desc, dropped
        )
    X, fnames, report = apply_nan_policy(X, nan_policy, d.get("feature_names"), where=source_desc)
    attrs.update(report)
    ds = _build_dataset(X, y, fnames, snames, d.get("class_names"))
    return write_dataset(
        ds,
        url,
        storage_options=storage_options,
        chunk_bytes=chunk_bytes,
        overwrite=overwrite,
        source=source_desc,
        attrs={**ds.attrs, **attrs},
        inputs=inputs,
    )


def _readable_store(source: Any) -> bool:
    """Whether ``source`` is read through :func:`fsdask.open_dataset`: a Zarr store (local folder or
    URL), an ``.h5ad`` file or an in-memory ``AnnData``."""
    if type(source).__name__ == "AnnData":
        return True
    if not isinstance(source, (str, os.PathLike)):
        return False
    s = os.fspath(source)
    if "://" in s and not s.startswith("file://"):
        return True
    s = s.removeprefix("file://")
    return os.path.isdir(s) or s.rstrip("/").lower().endswith((".zarr", ".h5ad"))


def _ingest_dataset(
    ds: xr.Dataset,
    url: str,
    *,
    storage_options,
    nan_policy: NanPolicy,
    overwrite: bool,
    chunk_bytes: int,
    dtype: Any,
    inputs: tuple = (),
) -> str:
    """Copy an opened dataset (already in feature blocks) to the canonical fsdask layout."""
    where = ds.attrs.get("store") or ds.attrs.get("source") or "dataset"
    X = ds["X"].data.astype(dtype)
    X, fnames, report = apply_nan_policy(X, nan_policy, ds["feature"].values, where=where)
    y = ds["y"].values if "y" in ds else None
    out = _build_dataset(X, y, fnames, ds["sample"].values, ds.attrs.get("class_names"))
    attrs = {**out.attrs, **report, "source_file": str(where)}
    if "dropped_unlabelled_samples" in ds.attrs:  # --drop-unlabelled on the way in
        attrs["dropped_unlabelled_samples"] = ds.attrs["dropped_unlabelled_samples"]
    return write_dataset(
        out,
        url,
        storage_options=storage_options,
        chunk_bytes=chunk_bytes,
        overwrite=overwrite,
        source=str(where),
        attrs=attrs,
        inputs=inputs,
    )
