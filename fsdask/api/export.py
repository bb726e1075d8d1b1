"""``export``: write a selection back into AnnData."""

from __future__ import annotations

import sys
from typing import Any, Mapping

from fsdask.api.spec import command


@command(outputs=("output",), inputs=("result", "anndata"))
def export(
    result: str,
    *,
    anndata: str,
    output: str,
    storage_options: Mapping[str, Any] | None = None,
    stdout=None,
) -> str:
    """Write ``result``'s selection into a copy of ``anndata`` at ``output``; return ``output``.

    Parameters
    ----------
    result : str
        A result written by ``select``.
    anndata : str
        The ``.h5ad`` file (or AnnData ``.zarr``) the result was computed on.
    output : str
        The new ``.h5ad`` / ``.zarr`` to write; it must not exist.
    storage_options : mapping, optional
        fsspec storage options of ``result``.
    stdout : file, optional
        Where to print (default: ``sys.stdout``).

    Returns
    -------
    str
        The path written.
    """
    import os

    from fsdask.errors import StoreError
    from fsdask.io.anndata_write import annotate_anndata
    from fsdask.results import open_result

    if os.path.exists(output):  # checked before anything is read
        raise StoreError(
            f"{output} already exists; choose another output path (fsdask never overwrites "
            "what it did not write)"
        )
    res = open_result(result, storage_options=dict(storage_options or {}))
    out = annotate_anndata(res, anndata, out=output)
    print(
        f"{out}: {anndata} with var['fsdask_selected'] ({int(res['selected'].values.sum())} selected), "
        "var['fsdask_weight'], var['fsdask_rank'] and uns['fsdask'] added",
        file=stdout or sys.stdout,
    )
    return out
