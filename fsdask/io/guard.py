"""Guarded reads: a stored Zarr array whose read failures name the store and what to do.

A corrupted chunk surfaces deep inside a codec (``RuntimeError: Zstd decompression
error``), lost storage as a botocore/aiohttp error, a deleted chunk as silent NaN; every
reader of a stored matrix (fsdask stores, foreign Zarr, rechunked copies) wraps its array in
:class:`GuardedArray` and :func:`guarded_dask`, so this is the one place where read failures
become :class:`~fsdask.errors.StoreError`.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from fsdask.errors import FsdaskError, StoreError
from fsdask.io.location import safe_url


def guarded_dask(guarded: GuardedArray, chunks: Any, name: str | None = None) -> da.Array:
    """A dask array over ``guarded`` with the stored ``chunks`` (one task reads one chunk)."""
    kwargs = {"name": name} if name is not None else {}
    return da.from_array(
        guarded,
        chunks=chunks,
        lock=False,
        asarray=False,
        fancy=False,
        meta=np.empty((0, 0), dtype=guarded.dtype),
        inline_array=True,
        **kwargs,
    )


class GuardedArray:
    """Read-only view of a stored Zarr array whose read errors name the store.

    A corrupted chunk surfaces deep inside a codec (``RuntimeError: Zstd decompression
    error``), lost storage as a botocore/aiohttp error; both become a :class:`StoreError`
    saying which store and which features could not be read, and what to do.  Every
    estimator and command reads X through this (it is what :func:`open_dataset` returns),
    so this is the one place where read failures are translated.
    """

    def __init__(self, array: Any, url: str):
        self.array = array
        self.url = safe_url(url)
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)
        self.ndim = len(self.shape)

    def _where(self, key: Any) -> str:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], slice):
            start, stop, _ = key[1].indices(self.shape[1])
            return f" (features {start}–{stop - 1})"
        return ""

    def _missing_chunks(self, key: Any) -> list[str]:
        """Keys of the stored chunks that ``key`` covers and that are absent from the store."""
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], slice)):
            return []
        from zarr.core.sync import sync

        start, stop, _ = key[1].indices(self.shape[1])
        width = self.array.chunks[1]
        store, prefix = self.array.store_path.store, self.array.store_path.path
        keys = [
            self.array.metadata.encode_chunk_key((0, j))
            for j in range(start // width, (stop - 1) // width + 1)
        ]
        keys = [f"{prefix}/{k}" if prefix else k for k in keys]
        return [k for k in keys if not sync(store.exists(k))]

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            block = np.asarray(self.array[key])
            # a chunk missing from the store reads as the fill value (NaN) without any error
            missing = (
                self._missing_chunks(key)
                if block.size and block.dtype.kind == "f" and np.isnan(block).all()
                else []
            )
            if missing:
                raise StoreError(
                    f"{self.url}: chunk(s) {', '.join(missing)} of X"
                    f"{self._where(key)} are missing from the store (deleted or never written); "
                    "re-create the store with `fsdask ingest`"
                )
            return block
        except (FsdaskError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:
            where = self._where(key)
            msg = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreError(
                f"{self.url}: cannot read X{where}: {type(exc).__name__}: {msg}; the chunk is "
                "corrupted or the storage failed — check the storage and retry, or re-create "
                "the store with `fsdask ingest`"
            ) from None
