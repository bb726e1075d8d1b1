"""Block assembly: a matrix as a lazy dask array of (all samples × feature block) blocks.

Every reader that is not a Zarr array (AnnData dense or sparse, a scipy.sparse matrix, a
CSR copy filed by feature block, the synthetic generators) provides a :class:`BlockSource`
— ``source(j0, j1)`` returns the dense block of features ``[j0, j1)`` — and
:func:`lazy_from_blocks` turns it into the dask array the estimators consume; the block is
materialised only when its task runs.  :func:`apply_nan_policy` is the one place where
NaN/Inf values are refused, imputed or dropped, blockwise.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Protocol

import dask
import dask.array as da
import numpy as np

from fsdask._blocks import compute_blocks
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
