"""AnnData — ``.h5ad`` files, AnnData-on-Zarr stores and in-memory ``AnnData`` objects — block by block.

The matrix (``X``, a ``layers`` entry or ``raw``) may be dense or sparse (CSR or CSC).  Two
layouts (:class:`~fsdask.io.options.ReadOptions` ``layout``):

* **by sample blocks** (``"auto"``, for a stored CSR matrix or a dense one stored in row
  bands): a task reads a range of rows as stored — ``indptr``, then the rows' ``data`` and
  ``indices`` (h5py or zarr-python slices) — and gives a ``scipy.sparse.csr_matrix``
  (never densified) or a dense row band; ranges hold about ``chunk_bytes`` of non-zeros,
  tiny stored chunks merged.  The read kernel (:func:`fsdask.io.blocks.csr_rows`) refuses
  duplicate indices, sorts unsorted ones and applies the NaN policy in the block.
* **by feature blocks** (``"features"``, CSC, in-memory matrices): each block is
  materialised dense only when its task runs.  A CSC block reads exactly its columns; a
  stored CSR matrix is first filed by feature block (:func:`csr_to_blocks`, one pass).

``obs``/``var`` are read with :func:`anndata.io.read_elem`; ``var_names`` become feature
ids, ``obs_names`` sample ids, and ``label`` may name an ``obs`` column (``obs:cell_type``).

:func:`fsdask.io.anndata_write.annotate_anndata` writes a result back.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import threading
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd
import xarray as xr
from dask.base import tokenize
from dask.utils import format_bytes

from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size, string_ids
from fsdask.errors import FsdaskError, InputError, StoreError, import_optional
from fsdask.io.blocks import (
    apply_nan_policy,
    block_bytes,
    csr_rows,
    feature_nonfinite,
    lazy_from_blocks,
    merged_chunks,
)
from fsdask.io.foreign import LABEL_NAMES, check_numeric, encode_labels
from fsdask.io.location import Location, safe_url
from fsdask.io.options import ReadOptions

log = logging.getLogger("fsdask.io")

SPARSE = ("csr_matrix", "csc_matrix")
#: non-zeros read per batch when scanning a CSR matrix for a column block
CSR_BATCH = 4_000_000


def read_elem():
    """anndata's ``read_elem`` (refused with the extra to install when anndata is missing)."""
    anndata = import_optional("anndata", "h5ad", "reading AnnData")
    io = getattr(anndata, "io", None)
    return getattr(io, "read_elem", None) or anndata.experimental.read_elem


def encoding_type(node: Any) -> str:
    """The AnnData ``encoding-type`` of an h5py/zarr node ('' when none)."""
    v = node.attrs.get("encoding-type", "")
    return v.decode() if isinstance(v, bytes) else str(v)


def is_anndata_group(group: Any) -> bool:
    """Whether ``group`` is the root of an AnnData file or store."""
    return encoding_type(group) == "anndata"


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
        self.nan_fill: Any = None  # sample-blocked CSR reads: see fsdask.io.blocks.csr_rows
        self._node = None
        self._lock = threading.Lock()

    #: a 2-D array to dask.array.from_array (the sample-blocked reads, ``reader[rows, cols]``)
    ndim = 2

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
            tokenize(self.nan_fill),
        )

    def node(self) -> Any:
        if self._node is None:
            self._node = open_root(self.url, self.so, self.hdf5)[self.path]
        return self._node

    @contextlib.contextmanager
    def _failed_read(self, span: str) -> Iterator[None]:
        """A read that fails (not on bad input or memory) as one line naming ``span``."""
        try:
            yield
        except (InputError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                f"{safe_url(self.url or 'in-memory AnnData')}: cannot read {self.path} ({span}): "
                f"{type(exc).__name__}: {msg}; the file may be damaged — check it or the "
                "storage, and retry"
            ) from None

    def __call__(self, j0: int, j1: int) -> np.ndarray:
        with self._failed_read(f"features {j0}–{j1 - 1}"), self._lock:
            out = self._block(j0, j1)
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
        where = f"{safe_url(self.url or 'in-memory AnnData')} ({self.path})"
        for rows, idx, vals in _csr_batches(node, indptr, self.dtype, self.shape[1], where):
            keep = (idx >= j0) & (idx < j1)  # CSR: every batch of rows, this block's columns
            if keep.any():
                out[rows[keep], idx[keep] - j0] = vals[keep]
        return out

    def with_nan_fill(self, nan_fill: Any) -> MatrixReader:
        """A copy whose sample-blocked reads treat NaN/Inf as ``nan_fill`` says.

        Parameters
        ----------
        nan_fill : None, "keep", float or numpy.ndarray
            As :func:`fsdask.io.blocks.csr_rows` takes it.

        Returns
        -------
        MatrixReader
        """
        out = copy.copy(self)
        out.nan_fill, out._node, out._lock = nan_fill, None, threading.Lock()
        return out

    def __getitem__(self, key: tuple[slice, slice]) -> Any:
        """Rows × features of the stored matrix, read by rows: the sample-blocked read.

        A CSR matrix gives a checked ``scipy.sparse.csr_matrix`` (never densified), a dense
        one an ndarray; integer counts become :attr:`dtype`.  Memory: the rows' stored
        values, twice at most.
        """
        i0, i1, _ = key[0].indices(self.shape[0])
        j0, j1, _ = key[1].indices(self.shape[1])
        with self._failed_read(f"rows {i0}–{i1 - 1}"):
            out = self._rows(i0, i1)
        return out if (j0, j1) == (0, self.shape[1]) else out[:, j0:j1]

    def _rows(self, i0: int, i1: int) -> Any:
        # h5py handles are not thread-safe; zarr reads run in parallel
        guard = self._lock if self.hdf5 else contextlib.nullcontext()
        if self.kind == "dense":
            with guard:
                block = np.asarray(self.node()[i0:i1, :])
            return block.astype(self.dtype, copy=False)
        with guard:
            node = self.node()
            ptr = np.asarray(node["indptr"][i0 : i1 + 1]).astype(np.int64)
            a, b = int(ptr[0]), int(ptr[-1])
            data, indices = np.asarray(node["data"][a:b]), np.asarray(node["indices"][a:b])
        return csr_rows(
            data,
            indices,
            ptr - a,
            (i1 - i0, self.shape[1]),
            where=f"{safe_url(self.url or 'in-memory AnnData')} ({self.path})",
            first_row=i0,
            dtype=self.dtype,
            nan_fill=self.nan_fill,
        )

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
    loc = Location.of(url, storage_options)
    if not hdf5:
        import zarr

        return zarr.open_group(loc.target, mode="r", **loc.zarr_kwargs())
    h5py = import_optional("h5py", "h5ad", f"{loc.shown}: reading an .h5ad file")

    if loc.is_local:
        return h5py.File(loc.target, "r")
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
    return read_elem()(root[path])


def _matrix_info(node: Any, where: str, path: str) -> tuple[str, tuple[int, int], np.dtype]:
    enc = encoding_type(node)
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
        fs, root = Location.of(self.copy_url, self.so).fs()
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


def copy_location(rechunk_to: str | None, storage_options) -> tuple[str, bool]:
    """(URL, is_temporary) of the folder that receives a CSR matrix's per-block copy."""
    from fsdask.io.scratch import scratch_dir

    if rechunk_to is None:
        return scratch_dir("csr"), True
    loc = Location.of(rechunk_to, storage_options)
    if loc.exists():
        raise StoreError(
            f"{loc.shown}: already exists; the per-block copy of a CSR "
            "matrix (--rechunk-to) needs a new location (fsdask never replaces what it did not write)"
        )
    return os.fspath(rechunk_to), False


def _csr_batches(node: Any, indptr: np.ndarray, dtype: np.dtype, p: int, where: str):
    """(rows, column indices, values) of consecutive row ranges of ≈ CSR_BATCH non-zeros,
    checked as the sample-blocked reads are (:func:`fsdask.io.blocks.csr_rows`)."""
    n, r0 = len(indptr) - 1, 0
    while r0 < n:
        r1 = min(
            max(int(np.searchsorted(indptr, indptr[r0] + CSR_BATCH, side="right")) - 1, r0 + 1), n
        )
        a, b = int(indptr[r0]), int(indptr[r1])
        M = csr_rows(
            np.asarray(node["data"][a:b]),
            np.asarray(node["indices"][a:b]),
            indptr[r0 : r1 + 1] - a,
            (r1 - r0, p),
            where=where,
            first_row=r0,
            dtype=dtype,
            nan_fill="keep",  # the feature-blocked path applies the policy on its blocks
        )
        rows = np.repeat(np.arange(r0, r1, dtype=np.int32), np.diff(M.indptr))
        yield rows, M.indices.astype(np.int64), M.data
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

    node = reader.node()
    n, p = reader.shape
    indptr = np.asarray(node["indptr"][...]).astype(np.int64)
    nnz = int(indptr[-1])
    url, temporary = copy_location(rechunk_to, reader.so)
    log = logging.getLogger("fsdask.io")
    log.warning(
        "%s: X is CSR (rows contiguous): filing its %d non-zeros by feature block in %s, so a "
        "block reads only its own entries. Cost: one extra pass — reads %s, writes %s.",
        where,
        nnz,
        "a temporary folder" if temporary else url,
        format_bytes(nnz * (4 + reader.dtype.itemsize)),
        format_bytes(nnz * (8 + reader.dtype.itemsize)),
    )
    t0 = time.perf_counter()
    fs, root = Location.of(url, reader.so).fs()
    fs.makedirs(root, exist_ok=True)
    parts: dict[int, list[int]] = {}
    batches = _csr_batches(node, indptr, reader.dtype, p, f"{where} ({reader.path})")
    for batch, (rows, idx, vals) in enumerate(batches):
        bid = idx // block
        order = np.argsort(bid, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(bid, minlength=-(-p // block)))])
        for k in np.flatnonzero(np.diff(starts)):
            sel = order[starts[k] : starts[k + 1]]
            cols = (idx[sel] - k * block).astype(np.int32)
            for ext, arr in (("rows", rows[sel]), ("cols", cols), ("vals", vals[sel])):
                put_part(fs, root, f"b{k}.{batch}.{ext}", arr.tobytes(), temporary)
            parts.setdefault(int(k), []).append(batch)
    log.warning("%s: per-block copy written in %.1f s", where, time.perf_counter() - t0)
    return BlockedCopy(url, reader.so, reader.shape, reader.dtype, block, parts, reader.url)


def put_part(fs: Any, root: str, name: str, data: bytes, temporary: bool) -> None:
    """Write one part of the per-block copy under ``root``; a full disk or an unwritable
    folder ends the run with a :class:`StoreError` after the partial copy (a folder fsdask
    made) is removed."""
    import contextlib

    try:
        fs.pipe_file(f"{root}/{name}", data)
    except OSError as exc:
        with contextlib.suppress(Exception):
            fs.rm(root, recursive=True)
        where = "the temporary folder (TMPDIR)" if temporary else safe_url(root)
        raise StoreError(
            f"{where}: writing the per-block copy of a CSR matrix failed "
            f"({type(exc).__name__}: {exc.strerror or exc}); free space there, or give "
            "--rechunk-to a location with room for 12 bytes per non-zero"
        ) from None


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
    options: ReadOptions,
    where: str,
    desc: str,
    chunk_bytes: int,
    describe_only: bool = False,
) -> xr.Dataset:
    """The dataset of one AnnData matrix: X lazy by sample or feature block, ids, the label.

    ``describe_only``: read no stored value (no NaN count, no per-block copy of a CSR
    matrix); the dataset is for a description, not for a computation.
    """
    n, p = reader.shape
    _check_frames(obs, var, n, p, where)
    names = string_ids(var.index)
    indptr = None
    if reader.kind == "csr_matrix" and not describe_only:  # row sizes: blocks, empty cells
        indptr = reader.obj.indptr if reader.obj is not None else reader.node()["indptr"][...]
        indptr = np.asarray(indptr).astype(np.int64)
        warn_empty_rows(indptr, obs.index, where)
    by_samples = options.layout == "auto" and sample_oriented(reader)
    if by_samples:  # a description reads no value: no count of NaN/Inf for their policy
        how = options.replace(nan_policy="error") if describe_only else options
        X, names = _sample_x(reader, indptr, names, how, where, chunk_bytes)
    else:
        X, names = _feature_x(reader, names, options, where, chunk_bytes, describe_only)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X)},
        coords={"sample": string_ids(obs.index), "feature": names},
    )
    y, classes, lname = _label(obs, options.label, where)
    if y is not None:
        ds["y"] = ("sample", y, {"label": f"obs:{lname}"})
    if classes is not None:
        ds.attrs["class_names"] = classes
    ds.attrs["foreign"] = (
        f"{desc}, opened read-only: X = {reader.path} ({reader.kind}, "
        f"obs → sample, var → feature, by {'sample' if by_samples else 'feature'} blocks)"
        + (f", y = obs[{lname!r}]" if lname else ", no label")
    )
    ds.attrs["source"] = where
    ds.attrs["layout"] = "samples" if by_samples else "features"
    return ds


def _check_frames(obs: pd.DataFrame, var: pd.DataFrame, n: int, p: int, where: str) -> None:
    """Refuse var_names that are not unique, and obs/var that do not match the matrix."""
    if not var.index.is_unique:
        dups = pd.unique(var.index[var.index.duplicated()])
        shown = ", ".join(repr(str(d)) for d in dups[:3]) + (" …" if len(dups) > 3 else "")
        raise InputError(
            f"{where}: var_names are not unique ({len(dups)} repeated, e.g. {shown}); make "
            "them unique (adata.var_names_make_unique()) and save again"
        )
    if len(obs) != n or len(var) != p:
        raise InputError(
            f"{where}: the matrix is {n}×{p} but obs has {len(obs)} and var {len(var)} rows"
        )


def warn_empty_rows(indptr: np.ndarray, obs_names: Any, where: str) -> int:
    """Log (WARNING) how many cells have no stored value; they are kept (zeros everywhere).

    Parameters
    ----------
    indptr : numpy.ndarray
        A CSR matrix's row pointers.
    obs_names : sequence
        The cells' names, for the message.
    where : str
        The source, as shown.

    Returns
    -------
    int
        The number of empty rows.
    """
    empty = np.flatnonzero(np.diff(indptr) == 0)
    if empty.size:
        first = ", ".join(str(obs_names[i]) for i in empty[:3])
        log.warning(
            "%s: %d cell(s) have no count (first: %s); they are kept and count as zeros in "
            "every statistic — leave them out first (scanpy.pp.filter_cells(adata, "
            "min_counts=1)) if they are empty droplets",
            where,
            empty.size,
            first,
        )
    return int(empty.size)


def _feature_x(
    reader: MatrixReader, names, options: ReadOptions, where: str, chunk_bytes: int, describe_only
) -> tuple[Any, np.ndarray]:
    """X by feature blocks (a stored CSR matrix filed by feature block first), NaN policy applied."""
    n, p = reader.shape
    stored_csr = reader.kind == "csr_matrix" and reader.obj is None
    block = (
        feature_block_size(n, reader.dtype.itemsize, chunk_bytes)
        if stored_csr
        else _block_for(reader.kind, n, reader.dtype.itemsize, chunk_bytes)
    )
    bad = reader.nonfinite() if reader.kind in SPARSE and not describe_only else 0
    if bad and options.nan_policy == "error":
        raise InputError(
            f"{where}: {bad} NaN/Inf value(s) among the sparse matrix's stored values; "
            "choose a policy: --nan-policy zero|mean|drop-feature"
        )
    if stored_csr and -(-p // block) > 2 and not describe_only:
        reader = csr_to_blocks(reader, block, where, options.rechunk_to)
    X = lazy_from_blocks(reader, n, p, block, dtype=reader.dtype)
    if bad:
        X, names, _ = apply_nan_policy(X, options.nan_policy, names, where=where)
    return X, names


def sample_oriented(reader: MatrixReader) -> bool:
    """Whether the stored matrix is read best by rows: CSR, or dense stored in row bands
    (several chunks along the samples, or contiguous HDF5).  CSC and in-memory matrices are
    read by feature blocks.

    Parameters
    ----------
    reader : MatrixReader

    Returns
    -------
    bool
    """
    if reader.obj is not None or reader.kind == "csc_matrix":
        return False
    if reader.kind == "csr_matrix":
        return True
    chunks = getattr(reader.node(), "chunks", None)
    return not chunks or chunks[0] < reader.shape[0]


def row_chunks(reader: MatrixReader, indptr: np.ndarray | None, chunk_bytes: int) -> tuple:
    """Rows per sample block: stored chunks merged up to ``chunk_bytes`` per block.

    CSR: blocks of about ``chunk_bytes`` of non-zeros (value and column index), cut where
    the cumulative count of non-zeros passes each multiple, and in Zarr never fewer
    non-zeros than a stored chunk of ``data`` (a store chunked one cell per chunk is read
    in merged ranges); without ``indptr`` (a description) the rows are cut evenly.  Dense:
    whole stored row chunks, about ``chunk_bytes`` per block with all features.

    Parameters
    ----------
    reader : MatrixReader
        The stored matrix.
    indptr : numpy.ndarray or None
        A CSR matrix's row pointers (None: cut evenly).
    chunk_bytes : int
        The block size.

    Returns
    -------
    tuple of int
        Rows per block, summing to the number of rows.
    """
    n, p = reader.shape
    node = reader.node()
    if reader.kind == "dense":
        stored = (getattr(node, "chunks", None) or (1,))[0]
        return merged_chunks(n, stored, chunk_bytes // max(1, p * reader.dtype.itemsize))
    # a Zarr chunk is read whole by every block that touches it (HDF5's are cached)
    stored = 1 if reader.hdf5 else (getattr(node["data"], "chunks", None) or (1,))[0]
    target = max(stored, chunk_bytes // (reader.dtype.itemsize + 4))
    if indptr is None:
        return merged_chunks(n, 1, target * n // max(1, int(node["data"].shape[0])))
    cuts = np.searchsorted(indptr, np.arange(target, indptr[-1], target))
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    return tuple(int(c) for c in np.diff(bounds)) or (n,)


def from_rows(reader: MatrixReader, chunks: tuple) -> Any:
    """The reader as a dask array of sample blocks (``chunks`` rows × all features).

    Parameters
    ----------
    reader : MatrixReader
        A stored matrix (CSR or dense).
    chunks : tuple of int
        Rows per block (:func:`row_chunks`).

    Returns
    -------
    dask.array.Array
        One task per block, reading it from the store; a CSR matrix's blocks (and
        ``X._meta``) are ``csr_matrix``.  Tasks pickle the reader, which reopens the file
        in each process.
    """
    import dask.array as da
    import scipy.sparse

    p = reader.shape[1]
    if reader.kind == "dense":
        meta = np.empty((0, 0), dtype=reader.dtype)
    else:
        meta = scipy.sparse.csr_matrix((0, 0), dtype=reader.dtype)
    return da.from_array(
        reader,
        chunks=(chunks, (p,)),
        name="fsdask-rows-" + tokenize(reader, chunks),
        asarray=False,
        fancy=False,
        lock=False,
        meta=meta,
        inline_array=True,
    )


def _sample_x(
    reader: MatrixReader, indptr, names, options: ReadOptions, where: str, chunk_bytes: int
) -> tuple[Any, np.ndarray]:
    """X by sample blocks as stored, NaN/Inf among the non-zeros handled by the read kernel.

    ``error`` refuses in the block that holds one and ``zero`` replaces it there, at no
    extra pass; ``mean`` and ``drop-feature`` need every block's count first: one pass.
    """
    n = reader.shape[0]
    chunks = row_chunks(reader, indptr, block_bytes(chunk_bytes, options.memory_budget))
    policy = options.nan_policy
    if reader.kind != "csr_matrix" or policy in ("error", "zero"):
        return from_rows(reader.with_nan_fill(0.0 if policy == "zero" else None), chunks), names
    bad, sums = feature_nonfinite(from_rows(reader.with_nan_fill("keep"), chunks))
    if not bad.any():
        return from_rows(reader.with_nan_fill(None), chunks), names
    first = ", ".join(str(names[i]) for i in np.flatnonzero(bad)[:5])
    if policy == "mean":
        if (bad == n).any():
            raise InputError(
                f"{where}: {int((bad == n).sum())} feature(s) have no finite value at all; a "
                "mean cannot be imputed for them — use --nan-policy drop-feature"
            )
        log.warning("%s: NaN/Inf replaced by the feature's mean in %s", where, first)
        return from_rows(reader.with_nan_fill(sums / (n - bad)), chunks), names
    keep = bad == 0
    if not keep.any():
        raise InputError(
            f"{where}: every feature has a NaN/Inf value; nothing would be left to select from"
        )
    log.warning("%s: dropped %d feature(s) with NaN/Inf (first: %s)", where, (~keep).sum(), first)
    return from_rows(reader.with_nan_fill(0.0), chunks)[:, keep], names[keep]


def open_anndata(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    hdf5: bool,
    options: ReadOptions | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    describe_only: bool = False,
) -> xr.Dataset:
    """An fsdask dataset (lazy) from an ``.h5ad`` file or an AnnData-on-Zarr store.

    Parameters
    ----------
    url : str
        Local path or fsspec URL.
    storage_options : mapping, optional
        Passed to fsspec.
    hdf5 : bool
        An ``.h5ad`` (HDF5) file rather than a Zarr store.
    options : ReadOptions, optional
        ``variable``, ``label``, ``nan_policy``, ``layout``, ``memory_budget`` and
        ``rechunk_to`` are used.
    chunk_bytes : int
        The target size of a feature block.
    describe_only : bool
        For a description (``fsdask info``): read only metadata — no pass over the stored
        values, no per-block copy of a CSR matrix — and record the matrix's encoding,
        non-zeros and the ``obs``/``var`` columns in the attribute ``anndata``.

    Returns
    -------
    xarray.Dataset
        X lazy by sample blocks as stored (``layout="auto"``, CSR or dense row bands:
        memory holds a block's stored values per task) or by feature blocks (one dense
        block per task; a stored CSR matrix is first filed by feature block, one pass, see
        :func:`csr_to_blocks`).
    """
    options = options or ReadOptions()
    where = safe_url(url)
    try:
        root = open_root(url, storage_options, hdf5)
        path, var_path = _element(root, options.variable, where)
        kind, shape, dtype = _matrix_info(root[path], where, path)
        obs, var = _frame(root, "obs"), _frame(root, var_path)
        stored = stored_summary(root[path], kind, shape, obs, var)
    except (FsdaskError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # h5py/zarr/anndata on a truncated or corrupted file
        raise InputError(damaged(where, exc, hdf5)) from None
    dtype = check_numeric(dtype, where, path)
    if dtype.kind in "iub":  # counts: float32 is exact below 2**24 and half of int64/float64
        dtype = np.dtype(np.float32)
    reader = MatrixReader(url, storage_options, path, kind, shape, dtype, hdf5)
    try:
        ds = _dataset(
            reader,
            obs,
            var,
            options=options,
            where=where,
            desc="AnnData " + (".h5ad file" if hdf5 else "Zarr store"),
            chunk_bytes=chunk_bytes,
            describe_only=describe_only,
        )
    except FsdaskError:  # StoreError is an OSError too: fsdask's own refusals pass as they are
        raise
    except (OSError, RuntimeError, KeyError, ValueError) as exc:
        # what h5py/zarr raise reading damaged stored values (a NaN count, the CSR scan)
        raise InputError(damaged(where, exc, hdf5)) from None
    ds.attrs["anndata"] = stored
    return ds


def stored_summary(node: Any, kind: str, shape: tuple[int, int], obs, var) -> str:
    """One line on how the matrix is stored and which annotations exist (metadata only)."""
    n, p = shape
    if kind in SPARSE:
        nnz = int(node["data"].shape[0])
        how = f"{kind}, {nnz} non-zeros ({100 * nnz / max(n * p, 1):.3g} % dense)"
    else:
        how = "dense"

    def cols(frame) -> str:
        names = [str(c) for c in frame.columns]
        return ", ".join(names[:8]) + (" …" if len(names) > 8 else "") if names else "none"

    return f"{how}; obs columns: {cols(obs)}; var columns: {cols(var)}"


def damaged(where: str, exc: BaseException, hdf5: bool) -> str:
    """The one-line message for an AnnData file or store that cannot be read.

    Parameters
    ----------
    where : str
        The file or store as shown (no credentials).
    exc : BaseException
        What the reading library raised (its first line is quoted).
    hdf5 : bool
        An ``.h5ad`` file rather than a Zarr store.

    Returns
    -------
    str
    """
    first = (str(exc).splitlines() or [""])[0][:200]
    what = "an .h5ad (HDF5) file" if hdf5 else "an AnnData Zarr store"
    return (
        f"{safe_url(where)}: damaged or not {what} — it cannot be read "
        f"({type(exc).__name__}: {first}); check it (was it copied completely?) or write "
        "it again"
    )


def from_anndata(
    adata: Any,
    *,
    options: ReadOptions | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> xr.Dataset:
    """An fsdask dataset from an in-memory ``AnnData`` (X, a layer or raw; dense or scipy.sparse).

    ``options.variable``, ``options.label`` and ``options.nan_policy`` are used; memory: the
    AnnData's matrix is shared, one dense feature block per task.
    """
    options = options or ReadOptions()
    variable = options.variable
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
        options=options,
        where=where,
        desc="in-memory AnnData",
        chunk_bytes=chunk_bytes,
    )


def sparse_blocks(S: Any, chunk_bytes: int = DEFAULT_CHUNK_BYTES, dtype: Any = None) -> Any:
    """A scipy.sparse matrix (sample × feature) as a dask array of dense feature blocks, each
    densified only when its task runs."""
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
