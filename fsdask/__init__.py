"""fsdask — out-of-core, distributed feature selection on chunked Zarr data with Dask.

Quick start::

    import fsdask
    fsdask.ingest("leukemia_golub.npz", "golub.zarr")
    ds = fsdask.open_dataset("golub.zarr")
    sel = fsdask.Filter(statistic="ttest", n_features_to_select=50).fit(ds)
    sel.result_            # xarray.Dataset: weight, rank, selected over feature

Where things are: the estimators derive from :class:`fsdask.base.Selector`, which hands each
fit one :class:`fsdask.fitting.FitContext` (budget, passes, checkpointed loops, warnings);
each paper is a package of :mod:`fsdask.methods` (core functions + a thin estimator); data
go in and out through :mod:`fsdask.io` (a :class:`~fsdask.io.location.Location` per place,
one :class:`~fsdask.io.options.ReadOptions` per read); where and how arrays are computed is
decided in :mod:`fsdask.linalg.execution` and :mod:`fsdask.linalg.threads`; the commands are
functions in :mod:`fsdask.api`, run by :mod:`fsdask.pipeline` and :mod:`fsdask.cli`.
"""

from __future__ import annotations

import importlib
from typing import Any

import fsdask._config  # noqa: E402,F401  (dask config defaults: fsdask.memory-budget)
from fsdask.version import VERSION as __version__  # noqa: E402

# every public name is imported on first use, so `import fsdask` (and `fsdask --version`)
# loads neither scikit-learn nor xarray, and a method's optional dependencies load only when
# it is used
_LAZY = {
    "FsdaskError": "fsdask.errors",
    "InputError": "fsdask.errors",
    "ParameterError": "fsdask.errors",
    "StoreError": "fsdask.errors",
    "ingest": "fsdask.io",
    "open_dataset": "fsdask.io",
    "write_dataset": "fsdask.io",
    "write_var": "fsdask.io.writeback",
    "available_methods": "fsdask.methods",
    "get_method": "fsdask.methods",
    "open_result": "fsdask.results",
    "write_result": "fsdask.results",
    "Filter": "fsdask.methods.filters",
    "QAlpha": "fsdask.methods.qalpha",
    "Logo": "fsdask.methods.logo",
    "SparseHSIC": "fsdask.methods.hsic",
    "CPFS": "fsdask.methods.cpfs",
    "cpfs_path": "fsdask.methods.cpfs",
    "JolliffeI": "fsdask.methods.pca_based",
    "JolliffeNI": "fsdask.methods.pca_based",
    "PFA": "fsdask.methods.pca_based",
    "SparsePCASelector": "fsdask.methods.pca_based",
    "LaplacianScore": "fsdask.methods.filters",
    "annotate_anndata": "fsdask.io.anndata_write",
    "Stability": "fsdask.stability",
    "FDR": "fsdask.stability",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    raise AttributeError(f"module 'fsdask' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["__version__", *_LAZY]
