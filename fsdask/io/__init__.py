"""Open, write and ingest fsdask datasets (Zarr v3 through xarray, any fsspec URL)."""

from fsdask.io.ingest import ingest
from fsdask.io.store import (
    dataset_fingerprint,
    describe,
    open_dataset,
    verify_dataset,
    write_dataset,
)

__all__ = [
    "open_dataset",
    "write_dataset",
    "ingest",
    "dataset_fingerprint",
    "describe",
    "verify_dataset",
]
