"""Seeded synthetic problems from the papers, streamable to Zarr at any size.

Every generator returns a :class:`Synthetic`: a lazy ``xarray.Dataset`` (X built block by
block, so 10⁶+ features never sit in memory) and the indices of the truly relevant
features.  Columns are drawn in fixed groups of :data:`SEED_BLOCK` features, each from its
own seed, so the data do not depend on how the store is chunked.
"""

from fsdask.datasets._stream import SEED_BLOCK, Synthetic, write_synthetic
from fsdask.datasets.weston import weston_linear

__all__ = ["SEED_BLOCK", "Synthetic", "write_synthetic", "weston_linear"]
