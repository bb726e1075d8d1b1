"""Write a selection back into AnnData: the one writer for AnnData files and objects.

:func:`annotate_anndata` adds ``var["<key>_selected"]``, ``var["<key>_weight"]``,
``var["<key>_rank"]`` and ``uns["<key>"]`` (provenance; ``key_added``, scanpy's convention,
default ``fsdask``), and nothing else changes.  Columns or an ``uns`` entry of that name
are replaced only with ``overwrite``, so a second selection exported under another key
keeps the first.  A file is never modified in place: a new copy receives the annotation and
is published under the output's name only if nothing is there yet
(:func:`fsdask.io.location.rename_no_replace`), so nothing is ever replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from typing import Any, Iterator

import numpy as np
import pandas as pd
import xarray as xr

from fsdask.errors import InputError, StoreError, import_optional
from fsdask.io.anndata import damaged, is_anndata_group, open_root, read_elem
from fsdask.io.location import LocalLocation, rename_no_replace
from fsdask.io.store import TEST_COLUMNS

#: the default ``key_added``: columns ``fsdask_selected``/``_weight``/``_rank``, ``uns["fsdask"]``
DEFAULT_KEY = "fsdask"
SUFFIXES = ("selected", "weight", "rank")


def column_names(key: str, result: xr.Dataset | None = None) -> list[str]:
    """The ``var`` columns written under ``key``: ``<key>_selected``, ``_weight``, ``_rank``,
    and ``_pvalue``, ``_pvalue_adj``, ``_direction`` for the tests of ``result`` that have them."""
    tests = [] if result is None else [t for t in TEST_COLUMNS if t in result]
    return [f"{key}_{s}" for s in (*SUFFIXES, *tests)]


def owned_columns(var_columns: Any, key: str) -> list[str]:
    """The columns among ``var_columns`` an export under ``key`` writes (any result's): they
    are refused without ``overwrite``, and replaced all together with it, so no column of an
    earlier export stays beside a new selection."""
    mine = {f"{key}_{s}" for s in (*SUFFIXES, *TEST_COLUMNS)}
    return [c for c in var_columns if c in mine]


def check_key(key: Any) -> str:
    """Refuse a ``key_added`` that cannot name ``var`` columns and an ``uns`` entry."""
    if not isinstance(key, str) or not key or "/" in key or key != key.strip():
        raise InputError(
            f"key_added {key!r}: give a non-empty name without '/' or surrounding blanks "
            "(e.g. fsdask_fisher)"
        )
    return key


def feature_positions(result: xr.Dataset, var_names: pd.Index, where: str) -> np.ndarray:
    """The position in ``var_names`` of each feature of ``result``.

    Raises
    ------
    InputError
        When ``var_names`` are not unique, or a feature of the result is not among them
        (the result was computed on other data, or on ``.raw``).
    """
    if not var_names.is_unique:
        dup = var_names[var_names.duplicated()][0]
        raise InputError(
            f"{where}: var_names are not unique (e.g. {dup!r}), so a feature of the result "
            "cannot be placed; make them unique (adata.var_names_make_unique()) and save again"
        )
    feats = pd.Index(np.asarray(result["feature"].values).astype(str))
    pos = pd.Index(var_names.astype(str)).get_indexer(feats)
    if (pos < 0).any():
        missing = feats[pos < 0]
        raise InputError(
            f"{where}: {missing.size} feature(s) of the result are not in var_names (first: "
            f"{list(missing[:3])}); was the result computed on this AnnData (or on its .raw)?"
        )
    return pos


def _columns(result: xr.Dataset, var_names: pd.Index, where: str, key: str) -> pd.DataFrame:
    pos = feature_positions(result, var_names, where)
    p = len(var_names)
    sel = np.zeros(p, dtype=bool)
    w = np.full(p, np.nan)
    r = np.full(p, -1, dtype=np.int64)
    sel[pos] = np.asarray(result["selected"].values, dtype=bool)
    w[pos] = np.asarray(result["weight"].values, dtype=np.float64)
    r[pos] = np.asarray(result["rank"].values, dtype=np.int64)
    values = [sel, w, r]
    for t in (t for t in TEST_COLUMNS if t in result):  # NaN for features the result lacks
        v = np.full(p, np.nan)
        v[pos] = np.asarray(result[t].values, dtype=np.float64)
        values.append(v)
    return pd.DataFrame(dict(zip(column_names(key, result), values)), index=var_names)


def check_free(var_columns: Any, uns_keys: Any, key: str, where: str, overwrite: bool) -> None:
    """Refuse to replace existing ``var`` columns or an ``uns`` entry of ``key`` without ``overwrite``."""
    taken = owned_columns(var_columns, key)
    taken += [f"uns[{key!r}]"] if key in set(uns_keys) else []
    if taken and not overwrite:
        raise StoreError(
            f"{where}: already has {', '.join(taken)} (an earlier export?); give --key-added "
            f"NAME (API: key_added=) to keep both selections, or --overwrite to replace them"
        )


def _provenance(result: xr.Dataset) -> dict:
    """The result's attributes as strings/numbers (what h5ad/zarr attributes can hold)."""
    out = {}
    for k, v in result.attrs.items():
        out[k] = v if isinstance(v, (str, int, float, bool)) else json.dumps(v, default=str)
    out["n_selected"] = int(np.asarray(result["selected"].values).sum())
    return out


def annotate_anndata(
    result: xr.Dataset,
    adata_or_path: Any,
    out: str | os.PathLike | None = None,
    *,
    key_added: str = DEFAULT_KEY,
    overwrite: bool = False,
) -> Any:
    """Add ``var["<key>_selected"/"<key>_weight"/"<key>_rank"]`` and ``uns["<key>"]``.

    Parameters
    ----------
    result : xarray.Dataset
        A result (``weight``, ``rank``, ``selected`` over ``feature``).
    adata_or_path : AnnData or path
        An in-memory ``AnnData`` (annotated in place and returned) or an ``.h5ad`` file /
        AnnData Zarr store (never modified: ``out`` receives an annotated copy).
    out : path, optional
        Where the copy goes; it must not exist.
    key_added : str
        The prefix of the ``var`` columns and the ``uns`` key (scanpy's ``key_added``).
    overwrite : bool
        Replace columns / an ``uns`` entry of ``key_added`` that the AnnData already has
        (refused otherwise).

    Returns
    -------
    AnnData or str
        The annotated object, or ``out``.  Features of the AnnData absent from the result
        get selected False, weight NaN, rank -1.  Memory: ``var`` and one copy of the
        result's vectors; the matrix is copied file to file, never loaded.

    Examples
    --------
    >>> import anndata as ad
    >>> import numpy as np
    >>> import fsdask
    >>> adata = ad.AnnData(np.random.default_rng(0).normal(size=(20, 30)).astype("float32"))
    >>> sel = fsdask.Filter(statistic="variance", n_features_to_select=5)
    >>> sel = sel.fit(fsdask.open_dataset(adata))
    >>> adata = fsdask.annotate_anndata(sel.result_, adata)
    >>> list(adata.var.columns), int(adata.var["fsdask_selected"].sum())
    (['fsdask_selected', 'fsdask_weight', 'fsdask_rank'], 5)
    """
    key = check_key(key_added)
    if not isinstance(adata_or_path, (str, os.PathLike)):
        a = adata_or_path
        check_free(a.var.columns, a.uns.keys(), key, "in-memory AnnData", overwrite)
        cols = _columns(result, a.var_names, "in-memory AnnData", key)
        a.var.drop(columns=owned_columns(a.var.columns, key), inplace=True)
        for c in cols:
            a.var[c] = cols[c].to_numpy()
        a.uns[key] = _provenance(result)
        return a
    if out is None:
        raise InputError(
            f"{adata_or_path}: annotating a file needs an output path (out=…); the input is "
            "never modified"
        )
    return _annotate_file(result, os.fspath(adata_or_path), os.fspath(out), key, overwrite)


def _check_paths(src: str, out: str) -> None:
    if not os.path.exists(src):
        raise InputError(
            f"{src}: no such file or store; give the .h5ad (or AnnData .zarr) the result was "
            "computed on"
        )
    if os.path.lexists(out):
        raise StoreError(
            f"{out} already exists; choose another output path (fsdask never overwrites "
            "what it did not write)"
        )
    if LocalLocation(out).overlaps(LocalLocation(src)):
        raise StoreError(
            f"{out}: this is inside the input {src}; writing there would change the input — "
            "choose a path outside it"
        )
    LocalLocation(out).check_writable()


def read_var(src: str, hdf5: bool) -> tuple[pd.DataFrame, list]:
    """``var`` and the ``uns`` keys of the input, read-only (a damaged file is refused here)."""
    try:
        root = open_root(src, None, hdf5)
    except Exception as exc:
        raise InputError(damaged(src, exc, hdf5)) from None
    try:
        if not is_anndata_group(root):
            raise InputError(f"{src}: not an AnnData file (no encoding-type 'anndata')")
        return read_elem()(root["var"]), list(root["uns"].keys()) if "uns" in root else []
    except InputError:
        raise
    except Exception as exc:
        raise InputError(damaged(src, exc, hdf5)) from None
    finally:
        if hdf5:
            root.close()


def _annotate_file(result: xr.Dataset, src: str, out: str, key: str, overwrite: bool) -> str:
    _check_paths(src, out)
    hdf5 = os.path.isfile(src)
    var, uns_keys = read_var(src, hdf5)
    check_free(var.columns, uns_keys, key, src, overwrite)
    cols = _columns(result, var.index, src, key)
    var = var.drop(columns=owned_columns(var.columns, key))
    for c in cols:
        var[c] = cols[c].to_numpy()
    return publish_copy(src, out, var, key, _provenance(result))


def publish_copy(src: str, out: str, var: pd.DataFrame, key: str, value: Any) -> str:
    """Copy the local AnnData ``src`` to a new ``out`` whose ``var`` is ``var`` and whose
    ``uns[key]`` is ``value``; ``src`` is never modified, an existing ``out`` never replaced.

    Parameters
    ----------
    src, out : str
        The local ``.h5ad`` file or AnnData Zarr store, and the path of the copy (checked
        again here: it must not exist).
    var : pandas.DataFrame
        The whole new ``var`` frame.
    key, value
        The ``uns`` entry written (a dict becomes a group).

    Returns
    -------
    str
        ``out``.
    """
    _check_paths(src, out)
    hdf5 = os.path.isfile(src)
    with _new_parents(out):
        tmp = os.path.join(
            os.path.dirname(os.path.abspath(out)),
            f".{os.path.basename(out)}.tmp-{uuid.uuid4().hex[:8]}",
        )
        try:
            try:
                (shutil.copyfile if hdf5 else shutil.copytree)(src, tmp)
                _rewrite(tmp, hdf5, var, key, value)
            except OSError as exc:
                raise StoreError(
                    f"{out}: could not write the copy ({type(exc).__name__}: "
                    f"{exc.strerror or exc}); check the free space and the permissions of "
                    "the folder, or choose another path"
                ) from None
            try:
                rename_no_replace(tmp, out)
            except FileExistsError:
                raise StoreError(
                    f"{out} appeared while the copy was written; it is left as it is — "
                    "choose another output path"
                ) from None
        finally:
            if os.path.lexists(tmp):
                (os.remove if hdf5 else shutil.rmtree)(tmp)
    return out


def _rewrite(tmp: str, hdf5: bool, var: pd.DataFrame, key: str, prov) -> None:
    """Write ``var`` and ``uns[key]`` into the copy at ``tmp``."""
    write_elem = _write_elem()
    if hdf5:
        h5py = import_optional("h5py", "h5ad", "writing an .h5ad file")
        with h5py.File(tmp, "r+") as root:
            write_elem(root, "var", var)
            uns = root["uns"] if "uns" in root else root.create_group("uns")
            write_elem(uns, key, prov)
        return
    import zarr

    consolidated = zarr.open_group(tmp, mode="r").metadata.consolidated_metadata is not None
    root = zarr.open_group(tmp, mode="r+", use_consolidated=False)  # edited, then re-consolidated
    write_elem(root, "var", var)
    uns = root["uns"] if "uns" in root else root.create_group("uns")
    write_elem(uns, key, prov)
    if consolidated:
        zarr.consolidate_metadata(tmp)


@contextlib.contextmanager
def _new_parents(out: str) -> Iterator[None]:
    """Create the missing folders above ``out``; remove them again if the block fails."""
    made, parent = [], os.path.dirname(os.path.abspath(out))
    while not os.path.exists(parent):
        made.append(parent)
        parent = os.path.dirname(parent)
    try:
        for d in reversed(made):
            os.mkdir(d)
    except OSError as exc:
        _remove_dirs(made)
        raise StoreError(
            f"{out}: cannot create the folder ({exc.strerror or exc}); check the path"
        ) from None
    try:
        yield
    except BaseException:
        _remove_dirs(made)
        raise


def _remove_dirs(made: list[str]) -> None:
    for d in made:  # deepest first; only empty folders this call made
        with contextlib.suppress(OSError):
            os.rmdir(d)


def _write_elem():
    anndata = import_optional("anndata", "h5ad", "writing AnnData")

    io = getattr(anndata, "io", None)
    return getattr(io, "write_elem", None) or anndata.experimental.write_elem
