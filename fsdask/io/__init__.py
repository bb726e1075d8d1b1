"""Open, write and ingest fsdask datasets (Zarr v3 through xarray, any fsspec URL).

The doors: :func:`open_dataset` (read anything), :func:`ingest` (convert to an fsdask
store), :func:`write_dataset` (write one); a place is a :class:`~fsdask.io.location.Location`
and the read options travel as one :class:`~fsdask.io.options.ReadOptions`.

Layers (a module imports modules of its own layer or a lower one, never a higher one, and
there is no import circle; this package's ``__init__`` is the face above them all):

======  ============================================================================
layer   modules
======  ============================================================================
0       ``options``, ``secrets``, ``icechunk``, ``location``, ``outputs``, ``scratch``,
        ``guard``, ``blocks`` — read options, credentials, Icechunk repositories,
        places and publishing, scratch folders, guarded reads of stored arrays,
        assembly of feature blocks
1       ``store`` — the fsdask format: write, open, verify, fingerprint
2       ``foreign`` (Zarr other tools wrote), ``anndata`` (the AnnData reader),
        ``rechunk`` (re-blocking a stored matrix)
3       ``open`` (the :func:`open_dataset` dispatcher), ``anndata_write``
        (:func:`~fsdask.io.anndata_write.annotate_anndata`), ``writeback``
        (:func:`~fsdask.io.writeback.write_var`: into an AnnData-on-Zarr store in place)
4       ``ingest`` (the package: ``ingest.build``, ``ingest.files``,
        ``ingest.tables`` and its ``__init__`` dispatching by suffix)
======  ============================================================================

A new kind of source (say, a sparse CSR matrix streamed by sample blocks) is added here
without touching the methods: a reader module at layer 2 implements
:class:`~fsdask.io.blocks.BlockSource` (``shape``, ``dtype``, ``source(j0, j1)`` → the dense
block of features ``[j0, j1)``) and builds its dataset with
:func:`~fsdask.io.blocks.from_source`; :mod:`fsdask.io.open` gets one branch that recognises
it (by object type, suffix or a Zarr attribute), and :mod:`fsdask.io.ingest` one entry if it
is a file format.  The estimators see what they always see — ``X(sample, feature)`` as a
dask array of (all samples × feature block) blocks — and the execution seam decides how
to sweep it.
"""

from fsdask.io.anndata_write import annotate_anndata
from fsdask.io.ingest import ingest
from fsdask.io.location import Location
from fsdask.io.open import open_dataset
from fsdask.io.options import ReadOptions
from fsdask.io.store import (
    dataset_fingerprint,
    describe,
    verify_dataset,
    write_dataset,
)
from fsdask.io.writeback import write_var

__all__ = [
    "open_dataset",
    "write_dataset",
    "ingest",
    "dataset_fingerprint",
    "describe",
    "verify_dataset",
    "annotate_anndata",
    "write_var",
    "Location",
    "ReadOptions",
]
