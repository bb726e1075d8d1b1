"""Block assembly: a matrix as a lazy dask array of (all samples × feature block) blocks.

Every reader that is not a Zarr array (AnnData dense or sparse, a scipy.sparse matrix, a
CSR copy filed by feature block, the synthetic generators) provides a :class:`BlockSource`
— ``source(j0, j1)`` returns the dense block of features ``[j0, j1)`` — and
:func:`lazy_from_blocks` turns it into the dask array the estimators consume; the block is
materialised only when its task runs.  :func:`apply_nan_policy` is the one place where
NaN/Inf values are refused, imputed or dropped in feature blocks; in sample blocks the CSR
read kernel :func:`csr_rows` does it (with :func:`feature_nonfinite` for the policies that
need every block's count first).  :func:`merged_chunks` and :func:`block_bytes` size
sample blocks: whole stored chunks, merged up to the block size.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal, Protocol

import dask
import dask.array as da
import numba
import numpy as np
import scipy.sparse

from fsdask._blocks import compute_blocks
from fsdask._config import memory_budget as _memory_budget
from fsdask.errors import InputError
from fsdask.io.options import NAN_POLICIES

NanPolicy = Literal["error", "zero", "mean", "drop-feature"]


class BlockSource(Protocol):
    """What a new kind of source implements to be read by fsdask (see :mod:`fsdask.io`).

    Attributes
    ----------
    shape : tuple of int
        (samples, features).
    dtype : numpy.dtype
        The dtype of the blocks returned.
    """

    shape: tuple[int, int]
    dtype: np.dtype

    def __call__(self, j0: int, j1: int) -> np.ndarray:
        """The dense block of all samples × features ``[j0, j1)``."""


def from_source(source: BlockSource, block: int) -> da.Array:
    """``source`` as a lazy dask array of feature blocks ``block`` wide (the last may be narrower).

    Memory: one task holds one dense block, ``shape[0] × block × itemsize`` bytes.
    """
    n, p = source.shape
    return lazy_from_blocks(source, n, p, block, dtype=source.dtype)


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


def block_bytes(chunk_bytes: int, memory_budget: Any = None) -> int:
    """What one sample block may hold: ``chunk_bytes``, and at most a quarter of the memory
    budget (as a feature block, :func:`fsdask.io.rechunk.to_feature_blocks`).

    Parameters
    ----------
    chunk_bytes : int
        The target block size.
    memory_budget : int or str, optional
        The budget (default: the dask config ``fsdask.memory-budget``); 0 sets no bound.

    Returns
    -------
    int
        Bytes, at least 1.
    """
    budget = _memory_budget(memory_budget)
    return max(1, min(chunk_bytes, budget // 4) if budget > 0 else chunk_bytes)


def merged_chunks(n: int, stored: int, target: int) -> tuple[int, ...]:
    """Chunks of ``n`` made of whole stored chunks of ``stored``, each at least ``target`` long
    (the last may be shorter): tiny stored chunks (one cell per chunk) merged, none cut.

    Parameters
    ----------
    n : int
        The length to cut.
    stored : int
        The stored chunk length.
    target : int
        The least length of a merged chunk.

    Returns
    -------
    tuple of int
        The chunk lengths, summing to ``n``.

    Examples
    --------
    >>> merged_chunks(10, 1, 4)
    (4, 4, 2)
    >>> merged_chunks(10, 3, 4)
    (6, 4)
    """
    stored = max(1, int(stored))
    per = min(max(1, n), stored * -(-max(1, int(target)) // stored))
    return (per,) * (n // per) + ((n % per,) if n % per else ()) or (n,)


def apply_nan_policy(
    X: da.Array, policy: NanPolicy, feature_names: np.ndarray | None = None, where: str = "X"
) -> tuple[da.Array, np.ndarray | None, dict]:
    """Check X for NaN/Inf and apply ``policy``; return X, the kept feature names and a report.

    ``error`` raises naming how many values and which features; ``zero`` / ``mean`` impute
    per feature; ``drop-feature`` removes features with any non-finite value.  Any chunking
    works (feature or sample blocks).  Costs one pass (the counts); ``mean`` one more (the
    features' sums).
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
        X = _impute_means(X, bad, feature_names, where)
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


def _impute_means(
    X: da.Array, bad: np.ndarray, feature_names: np.ndarray | None, where: str
) -> da.Array:
    """X with each NaN/Inf replaced by its feature's mean over the finite values.

    The means are summed over every block first (one pass), so any chunking works: feature
    blocks, or sample blocks as a store chunked by samples is read.
    """
    n = X.shape[0]
    empty = np.flatnonzero(bad == n)
    if empty.size:
        names = ", ".join(
            str(feature_names[i]) if feature_names is not None else f"#{i}" for i in empty[:5]
        )
        raise InputError(
            f"{where}: {empty.size} feature(s) have no finite value at all (first: {names}); "
            "a mean cannot be imputed for them — use --nan-policy drop-feature"
        )
    finite = da.where(da.isfinite(X), X, 0).astype(np.float64)
    (sums,) = compute_blocks(finite.sum(axis=0))  # p sums: joined on the client
    means = sums / (n - bad)

    def impute(b: np.ndarray, block_info: Any = None) -> np.ndarray:
        lo = block_info[0]["array-location"][1][0]
        m = means[lo : lo + b.shape[1]]
        return np.where(np.isfinite(b), b, m[None, :]).astype(b.dtype)

    return X.map_blocks(impute, dtype=X.dtype)


def csr_rows(
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    shape: tuple[int, int],
    *,
    where: str,
    first_row: int,
    dtype: Any,
    nan_fill: Any = None,
) -> scipy.sparse.csr_matrix:
    """Rows ``first_row …`` of a stored CSR matrix as a checked ``csr_matrix`` (the read kernel).

    The checks cost one look at the non-zeros already in memory: column indices out of range
    (a damaged file) and duplicate column indices within a row are refused with the rows
    they are in; unsorted indices (valid CSR) are sorted.  Integer counts become ``dtype``
    (float), not normalised.  NaN/Inf among the non-zeros are refused (``nan_fill`` None)
    or replaced by ``nan_fill`` (a number, or one per feature), or kept (``"keep"``).

    Parameters
    ----------
    data, indices, indptr : numpy.ndarray
        The rows' stored arrays; ``indptr`` starts at 0.
    shape : (int, int)
        (rows, features).
    where : str
        The matrix, for messages.
    first_row : int
        The number of the first row, for messages.
    dtype : numpy.dtype
        The dtype of the result.
    nan_fill : None, "keep", float or numpy.ndarray
        What NaN/Inf values become.

    Returns
    -------
    scipy.sparse.csr_matrix
        In canonical form (sorted, no duplicates).  Memory: the rows' non-zeros, once more.
    """
    rows, p = shape
    last = first_row + rows - 1
    keep_nan = isinstance(nan_fill, str) and nan_fill == "keep"
    floats = np.asarray(data).dtype.kind == "f" and not keep_nan
    compiled = floats and data.dtype in (np.float32, np.float64)  # numba has no float16
    # one compiled sweep over the non-zeros for every check: each numpy check would be a
    # pass of its own, with a temporary the size of the non-zeros
    values = data if compiled else np.empty(0)
    outside, falls, nonfinite = _scan_csr(values, indices, indptr, p, compiled)
    if floats and not compiled:
        nonfinite = int((~np.isfinite(data)).sum())
    if outside:
        raise InputError(
            f"{where}: rows {first_row}–{last} have column indices outside 0–{p - 1}; the "
            "matrix is damaged — write it again"
        )
    idx_type = np.int32 if max(p, indices.size) < 2**31 else np.int64
    M = scipy.sparse.csr_matrix(
        (data.astype(dtype, copy=False), indices.astype(idx_type, copy=False), indptr),
        shape=shape,
        copy=False,
    )
    if falls:  # rare: unsorted (valid CSR, sorted here, in this block) or a column twice
        M.sort_indices()
        _refuse_duplicates(M, where, first_row)
    M.has_canonical_format = True  # checked above: scipy would look at every index again
    if nonfinite:  # rare: the values are looked at again, to be refused or filled
        bad = ~np.isfinite(M.data)
        if bad.any():
            if nan_fill is None:
                raise InputError(
                    f"{where}: {int(bad.sum())} NaN/Inf value(s) among the non-zeros of rows "
                    f"{first_row}–{last}; choose a policy: nan_policy= (fsdask ingest "
                    "--nan-policy) zero|mean|drop-feature"
                )
            fill = np.asarray(nan_fill, dtype=M.dtype)
            M.data[bad] = fill[M.indices[bad]] if fill.ndim else fill
            M.eliminate_zeros()
    return M


@numba.njit(nogil=True, cache=True)
def _scan_csr(data, indices, indptr, p, floats):  # pragma: no cover - numba
    """One sweep over stored CSR rows: whether a column index is outside 0 … p − 1,
    whether a row's indices do not rise (unsorted, or a column twice), and how many of the
    values are NaN/Inf (``floats``).  The loops run over the flat arrays, without branches
    (they vectorise); the row ends are corrected after."""
    nnz = indices.size
    lo, hi, falls = p, -1, 0
    for k in range(nnz):
        c = indices[k]
        lo, hi = min(lo, c), max(hi, c)
    for k in range(1, nnz):
        falls += indices[k] <= indices[k - 1]
    for r in range(1, indptr.size - 1):  # a row's first index may be below the last one's
        k = indptr[r] - indptr[0]
        # each boundary once: an empty row shares its start with the next non-empty row
        if 0 < k < nnz and indptr[r + 1] > indptr[r]:
            falls -= indices[k] <= indices[k - 1]
    nonfinite = 0
    if floats:
        for k in range(data.size):
            nonfinite += not np.isfinite(data[k])
    return nnz > 0 and (lo < 0 or hi >= p), falls > 0, nonfinite


def _refuse_duplicates(M: scipy.sparse.csr_matrix, where: str, first_row: int) -> None:
    """Refuse a row holding one column twice (sorted indices: duplicates are neighbours).

    Readers disagree on what duplicates mean (scipy sums them, a dense assignment keeps
    one), so they are refused rather than given a meaning here.
    """
    idx, ptr = M.indices, M.indptr
    if idx.size < 2:
        return
    same = np.diff(idx) == 0
    same[ptr[1:-1][(ptr[1:-1] > 0) & (ptr[1:-1] < idx.size)] - 1] = False  # across a row end
    if same.any():
        k = int(np.flatnonzero(same)[0])
        row = first_row + int(np.searchsorted(ptr, k, side="right")) - 1
        raise InputError(
            f"{where}: row {row} holds column {int(idx[k])} twice (duplicate CSR indices, "
            f"{int(same.sum())} in rows {first_row}–{first_row + M.shape[0] - 1}); sum them "
            "(adata.X.sum_duplicates()) and save the AnnData again"
        )


@functools.singledispatch
def nonfinite_stats(block: Any) -> np.ndarray:
    """Per feature, the NaN/Inf values of ``block`` and the sum of its finite ones.

    One kernel per kind of block (dense here, CSR below), so a sample-blocked pass over
    either needs no branch on the array type.

    Parameters
    ----------
    block : numpy.ndarray or scipy.sparse.csr_matrix
        Rows × features.

    Returns
    -------
    numpy.ndarray
        (2, features) float64: the counts, then the sums.
    """
    b = np.asarray(block)
    ok = np.isfinite(b)
    return np.stack([(~ok).sum(0), np.where(ok, b, 0).sum(0, dtype=np.float64)]).astype(np.float64)


@nonfinite_stats.register(scipy.sparse.csr_matrix)
def _(block: scipy.sparse.csr_matrix) -> np.ndarray:
    p = block.shape[1]
    ok = np.isfinite(block.data)
    bad = np.bincount(block.indices[~ok], minlength=p)
    sums = np.bincount(block.indices[ok], weights=block.data[ok].astype(np.float64), minlength=p)
    return np.stack([bad.astype(np.float64), sums])


def feature_nonfinite(X: da.Array) -> tuple[np.ndarray, np.ndarray]:
    """(NaN/Inf count, sum of finite values) per feature of a sample-blocked ``X``: one pass.

    Parameters
    ----------
    X : dask.array.Array
        Dense or CSR blocks.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        int64 counts and float64 sums, one per feature.  Memory: one block per task, and
        2 × p float64 per row block on the client.
    """
    nb = len(X.chunks[0])
    parts = X.map_blocks(
        nonfinite_stats, chunks=((2,) * nb, X.chunks[1]), dtype=np.float64, meta=np.empty((0, 0))
    )
    (stats,) = compute_blocks(parts)
    stats = np.asarray(stats).reshape(nb, 2, -1).sum(0)
    return stats[0].astype(np.int64), stats[1]
