"""Write a selection back into AnnData: the one writer for AnnData files and objects.

:func:`annotate_anndata` adds ``var["fsdask_selected"]``, ``var["fsdask_weight"]``,
``var["fsdask_rank"]`` and ``uns["fsdask"]`` (provenance), and nothing else changes; a file
is never modified in place (a new copy receives the annotation).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from fsdask.errors import InputError, StoreError
from fsdask.io.anndata import is_anndata_group, read_elem


def _columns(result: xr.Dataset, var_names: pd.Index, where: str) -> pd.DataFrame:
    feats = pd.Index(np.asarray(result["feature"].values).astype(str))
    pos = pd.Index(var_names.astype(str)).get_indexer(feats)
    if (pos < 0).any():
        missing = feats[pos < 0]
        raise InputError(
            f"{where}: {missing.size} feature(s) of the result are not in var_names (first: "
            f"{list(missing[:3])}); was the result computed on this AnnData (or on its .raw)?"
        )
    p = len(var_names)
    sel = np.zeros(p, dtype=bool)
    w = np.full(p, np.nan)
    r = np.full(p, -1, dtype=np.int64)
    sel[pos] = np.asarray(result["selected"].values, dtype=bool)
    w[pos] = np.asarray(result["weight"].values, dtype=np.float64)
    r[pos] = np.asarray(result["rank"].values, dtype=np.int64)
    return pd.DataFrame(
        {"fsdask_selected": sel, "fsdask_weight": w, "fsdask_rank": r}, index=var_names
    )


def _provenance(result: xr.Dataset) -> dict:
    """The result's attributes as strings/numbers (what h5ad/zarr attributes can hold)."""
    out = {}
    for k, v in result.attrs.items():
        out[k] = v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str)
    out["n_selected"] = int(np.asarray(result["selected"].values).sum())
    return out


def annotate_anndata(
    result: xr.Dataset, adata_or_path: Any, out: str | os.PathLike | None = None
) -> Any:
    """Add ``var["fsdask_selected"/"fsdask_weight"/"fsdask_rank"]`` and ``uns["fsdask"]``.

    An in-memory ``AnnData`` is annotated in place and returned.  A path (``.h5ad`` or
    AnnData Zarr) is never modified: ``out`` (which must not exist) receives a copy whose
    ``var`` and ``uns/fsdask`` are rewritten and every other byte is the input's.  Features
    of the AnnData absent from the result get selected False, weight NaN, rank -1.
    """
    if not isinstance(adata_or_path, (str, os.PathLike)):
        cols = _columns(result, adata_or_path.var_names, "in-memory AnnData")
        for c in cols:
            adata_or_path.var[c] = cols[c].to_numpy()
        adata_or_path.uns["fsdask"] = _provenance(result)
        return adata_or_path
    if out is None:
        raise InputError(
            f"{adata_or_path}: annotating a file needs an output path (out=…); the input is "
            "never modified"
        )
    return _annotate_file(result, os.fspath(adata_or_path), os.fspath(out))


def _annotate_file(result: xr.Dataset, src: str, out: str) -> str:
    if not os.path.exists(src):
        raise InputError(
            f"{src}: no such file or store; give the .h5ad (or AnnData .zarr) the result was "
            "computed on"
        )
    if os.path.exists(out):
        raise StoreError(
            f"{out} already exists; choose another output path (fsdask never overwrites "
            "what it did not write)"
        )
    hdf5 = os.path.isfile(src)
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(out)),
        f".{os.path.basename(out)}.tmp-{uuid.uuid4().hex[:8]}",
    )
    write_elem = _write_elem()
    try:
        (shutil.copyfile if hdf5 else shutil.copytree)(src, tmp)
        if hdf5:
            import h5py

            root = h5py.File(tmp, "r+")
        else:
            import zarr

            consolidated = zarr.open_group(tmp, mode="r").metadata.consolidated_metadata is not None
            root = zarr.open_group(
                tmp, mode="r+", use_consolidated=False
            )  # edited, then re-consolidated
        try:
            if not is_anndata_group(root):
                raise InputError(f"{src}: not an AnnData file (no encoding-type 'anndata')")
            var = read_elem()(root["var"])
            cols = _columns(result, var.index, src)
            for c in cols:
                var[c] = cols[c].to_numpy()
            write_elem(root, "var", var)
            uns = root["uns"] if "uns" in root else root.create_group("uns")
            write_elem(uns, "fsdask", _provenance(result))
        finally:
            if hdf5:
                root.close()
        if not hdf5 and consolidated:
            zarr.consolidate_metadata(tmp)
        os.rename(tmp, out)
    finally:
        if os.path.exists(tmp):
            (os.remove if hdf5 else shutil.rmtree)(tmp)
    return out


def _write_elem():
    import anndata

    io = getattr(anndata, "io", None)
    return getattr(io, "write_elem", None) or anndata.experimental.write_elem
