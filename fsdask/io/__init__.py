"""Open, write and ingest fsdask datasets (Zarr v3 through xarray, any fsspec URL)."""

from fsdask.io.store import open_dataset, write_dataset, dataset_fingerprint, describe, verify_dataset
from fsdask.io.ingest import ingest

__all__ = ["open_dataset", "write_dataset", "ingest", "dataset_fingerprint", "describe", "verify_dataset"]
