"""Seeded synthetic problems from the papers, streamable to Zarr at any size.

Every generator returns a :class:`Synthetic`: a lazy ``xarray.Dataset`` (X built block by
block, so 10⁶+ features never sit in memory) and the indices of the truly relevant
features.  Columns are drawn in fixed groups of :data:`SEED_BLOCK` features, each from its
own seed, so the data do not depend on how the store is chunked.  Write one with
:func:`write_synthetic`.
"""

from __future__ import annotations

import importlib
from typing import Any

from fsdask.datasets._stream import SEED_BLOCK, Synthetic, write_synthetic

# generator name → module (imported on first use)
_GENERATORS = {
    "weston_linear": "fsdask.datasets.weston",
    "weston_nonlinear": "fsdask.datasets.weston",
    "qalpha_clusters": "fsdask.datasets.qalpha_models",
    "qalpha_sessions": "fsdask.datasets.qalpha_models",
    "ben_dor": "fsdask.datasets.qalpha_models",
    "fermat_spiral": "fsdask.datasets.spiral",
    "add_noise_features": "fsdask.datasets.noise",
    "zarkoob_regression": "fsdask.datasets.zarkoob",
    "principal_sources": "fsdask.datasets.principal",
    "load_npz": "fsdask.datasets.shared",
}


def __getattr__(name: str) -> Any:
    if name in _GENERATORS:
        return getattr(importlib.import_module(_GENERATORS[name]), name)
    raise AttributeError(f"module 'fsdask.datasets' has no attribute {name!r}")


__all__ = ["SEED_BLOCK", "Synthetic", "write_synthetic", *_GENERATORS]
