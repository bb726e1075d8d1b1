"""``info``: shape, chunking, dtype and label summary of a dataset (or the top of a result)."""

from __future__ import annotations

import json
import sys
from typing import Any, Mapping

from fsdask.api.common import check_count
from fsdask.api.spec import DATA_READS, command
from fsdask.io.options import ReadOptions


@command(inputs=("url",), reads=DATA_READS)
def info(
    url: str,
    *,
    top: int = 10,
    read: ReadOptions | None = None,
    storage_options: Mapping[str, Any] | None = None,
    as_json: bool = False,
    stdout=None,
) -> None:
    """Print a summary of the dataset or result at ``url``.

    Parameters
    ----------
    url : str
        A dataset (any store :func:`fsdask.open_dataset` reads) or a result.
    top : int
        For a result: how many top features to list.
    read : ReadOptions, optional
        How to read a dataset other tools wrote.
    storage_options : mapping, optional
        fsspec storage options.
    as_json : bool
        Print one JSON object (:func:`dataset_record` or :func:`result_record`) instead.
    stdout : file, optional
        Where to print (default: ``sys.stdout``).
    """
    from fsdask.errors import StoreError
    from fsdask.io import open_dataset
    from fsdask.io.store import describe, safe_url
    from fsdask.results import open_result, top_table

    stdout = stdout or sys.stdout
    so = dict(storage_options or {})
    check_count(top, "--top")
    try:
        ds = open_dataset(
            url, storage_options=so, describe_only=True, **(read or ReadOptions()).as_dict()
        )
    except StoreError as exc:
        if "no variable 'X'" not in str(exc):
            raise
        res = open_result(url, storage_options=so)
        if as_json:
            print(json.dumps(result_record(res, safe_url(url), top)), file=stdout)
            return
        print(
            f"result    {safe_url(url)}\nmethod    {res.attrs.get('method')}  "
            f"({res.attrs.get('n_selected')} of {res.attrs.get('n_features')} selected)",
            file=stdout,
        )
        for r, f, w, s in top_table(res, top):
            print(f"{r:>6}  {f:<30} {w:.6g}{'  *' if s else ''}", file=stdout)
        return
    if as_json:
        print(json.dumps(dataset_record(ds, safe_url(url))), file=stdout)
        return
    print(describe(ds, safe_url(url)), file=stdout)


def result_record(res, url: str, top: int) -> dict[str, Any]:
    """What ``fsdask info RESULT --json`` prints.

    Parameters
    ----------
    res : xarray.Dataset
        A result (:func:`fsdask.results.open_result`).
    url : str
        Its location as shown (credentials removed).
    top : int
        How many top features to list.

    Returns
    -------
    dict
        ``kind`` ("result"), ``url``, ``method``, ``n_features``, ``n_selected``, ``attrs``
        and ``top`` (:func:`fsdask.results.top_records`).
    """
    from fsdask.results import jsonable_attrs, top_records

    return {
        "kind": "result",
        "url": url,
        "method": res.attrs.get("method"),
        "n_features": int(res.sizes["feature"]),
        "n_selected": int(res["selected"].sum()),
        "attrs": jsonable_attrs(res.attrs),
        "top": top_records(res, top),
    }


def dataset_record(ds, url: str) -> dict[str, Any]:
    """What ``fsdask info DATASET --json`` prints.

    Parameters
    ----------
    ds : xarray.Dataset
        An fsdask dataset (:func:`fsdask.open_dataset`); only ``y`` is read.
    url : str
        Its location as shown (credentials removed).

    Returns
    -------
    dict
        ``kind`` ("dataset"), ``url``, ``n_samples``, ``n_features``, ``dtype``,
        ``feature_chunks`` (the block widths), ``labels`` (None, ``{"classes": {label:
        count}}`` or ``{"continuous": {"mean", "sd"}}``) and ``attrs``.
    """
    import numpy as np

    from fsdask.results import jsonable_attrs

    X = ds["X"]
    n, p = (int(v) for v in X.shape)
    chunks = X.chunks[X.dims.index("feature")] if X.chunks else (p,)
    labels = None
    if "y" in ds:
        y = np.asarray(ds["y"].values)
        if y.dtype.kind in "iubOUT":
            vals, counts = np.unique(
                y.astype(str) if y.dtype.kind in "OUT" else y, return_counts=True
            )
            names = ds.attrs.get("class_names")
            shown = [
                names[int(v)]
                if names is not None and y.dtype.kind in "iu" and 0 <= v < len(names)
                else v
                for v in vals
            ]
            labels = {"classes": {str(k): int(c) for k, c in zip(shown, counts)}}
        else:
            labels = {"continuous": {"mean": float(np.nanmean(y)), "sd": float(np.nanstd(y))}}
    return {
        "kind": "dataset",
        "url": url,
        "n_samples": n,
        "n_features": p,
        "dtype": str(X.dtype),
        "feature_chunks": [int(c) for c in chunks],
        "labels": labels,
        "attrs": jsonable_attrs(ds.attrs),
    }
