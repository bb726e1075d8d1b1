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
    key_added: str = "fsdask",
    overwrite: bool = False,
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
        The new ``.h5ad`` / ``.zarr`` to write; it must not exist (it is never replaced).
    key_added : str
        Names of what is added (scanpy's convention): ``var["<key>_selected"]``,
        ``var["<key>_weight"]``, ``var["<key>_rank"]`` and ``uns["<key>"]``.
    overwrite : bool
        Replace columns / an ``uns`` entry of that name that ``anndata`` already has
        (refused otherwise, so a second selection does not silently replace the first).
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
    from fsdask.io.anndata_write import annotate_anndata, check_key, column_names
    from fsdask.results import open_result

    key = check_key(key_added)
    if os.path.lexists(output):  # checked before anything is read
        raise StoreError(
            f"{output} already exists; choose another output path (fsdask never overwrites "
            "what it did not write)"
        )
    res = open_result(result, storage_options=dict(storage_options or {}))
    out = annotate_anndata(res, anndata, out=output, key_added=key, overwrite=overwrite)
    sel, weight, rank = (f"var[{c!r}]" for c in column_names(key))
    print(
        f"{out}: {anndata} with {sel} ({int(res['selected'].values.sum())} selected), "
        f"{weight}, {rank} and uns[{key!r}] added",
        file=stdout or sys.stdout,
    )
    return out
