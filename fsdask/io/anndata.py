"""AnnData — ``.h5ad`` files, AnnData-on-Zarr stores and in-memory ``AnnData`` objects — block by block.

The matrix (``X``, a ``layers`` entry or ``raw``) may be dense or sparse (CSR or CSC); it is
read as a dask array of feature blocks, each materialised dense only when its task runs:
the whole matrix is never dense in memory.  A CSC block reads exactly its columns; a CSR
block scans the rows in batches and keeps the entries of its columns (so CSR costs one
scan of the non-zeros per block, and blocks are made larger for it).  ``obs``/``var`` are
read with :func:`anndata.io.read_elem`; ``var_names`` become feature ids, ``obs_names``
sample ids, and ``label`` may name an ``obs`` column (``obs:cell_type``).

:func:`annotate_anndata` writes a result back: ``var["fsdask_selected"]``,
``var["fsdask_weight"]``, ``var["fsdask_rank"]`` and ``uns["fsdask"]`` (provenance), and
nothing else changes.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from typing import Any, Mapping

import numpy as np
import pandas as pd
import xarray as xr

from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size
from fsdask.errors import InputError, StoreError
from fsdask.io.foreign import LABEL_NAMES, check_numeric, encode_labels

SPARSE = ("csr_matrix", "csc_matrix")
#: non-zeros read per batch when scanning a CSR matrix for a column block
CSR_BATCH = 4_000_000


def _read_elem():
    try:
        import anndata
    except ImportError as exc:
        raise InputError("reading AnnData needs anndata: pip install 'fsdask[h5ad]'") from exc
    io = getattr(anndata, "io", None)
    return getattr(io, "read_elem", None) or anndata.experimental.read_elem


def _enc(node: Any) -> str:
    v = node.attrs.get("encoding-type", "")
    return v.decode() if isinstance(v, bytes) else str(v)


def is_anndata_group(group: Any) -> bool:
    return _enc(group) == "anndata"


class MatrixReader:
    """Picklable reader of one AnnData matrix element: ``reader(j0, j1)`` → dense (n, j1 − j0) block.

    The file or store is (re)opened lazily in each process, so the dask graph ships to
    distributed workers; h5py handles are not thread-safe, so reads of one file are serialised.
    """

    def __init__(
        self,
        url: str | None,
        storage_options: Mapping[str, Any] | None,
        path: str,
        kind: str,
        shape: tuple[int, int],
        dtype: np.dtype,
        hdf5: bool,
        obj: Any = None,
    ):
        self.url, self.so, self.path, self.kind = url, dict(storage_options or {}), path, kind
        self.shape, self.dtype, self.hdf5, self.obj = shape, np.dtype(dtype), hdf5, obj
        self._node = None
        self._lock = threading.Lock()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_node", "_lock")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._node, self._lock = None, threading.Lock()

    def __dask_tokenize__(self):
        return (
            type(self).__name__,
            self.url,
            self.path,
            self.kind,
            self.shape,
            str(self.dtype),
            id(self.obj),
        )

    def node(self) -> Any:
        if self._node is None:
            self._node = open_root(self.url, self.so, self.hdf5)[self.path]
        return self._node

    def __call__(self, j0: int, j1: int) -> np.ndarray:
        from fsdask.io.store import safe_url

        try:
            with self._lock:
                out = self._block(j0, j1)
        except (InputError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                f"{safe_url(self.url or 'in-memory AnnData')}: cannot read {self.path} (features "
                f"{j0}–{j1 - 1}): {type(exc).__name__}: {msg}; check the file/storage and "
                "retry"
            ) from None
        return out.astype(self.dtype, copy=False)

    def _block(self, j0: int, j1: int) -> np.ndarray:
        n = self.shape[0]
        if self.obj is not None:  # in memory: numpy or scipy.sparse
            b = self.obj[:, j0:j1]
            return b.toarray() if hasattr(b, "toarray") else np.asarray(b)
        node = self.node()
        if self.kind == "dense":
            return np.asarray(node[:, j0:j1])
        out = np.zeros((n, j1 - j0), dtype=self.dtype)
        indptr = np.asarray(node["indptr"][...]).astype(np.int64)
        if self.kind == "csc_matrix":
            a, b = int(indptr[j0]), int(indptr[j1])
            rows = np.asarray(node["indices"][a:b])
            cols = np.repeat(np.arange(j1 - j0), np.diff(indptr[j0 : j1 + 1]))
            out[rows, cols] = np.asarray(node["data"][a:b])
            return out
        r0 = 0
        while r0 < n:  # CSR: scan rows in batches of about CSR_BATCH non-zeros
            r1 = int(np.searchsorted(indptr, indptr[r0] + CSR_BATCH, side="right")) - 1
            r1 = min(max(r1, r0 + 1), n)
            a, b = int(indptr[r0]), int(indptr[r1])
            idx = np.asarray(node["indices"][a:b])
            keep = (idx >= j0) & (idx < j1)
            if keep.any():
                rows = np.repeat(np.arange(r0, r1), np.diff(indptr[r0 : r1 + 1]))[keep]
                out[rows, idx[keep] - j0] = np.asarray(node["data"][a:b])[keep]
            r0 = r1
        return out

    def nonfinite(self) -> int:
        """Number of NaN/Inf values (a pass over the stored values; sparse: the non-zeros only)."""
        if self.obj is not None:
            data = self.obj.data if hasattr(self.obj, "indptr") else np.asarray(self.obj)
            return int((~np.isfinite(data)).sum())
        node = self.node()
        if self.kind == "dense":
            return -1  # checked by the estimators' streaming pass
        data, total, step = node["data"], 0, CSR_BATCH
        for a in range(0, data.shape[0], step):
            total += int((~np.isfinite(np.asarray(data[a : a + step]))).sum())
        return total


def open_root(url: str, storage_options: Mapping[str, Any] | None, hdf5: bool) -> Any:
    """The root of an AnnData file (h5py) or store (zarr), local or fsspec URL."""
    from fsdask.io.store import _is_local, _local, _zarr_kwargs

    if not hdf5:
        import zarr

        target = _local(url) if _is_local(url) else url
        return zarr.open_group(target, mode="r", **_zarr_kwargs(url, storage_options))
    import h5py

    if _is_local(url):
        return h5py.File(_local(url), "r")
    import fsspec

    return h5py.File(fsspec.open(url, "rb", **dict(storage_options or {})).open(), "r")


def _element(root: Any, variable: str | None, where: str) -> tuple[str, str | None]:
    """(path of the matrix, path of its var frame) for ``variable`` (X, layers/NAME, raw, raw/X)."""
    v = (variable or "X").strip("/")
    if v in ("raw", "raw/X"):
        if "raw" not in root:
            raise InputError(
                f"{where}: the AnnData has no .raw; choose X or a layer with --variable"
            )
        return "raw/X", "raw/var"
    if v.startswith("layers/") or v == "X":
        if v not in root:
            layers = sorted(root["layers"].keys()) if "layers" in root else []
            raise InputError(
                f"{where}: no {v!r} in the AnnData (layers: {layers}); use --variable X, raw "
                "or layers/NAME"
            )
        return v, "var"
    raise InputError(
        f"{where}: --variable {variable!r} is not an AnnData matrix; use X, raw or layers/NAME"
    )


def _frame(root: Any, path: str) -> pd.DataFrame:
    return _read_elem()(root[path])


def _matrix_info(node: Any, where: str, path: str) -> tuple[str, tuple[int, int], np.dtype]:
    enc = _enc(node)
    if enc in SPARSE:
        shape = tuple(int(s) for s in node.attrs["shape"])
        return enc, shape, np.dtype(node["data"].dtype)
    if hasattr(node, "shape") and hasattr(node, "dtype"):
        if len(node.shape) != 2:
            raise InputError(f"{where}: {path} is {len(node.shape)}-D; expected a 2-D matrix")
        return "dense", tuple(int(s) for s in node.shape), np.dtype(node.dtype)
    raise InputError(
        f"{where}: {path} is stored as {enc or 'an unknown encoding'}; fsdask reads dense, "
        "csr_matrix and csc_matrix"
    )


def _block_for(kind: str, n: int, itemsize: int, chunk_bytes: int) -> int:
    """In-memory CSR blocks are 4× wider: each costs a scan of all non-zeros, so fewer blocks = fewer scans."""
    return feature_block_size(n, itemsize, chunk_bytes * (4 if kind == "csr_matrix" else 1))


class BlockedCopy(MatrixReader):
    """Reader of the per-feature-block copy of a CSR matrix made by :func:`csr_to_blocks`.

    Block ``k`` is the parts ``b{k}.{batch}.rows|cols|vals`` (row, column within the block,
    value) under ``url`` — local or any fsspec URL, so workers on other hosts can read it;
    ``parts[k]`` lists the batches that wrote to block ``k``, so a read lists nothing.
    """

    def __init__(self, url, storage_options, shape, dtype, block: int, parts, source: str):
        super().__init__(
            source,
            storage_options,
            "X",
            "csr_matrix (copied per feature block)",
            shape,
            dtype,
            False,
        )
        self.copy_url, self.block, self.parts = url, block, parts

    def __dask_tokenize__(self):
        return (type(self).__name__, self.copy_url, self.shape, self.block)

    def _block(self, j0: int, j1: int) -> np.ndarray:
        import fsspec

        fs, root = fsspec.core.url_to_fs(self.copy_url, **self.so)
        k = j0 // self.block
        out = np.zeros((self.shape[0], j1 - j0), dtype=self.dtype)
        for b in self.parts.get(k, ()):
            f = f"{root}/b{k}.{b}"
            rows = np.frombuffer(fs.cat_file(f + ".rows"), dtype=np.int32)
            cols = np.frombuffer(fs.cat_file(f + ".cols"), dtype=np.int32)
            out[rows, cols] = np.frombuffer(fs.cat_file(f + ".vals"), dtype=self.dtype)
        return out

    def nonfinite(self) -> int:
        return 0  # counted on the source before the copy


def _copy_location(rechunk_to: str | None, storage_options) -> tuple[str, bool]:
    """(URL, is_temporary) of the folder that receives a CSR matrix's per-block copy."""
    from fsdask.io.scratch import scratch_dir
    from fsdask.io.store import _exists, safe_url

    if rechunk_to is None:
        return scratch_dir("csr"), True
    if _exists(os.fspath(rechunk_to), storage_options):
        raise StoreError(
            f"{safe_url(os.fspath(rechunk_to))}: already exists; the per-block copy of a CSR "
            "matrix (--rechunk-to) needs a new location (fsdask never replaces what it did not write)"
        )
    return os.fspath(rechunk_to), False


def _csr_batches(node: Any, indptr: np.ndarray, dtype: np.dtype):
    """(rows, column indices, values) of consecutive row ranges of ≈ CSR_BATCH non-zeros."""
    n, r0 = len(indptr) - 1, 0
    while r0 < n:
        r1 = min(
            max(int(np.searchsorted(indptr, indptr[r0] + CSR_BATCH, side="right")) - 1, r0 + 1), n
        )
        a, b = int(indptr[r0]), int(indptr[r1])
        rows = np.repeat(np.arange(r0, r1, dtype=np.int32), np.diff(indptr[r0 : r1 + 1]))
        idx = np.asarray(node["indices"][a:b]).astype(np.int64)
        yield rows, idx, np.asarray(node["data"][a:b]).astype(dtype, copy=False)
        r0 = r1


def csr_to_blocks(
    reader: MatrixReader, block: int, where: str, rechunk_to: str | None = None
) -> BlockedCopy:
    """One pass over a stored CSR matrix that files its non-zeros by feature block.

    Without it, every feature block of a CSR matrix would scan all non-zeros (rows are
    contiguous, columns are not): ``p / block`` scans.  The copy costs one scan and writes
    12 bytes per non-zero (row, column, float32 value) to ``rechunk_to`` (any fsspec URL,
    e.g. shared by the workers of a cluster) or a local temporary folder; memory holds one
    batch of rows.
    """
    import logging
    import time

    import fsspec

    from fsdask.io.rechunk import _mib

    node = reader.node()
    n, p = reader.shape
    indptr = np.asarray(node["indptr"][...]).astype(np.int64)
    nnz = int(indptr[-1])
    url, temporary = _copy_location(rechunk_to, reader.so)
    log = logging.getLogger("fsdask.io")
    log.warning(
        "%s: X is CSR (rows contiguous): filing its %d non-zeros by feature block in %s, so a "
        "block reads only its own entries. Cost: one extra pass — reads %s, writes %s.",
        where,
        nnz,
        "a temporary folder" if temporary else url,
        _mib(nnz * (4 + reader.dtype.itemsize)),
        _mib(nnz * (8 + reader.dtype.itemsize)),
    )
    t0 = time.perf_counter()
    fs, root = fsspec.core.url_to_fs(url, **reader.so)
    fs.makedirs(root, exist_ok=True)
    parts: dict[int, list[int]] = {}
    for batch, (rows, idx, vals) in enumerate(_csr_batches(node, indptr, reader.dtype)):
        bid = idx // block
        order = np.argsort(bid, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(bid, minlength=-(-p // block)))])
        for k in np.flatnonzero(np.diff(starts)):
            sel = order[starts[k] : starts[k + 1]]
            cols = (idx[sel] - k * block).astype(np.int32)
            for ext, arr in (("rows", rows[sel]), ("cols", cols), ("vals", vals[sel])):
                fs.pipe_file(f"{root}/b{k}.{batch}.{ext}", arr.tobytes())
            parts.setdefault(int(k), []).append(batch)
    log.warning("%s: per-block copy written in %.1f s", where, time.perf_counter() - t0)
    return BlockedCopy(url, reader.so, reader.shape, reader.dtype, block, parts, reader.url)


def _label(obs: pd.DataFrame, label: str | None, where: str) -> tuple[Any, Any, Any]:
    if label is None:
        name = next((c for c in LABEL_NAMES if c in obs.columns), None)
        if name is None:
            return None, None, None
    else:
        name = label.removeprefix("obs:")
        if name not in obs.columns:
            raise InputError(
                f"{where}: no obs column {name!r} (found {list(obs.columns)}); check --label"
            )
    col = obs[name]
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy().astype(np.int64)
        if col.isna().any():  # missing → NaN, for open_dataset to refuse or drop
            codes = np.where(codes < 0, np.nan, codes)
        return codes, [str(c) for c in col.cat.categories], name
    y, classes = encode_labels(col.to_numpy(), where, name)
    return y, classes, name


def _dataset(
    reader: MatrixReader,
    obs: pd.DataFrame,
    var: pd.DataFrame,
    *,
    label: str | None,
    where: str,
    desc: str,
    chunk_bytes: int,
    nan_policy: str,
    rechunk_to: str | None = None,
) -> xr.Dataset:
    from fsdask.io.ingest import apply_nan_policy, lazy_from_blocks

    n, p = reader.shape
    if not var.index.is_unique:
        dup = var.index[var.index.duplicated()][0]
        raise InputError(
            f"{where}: var_names are not unique (e.g. {dup!r}); make them unique "
            "(adata.var_names_make_unique()) and save again"
        )
    if len(obs) != n or len(var) != p:
        raise InputError(
            f"{where}: the matrix is {n}×{p} but obs has {len(obs)} and var {len(var)} rows"
        )
    stored_csr = reader.kind == "csr_matrix" and reader.obj is None
    block = (
        feature_block_size(n, reader.dtype.itemsize, chunk_bytes)
        if stored_csr
        else _block_for(reader.kind, n, reader.dtype.itemsize, chunk_bytes)
    )
    bad = reader.nonfinite() if reader.kind in SPARSE else 0
    if bad and nan_policy == "error":
        raise InputError(
            f"{where}: {bad} NaN/Inf value(s) among the sparse matrix's stored values; "
            "choose a policy: --nan-policy zero|mean|drop-feature"
        )
    if stored_csr and -(-p // block) > 2:
        reader = csr_to_blocks(reader, block, where, rechunk_to)
    X = lazy_from_blocks(reader, n, p, block, dtype=reader.dtype)
    names = np.asarray(var.index).astype(str).astype(object)
    if bad:
        X, names, _ = apply_nan_policy(X, nan_policy, names, where=where)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X)},
        coords={"sample": np.asarray(obs.index).astype(str).astype(object), "feature": names},
    )
    y, classes, lname = _label(obs, label, where)
    if y is not None:
        ds["y"] = ("sample", y, {"label": f"obs:{lname}"})
    if classes is not None:
        ds.attrs["class_names"] = classes
    ds.attrs["foreign"] = (
        f"{desc}, opened read-only: X = {reader.path} ({reader.kind}, "
        f"obs → sample, var → feature)" + (f", y = obs[{lname!r}]" if lname else ", no label")
    )
    ds.attrs["source"] = where
    return ds


def open_anndata(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    hdf5: bool,
    variable: str | None = None,
    label: str | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    nan_policy: str = "error",
    rechunk_to: str | None = None,
) -> xr.Dataset:
    """An fsdask dataset (lazy, feature blocks) from an ``.h5ad`` file or an AnnData-on-Zarr store."""
    from fsdask.io.store import safe_url

    where = safe_url(url)
    try:
        root = open_root(url, storage_options, hdf5)
    except Exception as exc:
        raise InputError(
            f"{where}: not a readable {'.h5ad' if hdf5 else 'AnnData Zarr'} file "
            f"({type(exc).__name__}: {exc})"
        ) from None
    path, var_path = _element(root, variable, where)
    kind, shape, dtype = _matrix_info(root[path], where, path)
    dtype = check_numeric(dtype, where, path)
    if dtype.kind in "iub":  # counts: float32 is exact below 2**24 and half of int64/float64
        dtype = np.dtype(np.float32)
    reader = MatrixReader(url, storage_options, path, kind, shape, dtype, hdf5)
    return _dataset(
        reader,
        _frame(root, "obs"),
        _frame(root, var_path),
        label=label,
        where=where,
        desc="AnnData " + (".h5ad file" if hdf5 else "Zarr store"),
        chunk_bytes=chunk_bytes,
        nan_policy=nan_policy,
        rechunk_to=rechunk_to,
    )


def from_anndata(
    adata: Any,
    *,
    variable: str | None = None,
    label: str | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    nan_policy: str = "error",
) -> xr.Dataset:
    """An fsdask dataset from an in-memory ``AnnData`` (X, a layer or raw; dense or scipy.sparse)."""
    where = "in-memory AnnData"
    v = (variable or "X").strip("/")
    var = adata.var
    if v in ("raw", "raw/X"):
        if adata.raw is None:
            raise InputError(
                f"{where}: the AnnData has no .raw; choose X or a layer with --variable"
            )
        M, var = adata.raw.X, adata.raw.var
    elif v == "X":
        M = adata.X
    elif v.startswith("layers/"):
        name = v.removeprefix("layers/")
        if name not in adata.layers:
            raise InputError(f"{where}: no layer {name!r} (layers: {sorted(adata.layers.keys())})")
        M = adata.layers[name]
    else:
        raise InputError(
            f"{where}: variable {variable!r} is not an AnnData matrix; use X, raw or layers/NAME"
        )
    if M is None:
        raise InputError(f"{where}: {v} is empty (None)")
    import scipy.sparse

    if scipy.sparse.issparse(M):
        kind = "csc_matrix" if M.format == "csc" else "csr_matrix"
        M = M.tocsc() if M.format not in ("csr", "csc") else M
    else:
        kind, M = "dense", np.asarray(M)
    dtype = check_numeric(M.dtype, where, v)
    dtype = np.dtype(np.float32) if dtype.kind in "iub" else dtype
    reader = MatrixReader(None, None, v, kind, tuple(M.shape), dtype, False, obj=M)
    return _dataset(
        reader,
        adata.obs,
        var,
        label=label,
        where=where,
        desc="in-memory AnnData",
        chunk_bytes=chunk_bytes,
        nan_policy=nan_policy,
    )


def sparse_blocks(S: Any, chunk_bytes: int = DEFAULT_CHUNK_BYTES, dtype: Any = None) -> Any:
    """A scipy.sparse matrix (sample × feature) as a dask array of dense feature blocks, each
    densified only when its task runs."""
    from fsdask.io.ingest import lazy_from_blocks

    fmt = S.format
    S = S if fmt in ("csr", "csc") else S.tocsc()
    kind = "csc_matrix" if S.format == "csc" else "csr_matrix"
    dt = np.dtype(dtype) if dtype is not None else check_numeric(S.dtype, "sparse matrix", "X")
    reader = MatrixReader(None, None, "X", kind, tuple(S.shape), dt, False, obj=S)
    return lazy_from_blocks(
        reader,
        S.shape[0],
        S.shape[1],
        _block_for(kind, S.shape[0], dt.itemsize, chunk_bytes),
        dtype=dt,
    )


# ---- write-back ---------------------------------------------------------------------------------


def _columns(result: xr.Dataset, var_names: pd.Index, where: str) -> pd.DataFrame:
    feats = pd.Index(np.asarray(result["feature"].values).astype(str))
    pos = pd.Index(var_names.astype(str)).get_indexer(feats)
    if (pos < 0).any():
        missing = feats[pos < 0]
        raise InputError(
            f"{where}: {missing.size} feature(s) of the result are not in var_names (first: "
            f"{list(missing[:3])}); was the result computed on this AnnData (or on its .raw)?"
        )
    p = len(var_names)
    sel = np.zeros(p, dtype=bool)
    w = np.full(p, np.nan)
    r = np.full(p, -1, dtype=np.int64)
    sel[pos] = np.asarray(result["selected"].values, dtype=bool)
    w[pos] = np.asarray(result["weight"].values, dtype=np.float64)
    r[pos] = np.asarray(result["rank"].values, dtype=np.int64)
    return pd.DataFrame(
        {"fsdask_selected": sel, "fsdask_weight": w, "fsdask_rank": r}, index=var_names
    )


def _provenance(result: xr.Dataset) -> dict:
    """The result's attributes as strings/numbers (what h5ad/zarr attributes can hold)."""
    out = {}
    for k, v in result.attrs.items():
        out[k] = v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str)
    out["n_selected"] = int(np.asarray(result["selected"].values).sum())
    return out


def annotate_anndata(
    result: xr.Dataset, adata_or_path: Any, out: str | os.PathLike | None = None
) -> Any:
    """Add ``var["fsdask_selected"/"fsdask_weight"/"fsdask_rank"]`` and ``uns["fsdask"]``.

    An in-memory ``AnnData`` is annotated in place and returned.  A path (``.h5ad`` or
    AnnData Zarr) is never modified: ``out`` (which must not exist) receives a copy whose
    ``var`` and ``uns/fsdask`` are rewritten and every other byte is the input's.  Features
    of the AnnData absent from the result get selected False, weight NaN, rank -1.
    """
    if not isinstance(adata_or_path, (str, os.PathLike)):
        cols = _columns(result, adata_or_path.var_names, "in-memory AnnData")
        for c in cols:
            adata_or_path.var[c] = cols[c].to_numpy()
        adata_or_path.uns["fsdask"] = _provenance(result)
        return adata_or_path
    if out is None:
        raise InputError(
            f"{adata_or_path}: annotating a file needs an output path (out=…); the input is "
            "never modified"
        )
    return _annotate_file(result, os.fspath(adata_or_path), os.fspath(out))


def _annotate_file(result: xr.Dataset, src: str, out: str) -> str:
    if not os.path.exists(src):
        raise InputError(
            f"{src}: no such file or store; give the .h5ad (or AnnData .zarr) the result was "
            "computed on"
        )
    if os.path.exists(out):
        raise StoreError(
            f"{out} already exists; choose another output path (fsdask never overwrites "
            "what it did not write)"
        )
    hdf5 = os.path.isfile(src)
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(out)),
        f".{os.path.basename(out)}.tmp-{uuid.uuid4().hex[:8]}",
    )
    write_elem = _write_elem()
    try:
        (shutil.copyfile if hdf5 else shutil.copytree)(src, tmp)
        if hdf5:
            import h5py

            root = h5py.File(tmp, "r+")
        else:
            import zarr

            consolidated = zarr.open_group(tmp, mode="r").metadata.consolidated_metadata is not None
            root = zarr.open_group(
                tmp, mode="r+", use_consolidated=False
            )  # edited, then re-consolidated
        try:
            if not is_anndata_group(root):
                raise InputError(f"{src}: not an AnnData file (no encoding-type 'anndata')")
            var = _read_elem()(root["var"])
            cols = _columns(result, var.index, src)
            for c in cols:
                var[c] = cols[c].to_numpy()
            write_elem(root, "var", var)
            uns = root["uns"] if "uns" in root else root.create_group("uns")
            write_elem(uns, "fsdask", _provenance(result))
        finally:
            if hdf5:
                root.close()
        if not hdf5 and consolidated:
            zarr.consolidate_metadata(tmp)
        os.rename(tmp, out)
    finally:
        if os.path.exists(tmp):
            (os.remove if hdf5 else shutil.rmtree)(tmp)
    return out


def _write_elem():
    import anndata

    io = getattr(anndata, "io", None)
    return getattr(io, "write_elem", None) or anndata.experimental.write_elem
