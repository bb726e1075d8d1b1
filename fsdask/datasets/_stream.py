"""Block-seeded lazy generation of (sample, feature) matrices."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Mapping

import numpy as np
import xarray as xr

from fsdask._validation import DEFAULT_CHUNK_BYTES, feature_block_size
from fsdask.io.ingest import lazy_from_blocks

#: number of features drawn from one seed; storage chunking never changes the data
SEED_BLOCK = 1024

ColumnSampler = Callable[[np.random.Generator, int, int, int], np.ndarray]


@dataclasses.dataclass
class Synthetic:
    """A generated problem: lazy dataset, relevant feature indices, generator parameters."""

    dataset: xr.Dataset
    relevant: np.ndarray
    params: dict[str, Any]

    @property
    def X(self):
        return self.dataset["X"]

    @property
    def y(self):
        return self.dataset["y"].values if "y" in self.dataset else None


def seeded_columns(
    seed: int, j0: int, j1: int, n_samples: int, sampler: ColumnSampler, dtype: Any = np.float32
) -> np.ndarray:
    """Columns ``[j0, j1)``; group g (features g·SEED_BLOCK …) is drawn from rng([seed, g]).

    ``sampler(rng, g0, g1, n_samples)`` returns the (n_samples × (g1 − g0)) block for
    global feature indices ``[g0, g1)``.
    """
    parts = []
    for g in range(j0 // SEED_BLOCK, (j1 - 1) // SEED_BLOCK + 1):
        g0, g1 = g * SEED_BLOCK, (g + 1) * SEED_BLOCK
        rng = np.random.default_rng([int(seed), int(g)])
        block = sampler(rng, g0, g1, n_samples)
        lo, hi = max(j0, g0) - g0, min(j1, g1) - g0
        parts.append(block[:, lo:hi])
    return np.concatenate(parts, axis=1).astype(dtype, copy=False)


def lazy_matrix(
    seed: int,
    n_samples: int,
    n_features: int,
    sampler: ColumnSampler,
    dtype: Any = np.float32,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
):
    """Lazy dask (sample, feature) array drawn by ``sampler`` in seeded groups."""
    block = feature_block_size(n_samples, np.dtype(dtype).itemsize, chunk_bytes)
    block = max(SEED_BLOCK, (block // SEED_BLOCK) * SEED_BLOCK)
    block = min(block, n_features)
    return lazy_from_blocks(
        lambda j0, j1: seeded_columns(seed, j0, j1, n_samples, sampler, dtype),
        n_samples,
        n_features,
        block,
        dtype,
    )


def write_synthetic(
    syn: Synthetic,
    url: str | os.PathLike,
    *,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> str:
    """Stream a generated problem into a Zarr store, chunk by chunk; returns the fingerprint.

    The relevant indices and the generator parameters go into the store's attributes.

    Parameters
    ----------
    syn : Synthetic
        A generated problem (:func:`weston_linear`, :func:`fermat_spiral`, …).
    url : str or path-like
        Local path or fsspec URL of the new store.
    storage_options : mapping, optional
        fsspec options.
    overwrite : bool, default False
        Replace an fsdask dataset already at ``url`` (nothing else is ever replaced).
    chunk_bytes : int, default 64 MiB
        Target size of a feature block.

    Returns
    -------
    str
        The store's content fingerprint.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.datasets import weston_linear, write_synthetic
    >>> fingerprint = write_synthetic(weston_linear(n_features=500), "weston.zarr")
    >>> fsdask.open_dataset("weston.zarr").attrs["relevant_features"]
    [0, 1, 2, 3, 4, 5]
    """
    from fsdask.io import write_dataset

    attrs = {
        "generator": syn.params.get("generator", "synthetic"),
        "generator_params": {k: v for k, v in syn.params.items()},
        "relevant_features": [int(i) for i in syn.relevant],
    }
    from fsdask.results import clean_attrs

    return write_dataset(
        syn.dataset,
        url,
        storage_options=storage_options,
        chunk_bytes=chunk_bytes,
        overwrite=overwrite,
        source=f"fsdask.datasets.{attrs['generator']}",
        attrs=clean_attrs(attrs),
    )
