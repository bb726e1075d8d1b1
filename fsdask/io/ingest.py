"""Turn user data into fsdask Zarr datasets, streaming where the source allows.

Sources: ``.npz`` in the layout of ``shared/data`` (keys ``X``, ``y``, ``feature_names``,
``sample_names``, ``class_names``), CSV/TSV (samples as rows or features as rows; features
as rows stream in batches, so 10⁶ feature rows never sit in memory), MATLAB ``.mat``,
AnnData ``.h5ad`` and in-memory numpy / dask / xarray objects.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import dask
import dask.array as da
import numpy as np
import xarray as xr

from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size
from fsdask.errors import InputError, StoreError
from fsdask.io.store import write_dataset

NanPolicy = Literal["error", "zero", "mean", "drop-feature"]
NAN_POLICIES = ("error", "zero", "mean", "drop-feature")


def lazy_from_blocks(block_fn: Callable[[int, int], np.ndarray], n_samples: int, n_features: int,
                     block: int, dtype: Any = np.float32) -> da.Array:
    """A lazy (sample, feature) dask array whose block ``[j0, j1)`` is ``block_fn(j0, j1)``.

    Nothing is computed until the array is used; writing it with
    :func:`fsdask.write_dataset` streams block by block (this is how the synthetic
    generators write 10⁶+ features without holding them).
    """
    starts = list(range(0, n_features, block))
    blocks = [da.from_delayed(dask.delayed(block_fn)(j0, min(j0 + block, n_features)),
                              shape=(n_samples, min(j0 + block, n_features) - j0), dtype=dtype)
              for j0 in starts]
    return da.concatenate(blocks, axis=1)


def apply_nan_policy(X: da.Array, policy: NanPolicy, feature_names: np.ndarray | None = None,
                     where: str = "X") -> tuple[da.Array, np.ndarray | None, dict]:
    """Check X for NaN/Inf and apply ``policy``; return X, the kept feature names and a report.

    ``error`` raises naming how many values and which features; ``zero`` / ``mean`` impute
    per feature (a blockwise map: every block holds all samples); ``drop-feature`` removes
    features with any non-finite value.
    """
    if policy not in NAN_POLICIES:
        raise InputError(f"nan_policy={policy!r}; choose one of {', '.join(NAN_POLICIES)}")
    bad = (~da.isfinite(X)).sum(axis=0).compute()
    total = int(bad.sum())
    report = {"nonfinite_values": total, "nan_policy": policy}
    if total == 0:
        return X, feature_names, report
    idx = np.flatnonzero(bad)
    shown = ", ".join(str(feature_names[i]) if feature_names is not None else f"#{i}" for i in idx[:5])
    if policy == "error":
        raise InputError(f"{where}: {total} NaN/Inf value(s) in {idx.size} feature(s) (first: {shown}); "
                         "choose a policy: --nan-policy zero|mean|drop-feature")
    if policy == "zero":
        X = X.map_blocks(lambda b: np.where(np.isfinite(b), b, 0).astype(b.dtype), dtype=X.dtype)
    elif policy == "mean":
        def impute(b):
            ok = np.isfinite(b)
            cnt = ok.sum(0)
            mean = np.where(ok, b, 0).sum(0) / np.maximum(cnt, 1)
            return np.where(ok, b, mean[None, :]).astype(b.dtype)
        X = X.map_blocks(impute, dtype=X.dtype)
    else:
        keep = bad == 0
        if not keep.any():
            raise InputError(f"{where}: every feature has a NaN/Inf value; nothing would be left to select from")
        X = X[:, keep]
        feature_names = None if feature_names is None else np.asarray(feature_names)[keep]
        report["dropped_features"] = int(idx.size)
    report["affected_features"] = int(idx.size)
    return X, feature_names, report


def _build_dataset(X: da.Array, y: Any = None, feature_names: Any = None, sample_names: Any = None,
                   class_names: Any = None, extra_attrs: Mapping[str, Any] | None = None) -> xr.Dataset:
    n, p = X.shape
    coords = {
        "sample": np.asarray(sample_names).astype(str).astype(object) if sample_names is not None else np.arange(n),
        "feature": np.asarray(feature_names).astype(str).astype(object) if feature_names is not None else np.arange(p),
    }
    if len(coords["feature"]) != p:
        raise InputError(f"feature_names has {len(coords['feature'])} entries but X has {p} features")
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
    with np.load(path, allow_pickle=False) as d:
        keys = set(d.files)
        if "X" not in keys:
            raise InputError(f"{path}: no array 'X' in the .npz (found {sorted(keys)}); "
                             "expected the layout of shared/data/README.md")
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
            raise InputError(f"{path}: a MATLAB v7.3 file needs h5py: pip install 'fsdask[mat]'") from exc
        with h5py.File(path, "r") as f:
            d = {k: np.asarray(f[k]).T for k in f.keys() if isinstance(f[k], h5py.Dataset)}
    arrays = {k: v for k, v in d.items() if not k.startswith("__")}
    xk = x_key or next((k for k in ("X", "x", "data") if k in arrays), None)
    if xk is None:
        raise InputError(f"{path}: no 'X' variable in the .mat file (found {sorted(arrays)}); name it with --x-key")
    yk = y_key or next((k for k in ("Y", "y", "labels", "gnd") if k in arrays), None)
    X = arrays[xk]
    if hasattr(X, "toarray"):
        X = X.toarray()
    y = None if yk is None else np.asarray(arrays[yk]).ravel()
    return {"X": np.asarray(X), "y": y, "feature_names": None, "sample_names": None, "class_names": None}


def _read_h5ad(path: Path, label: str | None) -> dict:
    try:
        import anndata
    except ImportError as exc:
        raise InputError(f"{path}: .h5ad needs anndata: pip install 'fsdask[h5ad]'") from exc
    a = anndata.read_h5ad(path, backed="r")
    X = a.X[:] if not hasattr(a.X, "toarray") else a.X.toarray()
    y = None
    if label is not None:
        if label not in a.obs:
            raise InputError(f"{path}: no obs column {label!r} (found {list(a.obs.columns)})")
        y = np.asarray(a.obs[label])
    return {"X": np.asarray(X), "y": y, "feature_names": np.asarray(a.var_names),
            "sample_names": np.asarray(a.obs_names), "class_names": None}


def _sniff_sep(path: Path, sep: str | None) -> str:
    if sep:
        return sep
    return "\t" if path.suffix.lower() in (".tsv", ".tab") or ".tsv" in path.name.lower() else ","


def _csv_samples_as_rows(path: Path, label: str | None, sep: str, index_col: int | None) -> dict:
    import pandas as pd
    df = pd.read_csv(path, sep=sep, index_col=index_col)
    y = None
    if label is not None:
        if label not in df.columns:
            raise InputError(f"{path}: no column {label!r} for the labels (columns start {list(df.columns[:8])})")
        y = df.pop(label).to_numpy()
    nonnum = [c for c in df.columns if not np.issubdtype(df[c].dtype, np.number)]
    if nonnum:
        raise InputError(f"{path}: {len(nonnum)} non-numeric column(s) (first: {nonnum[:5]}); "
                         "name the label column with --label, or drop/encode them")
    return {"X": df.to_numpy(), "y": y, "feature_names": np.asarray(df.columns),
            "sample_names": np.asarray(df.index) if index_col is not None else None, "class_names": None}


def _csv_features_as_rows_stream(path: Path, url: str, *, sep: str, label_row: str | None, batch: int,
                                 nan_policy: NanPolicy, storage_options, overwrite: bool,
                                 chunk_bytes: int, attrs: dict) -> str:
    """Stream a features-as-rows CSV (first column: feature id; header: sample ids)."""
    import pandas as pd
    import zarr

    from fsdask.io.store import COMPLETE_ATTR, _is_local, _local, _zarr_kwargs, combine_digests, _provenance
    import hashlib

    header = pd.read_csv(path, sep=sep, nrows=0, index_col=0)
    sample_names = np.asarray(header.columns).astype(str)
    n = sample_names.size
    if n == 0:
        raise InputError(f"{path}: no sample columns in the header")
    block = feature_block_size(n, 4, chunk_bytes)
    y = None
    target = _local(url) if _is_local(url) else url
    if _is_local(url) and os.path.exists(target) and not overwrite:
        raise StoreError(f"{url} already exists; pass --overwrite or choose another path")
    kwargs = _zarr_kwargs(url, storage_options)
    pending: list[np.ndarray] = []
    pending_names: list[np.ndarray] = []
    buffered = 0
    written = 0
    digests = []
    names_all: list[np.ndarray] = []

    def flush(final: bool):
        nonlocal pending, pending_names, buffered, written
        while buffered >= block or (final and buffered > 0):
            allx = np.concatenate(pending, axis=1)
            alln = np.concatenate(pending_names)
            take = min(block, allx.shape[1])
            xb, nb = allx[:, :take], alln[:take]
            pending, pending_names = [allx[:, take:]], [alln[take:]]
            buffered = allx.shape[1] - take
            ds = xr.Dataset({"X": (("sample", "feature"), xb)},
                            coords={"feature": nb.astype(object)})
            if written == 0:
                ds = ds.assign_coords(sample=sample_names.astype(object))
                if y is not None:
                    ds["y"] = ("sample", y)
                ds.to_zarr(target, mode="w", zarr_format=3, consolidated=False,
                           encoding={"X": {"chunks": (n, block)}}, **kwargs)
            else:
                ds.to_zarr(target, append_dim="feature", zarr_format=3, consolidated=False, **kwargs)
            digests.append(np.frombuffer(hashlib.blake2b(np.ascontiguousarray(xb).tobytes(),
                                                         digest_size=16).digest(), dtype=np.uint8))
            written += take

    report = {"nonfinite_values": 0, "nan_policy": nan_policy}
    for chunk in pd.read_csv(path, sep=sep, index_col=0, chunksize=batch):
        if label_row is not None and label_row in chunk.index:
            y = chunk.loc[label_row].to_numpy()
            chunk = chunk.drop(index=label_row)
        nonnum = [c for c in chunk.columns if not np.issubdtype(chunk[c].dtype, np.number)]
        if nonnum:
            raise InputError(f"{path}: non-numeric values in sample column(s) {nonnum[:5]} near feature "
                             f"{chunk.index[0]!r}; features-as-rows CSV must be numeric apart from the "
                             "label row (name it with --label)")
        xb = chunk.to_numpy(dtype=np.float32).T
        fn = np.asarray(chunk.index).astype(str)
        xd, fn, rep = apply_nan_policy(da.from_array(xb), nan_policy, fn, where=f"{path}")
        report["nonfinite_values"] += rep["nonfinite_values"]
        xb = np.asarray(xd.compute())
        pending.append(xb)
        pending_names.append(fn)
        buffered += xb.shape[1]
        names_all.append(fn)
        flush(final=False)
    flush(final=True)
    if written == 0:
        raise InputError(f"{path}: no feature rows; the file is empty apart from its header")
    fingerprint = combine_digests(np.stack(digests), (n, written), np.float32)
    group = zarr.open_group(target, mode="r+", zarr_format=3, **kwargs)
    X_meta = da.zeros((n, written), dtype=np.float32, chunks=(n, block))
    final = _provenance(str(path), X_meta, {**attrs, **report})
    final.update({"fingerprint": fingerprint, "chunk_features": int(block), COMPLETE_ATTR: True})
    group.attrs.update(final)
    return fingerprint


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
        ``.h5ad``: the ``obs`` column.
    orient
        CSV orientation: ``samples`` (a row per sample), ``features`` (a row per feature,
        streamed in ``batch`` rows), or ``auto`` (more columns than rows → samples as rows).
    nan_policy
        ``error`` (default), ``zero``, ``mean`` (per-feature mean) or ``drop-feature``.
    """
    url = os.fspath(url)
    attrs: dict = {}
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise InputError(f"{path}: no such file; give a .npz, .csv/.tsv, .mat or .h5ad file")
        if path.stat().st_size == 0:
            raise InputError(f"{path}: the file is empty")
        suffix = "".join(path.suffixes[-2:]).lower() if path.suffix == ".gz" else path.suffix.lower()
        attrs["source_file"] = path.name
        if suffix == ".npz":
            d = _read_npz(path)
        elif suffix == ".mat":
            d = _read_mat(path, x_key, y_key)
        elif suffix == ".h5ad":
            d = _read_h5ad(path, label)
        elif suffix in (".csv", ".tsv", ".txt", ".tab", ".csv.gz", ".tsv.gz"):
            s = _sniff_sep(path, sep)
            if orient == "auto":
                import pandas as pd
                head = pd.read_csv(path, sep=s, nrows=50, index_col=0)
                orient = "samples" if head.shape[1] >= head.shape[0] or label in head.columns else "features"
                if label is not None and label in head.columns:
                    orient = "samples"
            if orient == "features":
                return _csv_features_as_rows_stream(path, url, sep=s, label_row=label, batch=batch,
                                                    nan_policy=nan_policy, storage_options=storage_options,
                                                    overwrite=overwrite, chunk_bytes=chunk_bytes, attrs=attrs)
            d = _csv_samples_as_rows(path, label, s, index_col=None)
        else:
            raise InputError(f"{path}: unknown file type {suffix!r}; fsdask ingests .npz, .csv, .tsv, .mat, .h5ad")
        source_desc = str(path)
    else:
        source_desc = f"in-memory {type(source).__name__}"
        if isinstance(source, xr.Dataset):
            if "X" not in source:
                raise InputError("the Dataset has no variable 'X'")
            y = source["y"].values if y is None and "y" in source else y
            Xa = source["X"].transpose("sample", "feature")
            feature_names = Xa["feature"].values if feature_names is None and "feature" in Xa.coords else feature_names
            sample_names = Xa["sample"].values if sample_names is None and "sample" in Xa.coords else sample_names
            source = Xa.data
        elif isinstance(source, xr.DataArray):
            Xa = source.transpose("sample", "feature") if set(source.dims) == {"sample", "feature"} else source
            feature_names = Xa["feature"].values if feature_names is None and "feature" in Xa.coords else feature_names
            sample_names = Xa["sample"].values if sample_names is None and "sample" in Xa.coords else sample_names
            source = Xa.data
        d = {"X": source, "y": y, "feature_names": feature_names, "sample_names": sample_names, "class_names": None}
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
    X, fnames, report = apply_nan_policy(X, nan_policy, d.get("feature_names"), where=source_desc)
    attrs.update(report)
    ds = _build_dataset(X, d.get("y"), fnames, d.get("sample_names"), d.get("class_names"))
    return write_dataset(ds, url, storage_options=storage_options, chunk_bytes=chunk_bytes,
                         overwrite=overwrite, source=source_desc, attrs={**ds.attrs, **attrs})
