"""Write a selection into an AnnData-on-Zarr store in place: new ``var`` columns, one ``uns`` entry.

:func:`write_var` adds ``var["<prefix>_<method>_score"]``, ``_rank``, ``_selected`` (and
``_pvalue``, ``_pvalue_adj`` when the result has them; one set per group,
``<prefix>_<method>_<group>_score``…, when the result has a ``group`` dimension) and the
provenance entry ``uns["<prefix>"]["<method>"]`` (method, parameters, fsdask version, input
fingerprint, creation time, the columns written).  Nothing else in the store changes:
existing columns are refused unless ``overwrite`` names them, and a store that cannot be
verified as AnnData (root ``encoding-type: anndata``, ``var`` a dataframe as long as ``X``
is wide) is not touched at all.

Why a crash leaves the store as it was: anndata's zarr dataframe spec makes a column exist
only through the ``column-order`` attribute of ``var`` (every reader, eager or lazy, reads
the columns listed there), and zarr lists a child only once its metadata document exists.
So the new column arrays are written first under their final names (unlisted: invisible),
the ``uns`` entry is written with its top metadata document last (invisible until then),
then ``var``'s attributes are rewritten with the new ``column-order`` — one object, the
switch for readers that list the store — and last the consolidated metadata (one object,
the switch for readers that use it, as ``anndata.read_zarr`` and scanpy do).  Each switch is
one object written whole: a rename of a temporary file locally, one PUT on object storage,
so no step needs a rename of a folder.  Replacing columns (``overwrite``) first withdraws
the old ones from ``column-order`` (and the consolidated metadata) in the same way, then
adds the new ones: a crash in between leaves a valid store without them, never
half-written columns.  Arrays a killed write-back left unlisted carry the attribute
:data:`TAG` and are replaced by the next write; unlisted data without it are refused.
An ``.h5ad`` file is never modified in place: give ``out`` and a copy receives the columns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import uuid
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import xarray as xr

from fsdask.errors import FsdaskError, InputError, ParameterError, StoreError, import_optional
from fsdask.io.anndata import encoding_type, open_root, read_elem
from fsdask.io.anndata_write import feature_positions, publish_copy, read_var
from fsdask.io.location import Location

PREFIX = "fsdask"
#: result variable → column suffix
SUFFIXES = {
    "weight": "score",
    "rank": "rank",
    "selected": "selected",
    "pvalue": "pvalue",
    "pvalue_adj": "pvalue_adj",
}
#: the attribute on every column array fsdask writes (value ``"<prefix>/<method>"``): an
#: unlisted array carrying it is a leftover of an interrupted write, replaced by the next one
TAG = "fsdask-write-var"
#: the metadata documents of a zarr node, by format
METADATA = {2: (".zattrs", ".zarray", ".zgroup"), 3: ("zarr.json",)}


def write_var(
    store: str | os.PathLike,
    result: Any,
    *,
    overwrite: Iterable[str] | bool | str = (),
    storage_options: Mapping[str, Any] | None = None,
    out: str | os.PathLike | None = None,
    prefix: str = PREFIX,
) -> list[str]:
    """Add a selection's ``var`` columns and ``uns`` provenance to an AnnData store in place.

    Parameters
    ----------
    store : str or path
        An AnnData-on-Zarr store (local path or URL such as ``s3://bucket/atlas.zarr``), or,
        with ``out``, a local ``.h5ad`` file or Zarr store to copy.
    result : xarray.Dataset or fitted selector
        A result (``weight``, ``rank``, ``selected`` over ``feature``; per-group variables
        over ``group`` too), e.g. :func:`fsdask.open_result`'s, or a fitted selector.
    overwrite : iterable of str, True or "all"
        Existing columns (or the entry ``uns/<prefix>/<method>``) that may be replaced; True
        or ``"all"``: everything this write adds.  Others are refused.
    storage_options : mapping, optional
        fsspec options of ``store`` (credentials, ``endpoint_url``).
    out : str or path, optional
        Write a copy there instead (required for an ``.h5ad``, which is never modified in
        place); it must not exist.
    prefix : str
        First part of the column names and the ``uns`` key.

    Returns
    -------
    list of str
        The columns written.  Memory: ``var`` and the result's vectors; ``X`` is not read.

    Examples
    --------
    A small AnnData-on-Zarr store written by anndata, then annotated in place:

    >>> import anndata as ad, numpy as np, pandas as pd, fsdask
    >>> rng = np.random.default_rng(0)
    >>> cells = pd.DataFrame({"cell_type": np.repeat(["a", "b"], 30)},
    ...                      index=[f"c{i}" for i in range(60)])
    >>> counts = rng.poisson(1.0, (60, 20)).astype("float32")
    >>> ad.AnnData(counts, obs=cells).write_zarr("atlas.zarr")
    >>> ds = fsdask.open_dataset("atlas.zarr", label="obs:cell_type")
    >>> sel = fsdask.Filter(statistic="ttest", n_features_to_select=5).fit(ds)
    >>> fsdask.write_var("atlas.zarr", sel)[:3]
    ['fsdask_ttest_score', 'fsdask_ttest_rank', 'fsdask_ttest_selected']
    >>> int(ad.read_zarr("atlas.zarr").var["fsdask_ttest_selected"].sum())
    5
    """
    res = as_result(result)
    method = safe_name(str(res.attrs.get("method", "")), "the result's method")
    prefix = safe_name(prefix, "prefix")
    loc = Location.of(store, storage_options)
    if out is not None:
        return _write_copy(loc, os.fspath(out), res, method, prefix, overwrite)
    if loc.is_local and os.path.isfile(loc.target):
        raise InputError(_h5ad_message(loc.shown))
    ann = ZarrAnnData.open(loc)
    cols = var_columns(res, ann.var_names(), method=method, prefix=prefix, where=loc.shown)
    plan = ann.plan(cols, named(overwrite, cols, f"uns/{prefix}/{method}"), method, prefix)
    plan.provenance = provenance(res, cols, ann.fingerprint(), loc.shown)
    objects = stage(ann.fmt, cols, plan, f"{prefix}/{method}")
    try:
        ann.commit(plan, objects)
    except FsdaskError:
        raise
    except Exception as exc:
        raise StoreError(f"{loc.shown}: {_failed(ann, plan, exc)}") from None
    return list(cols.columns)


def _failed(ann: ZarrAnnData, plan: Plan, exc: Exception) -> str:
    """What a write-back that failed left (its unlisted objects removed if possible)."""
    msg = (str(exc).splitlines() or [""])[0][:200]
    why = f"writing the var columns failed ({type(exc).__name__}: {msg})"
    if ann.step == "switch":
        return (
            f"{why} after they were listed; readers of the consolidated metadata (anndata) "
            "do not see them yet — run the same command again to finish"
        )
    withdrawn = ann.step == "withdrawn"  # only then are the replaced columns unlisted
    nodes = [f"var/{c}" for c in plan.new if withdrawn or c not in plan.withdraw]
    if withdrawn or not plan.entry_shown:
        nodes.append(plan.entry if plan.parent_shown else plan.entry.rsplit("/", 1)[0])
    with contextlib.suppress(Exception):  # unlisted, so invisible; the next run replaces them
        for node in nodes:
            ann.remove(node)
    left = "as it was, or without the replaced columns" if plan.withdraw else "as it was"
    return f"{why}; readers see the store {left} — fix the cause and run again"


def check_write_var(
    store: str | os.PathLike,
    method: str,
    *,
    overwrite: Iterable[str] | bool | str = (),
    storage_options: Mapping[str, Any] | None = None,
    prefix: str = PREFIX,
    variable: str | None = None,
) -> None:
    """Refuse, before a fit, a :func:`write_var` into ``store`` that would fail.

    The store must be an AnnData-on-Zarr store fsdask can verify and write, and hold no
    column ``<prefix>_<method>_…`` that ``overwrite`` does not name.

    Parameters
    ----------
    store, overwrite, storage_options, prefix
        As for :func:`write_var`.
    method : str
        The method's name (the estimator's ``method_name``).
    variable : str, optional
        The matrix the fit reads (``X``, ``layers/NAME``; ``raw`` is refused: its genes are
        not ``var``'s).
    """
    loc = Location.of(store, storage_options)
    if loc.is_local and os.path.isfile(loc.target):
        raise InputError(_h5ad_message(loc.shown))
    if (variable or "X").strip("/") in ("raw", "raw/X"):
        raise InputError(
            f"{loc.shown}: --write-var writes var columns, and a selection on .raw's genes "
            "does not match var; write it into a copy with `fsdask export` instead"
        )
    ann = ZarrAnnData.open(loc)
    start = f"{safe_name(prefix, 'prefix')}_{safe_name(method, 'method')}_"
    names = {overwrite} if isinstance(overwrite, (str, bool)) else set(overwrite or ())
    allowed = True in names or "all" in names
    taken = [c for c in ann.order() if c.startswith(start) and not allowed and c not in names]
    if taken:
        raise StoreError(_taken_message(loc.shown, taken))


def as_result(result: Any) -> xr.Dataset:
    """The result dataset of ``result`` (a dataset or a fitted selector)."""
    if isinstance(result, xr.Dataset):
        return result
    res = getattr(result, "result_", None)
    if not isinstance(res, xr.Dataset):
        raise ParameterError(
            f"write_var: got {type(result).__name__}; give a fitted selector or its result_ "
            "(a result store: fsdask.open_result(path))"
        )
    return res


def safe_name(name: str, what: str) -> str:
    """``name`` as part of a column name: '/' (a path in Zarr) becomes '_'; empty refused."""
    clean = str(name).strip().replace("/", "_")
    if not clean or clean.startswith("."):
        raise InputError(f"{what} {name!r} cannot name a var column; give a non-empty name")
    return clean


def group_labels(result: xr.Dataset) -> list[str]:
    """The names of the result's groups as they appear in column names ([] without groups)."""
    if "group" not in result.dims:
        return []
    raw = result["group"].values if "group" in result.coords else range(result.sizes["group"])
    labels = [safe_name(str(g), "group") for g in raw]
    if len(set(labels)) != len(labels):
        raise InputError(
            f"the result's groups {list(map(str, raw))} give equal column names once '/' is "
            "replaced by '_'; rename the groups (the obs categories) so they differ"
        )
    return labels


def var_columns(
    result: xr.Dataset, var_names: pd.Index, *, method: str, prefix: str = PREFIX, where: str = ""
) -> pd.DataFrame:
    """The ``var`` columns of ``result``, indexed like ``var_names``.

    ``<prefix>_<method>_<suffix>`` from the variables over ``feature`` (:data:`SUFFIXES`),
    and ``<prefix>_<method>_<group>_<suffix>`` from those over ``group`` and ``feature``
    (``group_score``, ``group_rank``… as one-vs-rest filters name them, or the same names
    as above with a ``group`` dimension).  Features of ``var`` absent from the result get
    score NaN, rank -1, selected False.

    Parameters
    ----------
    result : xarray.Dataset
    var_names : pandas.Index
    method, prefix : str
    where : str
        The store, for messages.

    Returns
    -------
    pandas.DataFrame
    """
    pos = feature_positions(result, var_names, where)
    groups, cols, p = group_labels(result), {}, len(var_names)
    for var, suffix in SUFFIXES.items():
        if var in result and result[var].dims == ("feature",):
            cols[f"{prefix}_{method}_{suffix}"] = _spread(result[var].values, pos, p, suffix)
    for var, suffix in SUFFIXES.items():
        per_group = next(
            (v for v in (f"group_{suffix}", var) if v in result and "group" in result[v].dims),
            None,
        )
        if per_group is None:
            continue
        rows = result[per_group].transpose("group", "feature").values
        for label, row in zip(groups, rows):
            cols[f"{prefix}_{method}_{label}_{suffix}"] = _spread(row, pos, p, suffix)
    return pd.DataFrame(cols, index=var_names)


def _spread(values: np.ndarray, pos: np.ndarray, p: int, suffix: str) -> np.ndarray:
    if suffix == "selected":
        out = np.zeros(p, dtype=bool)
    elif suffix == "rank":
        out = np.full(p, -1, dtype=np.int64)
    else:
        out = np.full(p, np.nan)
    out[pos] = np.asarray(values).astype(out.dtype)
    return out


def named(overwrite: Iterable[str] | bool | str, cols: pd.DataFrame, entry: str) -> set[str]:
    """The names ``overwrite`` allows to replace; a name this write does not add is refused."""
    if overwrite is False or overwrite is None:
        return set()
    names = {overwrite} if isinstance(overwrite, (str, bool)) else set(overwrite)
    if True in names or "all" in names:
        return {*cols.columns, entry}
    unknown = sorted(names - {*cols.columns, entry})
    if unknown:
        raise ParameterError(
            f"--overwrite-var {unknown[0]}: not something this write adds (it adds "
            f"{', '.join(cols.columns)} and {entry}); name those, or 'all'"
        )
    return names


def provenance(result: xr.Dataset, cols: pd.DataFrame, fingerprint: str, where: str) -> dict:
    """The ``uns`` entry: what was run, on what, when, and which columns it wrote."""
    from fsdask.version import current

    params = result.attrs.get("parameters", {})
    prov = {
        "method": str(result.attrs.get("method", "")),
        "parameters": params if isinstance(params, str) else json.dumps(params, default=str),
        "fsdask_version": current(),
        "input": where,
        "input_fingerprint": fingerprint,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "result_created": str(result.attrs.get("created", "")),
        "n_selected": int(np.asarray(result["selected"].values).sum()),
        "columns": np.asarray(list(cols.columns), dtype=str),
    }
    if group_labels(result):
        prov["groups"] = np.asarray(group_labels(result), dtype=str)
    return prov


def fingerprint(root: Any) -> str:
    """sha256 of an AnnData's matrix layout (encoding, shape, dtype, non-zeros) and its
    obs and var names: enough to tell which data a provenance entry was computed on."""
    h = hashlib.sha256()
    x = root["X"]
    shape = x.attrs.get("shape", getattr(x, "shape", None))
    nnz = x["data"].shape[0] if encoding_type(x) in ("csr_matrix", "csc_matrix") else -1
    dtype = x["data"].dtype if nnz >= 0 else x.dtype
    h.update(json.dumps([encoding_type(x), list(map(int, shape)), str(dtype), nnz]).encode())
    for frame in ("obs", "var"):
        idx = root[frame].attrs["_index"]
        h.update("\0".join(map(str, read_elem()(root[frame][idx]))).encode())
    return h.hexdigest()


def stage(fmt: int, cols: pd.DataFrame, plan: Plan, tag: str) -> dict[str, bytes]:
    """Every object of the new columns and ``uns`` entry, as anndata writes them, by key."""
    import zarr

    anndata = import_optional("anndata", "h5ad", "writing AnnData")
    write_elem = anndata.io.write_elem
    objects: dict = {}
    root = zarr.open_group(zarr.storage.MemoryStore(objects), mode="w", zarr_format=fmt)
    var = root.create_group("var")
    for c in cols:
        write_elem(var, c, cols[c].to_numpy())
        var[c].attrs[TAG] = tag
    prefix, method = plan.entry.split("/")[1:]
    write_elem(root.create_group("uns"), prefix, {method: plan.provenance})
    return {k: v.to_bytes() for k, v in objects.items() if k.count("/") >= 2}


@dataclasses.dataclass
class Plan:
    """What one write-back changes (made by :meth:`ZarrAnnData.plan`).

    Attributes
    ----------
    order : list of str
        ``column-order`` once the replaced columns are withdrawn.
    new : list of str
        The columns added.
    withdraw : list of str
        Listed columns replaced (named in ``overwrite``).
    stale : list of str
        Unlisted nodes removed first: leftovers of an interrupted write, withdrawn columns.
    entry : str
        ``uns/<prefix>/<method>``.
    entry_shown : bool
        Whether that entry exists now (it is withdrawn first).
    parent_shown : bool
        Whether ``uns/<prefix>`` exists now.
    provenance : dict
        The entry's content.
    """

    order: list[str]
    new: list[str]
    withdraw: list[str]
    stale: list[str]
    entry: str
    entry_shown: bool
    parent_shown: bool
    provenance: dict = dataclasses.field(default_factory=dict)


class ZarrAnnData:
    """An AnnData-on-Zarr store (format 2 or 3) seen object by object, through fsspec.

    What readers see comes from the consolidated metadata when the store has it (as
    ``anndata.read_zarr`` does), else from the objects themselves.  Every change goes
    through :meth:`put`, :meth:`remove` and :meth:`consolidate`.

    Parameters
    ----------
    loc : Location
        Where the store is.
    """

    def __init__(self, loc: Location):
        self.loc = loc
        self.fs, self.root = loc.fs()
        self.fmt = 3 if self.get("zarr.json") is not None else 2
        self.consolidated = self._consolidated()
        #: how far :meth:`commit` went: "stage", "withdrawn" (replaced columns unlisted),
        #: "switch" (new columns listed, consolidated metadata not yet rewritten)
        self.step = ""

    @classmethod
    def open(cls, loc: Location) -> ZarrAnnData:
        """The store at ``loc``, verified as AnnData with a ``var`` dataframe.

        Raises
        ------
        InputError
            Nothing there, not Zarr, not AnnData, or a ``var`` fsdask cannot read.
        """
        if not loc.exists():
            raise InputError(
                f"{loc.shown}: no such store; give the AnnData-on-Zarr store the selection "
                "was computed on"
            )
        try:
            ann = cls(loc)
            ok = ann.fmt == 3 or ann.get(".zgroup") is not None
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"{loc.shown}: cannot read the store ({type(exc).__name__}: {exc}); "
                f"{loc.storage_hint()}"
            ) from None
        if not ok:
            raise InputError(
                f"{loc.shown}: not a Zarr store (no zarr.json or .zgroup); --write-var writes "
                "into an AnnData-on-Zarr store (an .h5ad is copied: give out=)"
            )
        ann.verify()
        return ann

    # ---- objects
    def key(self, node: str, name: str = "") -> str:
        """The fsspec path of ``name`` inside ``node`` (both relative to the store)."""
        return "/".join(p for p in (self.root, node, name) if p)

    def get(self, rel: str) -> bytes | None:
        """The object at ``rel`` (relative to the store), None if there is none."""
        try:
            return self.fs.cat_file(self.key(rel))
        except FileNotFoundError:
            return None

    def put(self, rel: str, data: bytes) -> None:
        """Write one object whole: locally a temporary file renamed over it, else one PUT."""
        path = self.key(rel)
        if not self.loc.is_local:
            self.fs.pipe_file(path, data)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".{uuid.uuid4().hex}.fsdask-partial")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        finally:
            if os.path.lexists(tmp):
                os.remove(tmp)

    def remove(self, node: str) -> None:
        """Remove everything under ``node`` (an unlisted node fsdask wrote or withdrew)."""
        path = self.key(node)
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)
        self.fs.invalidate_cache()

    def consolidate(self) -> None:
        """Rewrite the consolidated metadata (one object), if the store had it."""
        import zarr

        if self.consolidated is None:
            return
        group = zarr.open_group(
            self.loc.target, mode="r+", use_consolidated=False, **self.loc.zarr_kwargs()
        )
        zarr.consolidate_metadata(group.store)
        self.consolidated = self._consolidated()

    # ---- metadata, as readers see it
    def _consolidated(self) -> dict | None:
        if self.fmt == 3:
            root = json.loads(self.get("zarr.json") or b"{}")
            cm = root.get("consolidated_metadata") or None
            return None if cm is None else dict(cm.get("metadata") or {})
        raw = self.get(".zmetadata")
        return None if raw is None else dict(json.loads(raw).get("metadata") or {})

    def stored(self, node: str) -> dict | None:
        """The metadata of ``node`` as stored in its own objects: ``{"node_type",
        "attributes"}``, or None when it is not a node (no zarr.json / .zgroup / .zarray)."""
        if self.fmt == 3:
            raw = self.get(self.key_of(node, "zarr.json"))
            return None if raw is None else json.loads(raw)
        for marker, kind in ((".zgroup", "group"), (".zarray", "array")):
            if self.get(self.key_of(node, marker)) is not None:
                raw = self.get(self.key_of(node, ".zattrs"))
                return {"node_type": kind, "attributes": json.loads(raw) if raw else {}}
        return None

    def shown(self, node: str) -> dict | None:
        """The metadata of ``node`` as readers see it (consolidated when the store is)."""
        cm = self.consolidated
        if cm is None:
            return self.stored(node)
        if self.fmt == 3:
            return cm.get(node) if node else self.stored("")
        for marker, kind in ((".zgroup", "group"), (".zarray", "array")):
            if self.key_of(node, marker) in cm:
                return {"node_type": kind, "attributes": cm.get(self.key_of(node, ".zattrs"), {})}
        return None

    @staticmethod
    def key_of(node: str, name: str) -> str:
        return f"{node}/{name}" if node else name

    def attrs(self, node: str) -> dict:
        """The attributes readers see on ``node`` ({} when it is not a node)."""
        return dict((self.shown(node) or {}).get("attributes") or {})

    def tagged(self, node: str) -> bool:
        """Whether ``node`` holds a column array an fsdask write-back began (:data:`TAG`)."""
        name = "zarr.json" if self.fmt == 3 else ".zattrs"
        raw = self.get(self.key_of(node, name))
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            return False
        return TAG in (doc.get("attributes", {}) if self.fmt == 3 else doc)

    def order(self) -> list[str]:
        """``var``'s columns, as readers see them."""
        return list(self.attrs("var").get("column-order", []))

    def set_order(self, order: list[str]) -> None:
        """Rewrite ``var``'s attributes with ``column-order = order`` (one object)."""
        if self.fmt == 3:
            doc = json.loads(self.get("var/zarr.json"))
            doc["attributes"]["column-order"] = order
            self.put("var/zarr.json", json.dumps(doc, indent=2).encode())
            return
        attrs = json.loads(self.get("var/.zattrs"))
        attrs["column-order"] = order
        self.put("var/.zattrs", json.dumps(attrs, indent=2).encode())

    def exists(self, node: str) -> bool:
        """Whether any object lies under ``node``."""
        self.fs.invalidate_cache()
        return bool(self.fs.exists(self.key(node)))

    # ---- verification, planning, commit: see the module docstring for the order
    def verify(self) -> None:
        """Refuse a store that is not AnnData with a ``var`` dataframe as long as ``X`` is wide."""
        where = self.loc.shown
        if encoding_type_of(self.attrs("")) != "anndata":
            raise InputError(
                f"{where}: not an AnnData store (its root has no encoding-type 'anndata'); "
                "fsdask writes var columns only into stores it can verify as AnnData"
            )
        var = self.attrs("var")
        if encoding_type_of(var) != "dataframe" or "_index" not in var:
            raise InputError(
                f"{where}: var is not an AnnData dataframe (encoding-type "
                f"{encoding_type_of(var)!r}); the store may be damaged — check it with anndata"
            )
        if len(self.var_names()) != self.n_vars():
            raise InputError(
                f"{where}: var has {len(self.var_names())} rows but X has {self.n_vars()} "
                "columns; the store is inconsistent — check it with anndata"
            )
        if self.loc.is_local and not os.access(self.key("var"), os.W_OK | os.X_OK):
            raise StoreError(f"{where}: var is not writable; check the store's permissions")

    def group(self) -> Any:
        """The store's root as zarr opens it for reading (as anndata does)."""
        return open_root(self.loc.target, self.loc.storage_options, False)

    def var_names(self) -> pd.Index:
        if not hasattr(self, "_var_names"):
            node = self.group()["var"]
            self._var_names = pd.Index(read_elem()(node[node.attrs["_index"]]))
        return self._var_names

    def n_vars(self) -> int:
        x = self.shown("X")
        if x is None:
            return len(self.var_names())  # an AnnData without X: var alone says
        if x["node_type"] == "group":  # sparse: the shape is an attribute
            return int(x["attributes"]["shape"][1])
        shape = x["shape"] if self.fmt == 3 else json.loads(self.get("X/.zarray"))["shape"]
        return int(shape[1])

    def fingerprint(self) -> str:
        """:func:`fingerprint` of this store."""
        return fingerprint(self.group())

    def plan(self, cols: pd.DataFrame, allowed: set[str], method: str, prefix: str) -> Plan:
        """What to change, or a refusal (one line) naming what is in the way."""
        where, order = self.loc.shown, self.order()
        self._check_unlisted(order)
        taken = [c for c in cols if c in order]
        if [c for c in taken if c not in allowed]:
            raise StoreError(_taken_message(where, [c for c in taken if c not in allowed]))
        stale = [f"var/{c}" for c in taken]
        for c in (c for c in cols if c not in order and self.exists(f"var/{c}")):
            if not self.tagged(f"var/{c}"):
                raise StoreError(
                    f"{where}: var/{c} holds data that is not a listed column and was not "
                    "written by fsdask; fsdask leaves it alone — remove it, or give another "
                    "prefix"
                )
            stale.append(f"var/{c}")
        kept = [c for c in order if c not in taken]
        entry, parent = f"uns/{prefix}/{method}", f"uns/{prefix}"
        parent_shown = self.shown(parent) is not None
        if parent_shown and encoding_type_of(self.attrs(parent)) != "dict":
            raise StoreError(f"{where}: {parent} is not a mapping; give another prefix")
        entry_shown = parent_shown and self.shown(entry) is not None
        if entry_shown:
            self._check_entry(entry, kept, allowed)
        stale += [entry] if parent_shown else [parent]  # unlisted leftovers, or withdrawn
        return Plan(kept, list(cols), taken, stale, entry, entry_shown, parent_shown)

    def _check_unlisted(self, order: list[str]) -> None:
        """Columns listed in ``var``'s own attributes but not in the consolidated metadata
        are leftovers of a write-back killed before its last step, or someone's change."""
        stored = list(((self.stored("var") or {}).get("attributes") or {}).get("column-order", []))
        foreign = [c for c in stored if c not in order and not self.tagged(f"var/{c}")]
        if foreign:
            raise StoreError(
                f"{self.loc.shown}: var lists columns {foreign[:3]} that its consolidated "
                "metadata does not; the store was changed without consolidating — run "
                "zarr.consolidate_metadata on it (or re-save it with anndata) and retry"
            )

    def _check_entry(self, entry: str, kept: list[str], allowed: set[str]) -> None:
        try:
            listed = [str(c) for c in read_elem()(self.group()[entry]).get("columns", [])]
        except Exception:
            listed = None  # unreadable: replaced only when named
        alive = [c for c in (listed or []) if c in kept]
        if entry not in allowed and (listed is None or alive):
            raise StoreError(
                f"{self.loc.shown}: {entry} already describes columns "
                f"{alive[:3] or '(unreadable)'} that stay in var; name those columns (or "
                f"{entry}, or 'all') in --overwrite-var, or give another prefix"
            )

    def commit(self, plan: Plan, objects: dict[str, bytes]) -> None:
        """Apply ``plan``: withdraw, remove leftovers, write unlisted, then switch."""
        self.step = "stage"
        stored = ((self.stored("var") or {}).get("attributes") or {}).get("column-order")
        if plan.withdraw or plan.entry_shown or stored != plan.order:
            self.set_order(plan.order)
            if plan.entry_shown:
                for name in reversed(METADATA[self.fmt]):  # the marker first: it hides the node
                    if self.get(self.key_of(plan.entry, name)) is not None:
                        self.fs.rm(self.key(self.key_of(plan.entry, name)))
            self.consolidate()
            self.step = "withdrawn"
        for node in plan.stale:
            self.remove(node)
        for rel in sorted((k for k in objects if k.startswith("var/")), key=_metadata_first):
            self.put(rel, objects[rel])
        uns = [k for k in objects if k.startswith("uns/")]
        if plan.parent_shown:  # uns/<prefix> stays as it is: only the entry is added
            uns = [k for k in uns if k.startswith(plan.entry + "/")]
        for rel in sorted(uns, key=self._marker_last):
            self.put(rel, objects[rel])
        self.set_order(plan.order + plan.new)  # the switch for readers listing the store
        self.step = "switch"
        self.consolidate()  # the switch for readers of consolidated metadata

    def _marker_last(self, rel: str) -> tuple:
        node, name = rel.rsplit("/", 1)
        if name not in METADATA[self.fmt]:
            return (0, 0, 0)
        return (1, -node.count("/"), 0 if name == ".zattrs" else 1)


def _metadata_first(rel: str) -> tuple:
    """Order of a column's objects: attributes (with :data:`TAG`) first, then the rest."""
    name = rel.rsplit("/", 1)[1]
    return (0 if name in ("zarr.json", ".zattrs") else 1 if name == ".zarray" else 2, rel)


def encoding_type_of(attrs: Mapping[str, Any]) -> str:
    """The ``encoding-type`` in a node's attributes ('' when none)."""
    return str(attrs.get("encoding-type", ""))


def _taken_message(where: str, taken: list[str]) -> str:
    return (
        f"{where}: var already has {', '.join(taken[:4])}{' …' if len(taken) > 4 else ''}; "
        "name them in --overwrite-var (API: overwrite=[...], or 'all') to replace them, or "
        "give another prefix"
    )


def _h5ad_message(where: str) -> str:
    return (
        f"{where}: an .h5ad is never modified in place; save the data as AnnData-on-Zarr "
        "(adata.write_zarr) to write into it, or write an annotated copy with `fsdask export` "
        "(API: write_var(..., out=COPY))"
    )


def _write_copy(
    loc: Location, out: str, res: xr.Dataset, method: str, prefix: str, overwrite: Any
) -> list[str]:
    """The ``out=`` path: a new local copy of ``loc`` with the columns and entry."""
    if not loc.is_local:
        raise InputError(
            f"{loc.shown}: a copy (out=) is made of a local file or store only; copy it "
            "here first, or write into an AnnData-on-Zarr store in place (no out=)"
        )
    hdf5 = os.path.isfile(loc.target)
    var, _ = read_var(loc.target, hdf5)
    cols = var_columns(res, var.index, method=method, prefix=prefix, where=loc.shown)
    entry = f"uns/{prefix}/{method}"
    allowed = named(overwrite, cols, entry)
    taken = [c for c in cols if c in var.columns]
    if [c for c in taken if c not in allowed]:
        raise StoreError(_taken_message(loc.shown, [c for c in taken if c not in allowed]))
    root = open_root(loc.target, None, hdf5)
    try:
        has = "uns" in root and prefix in root["uns"]
        current = dict(read_elem()(root["uns"][prefix])) if has else {}
        fp = fingerprint(root)
    finally:
        if hdf5:
            root.close()
    if method in current and entry not in allowed:
        alive = [c for c in current[method].get("columns", []) if c not in taken]
        if alive or not taken:
            raise StoreError(_taken_message(loc.shown, [entry]))
    var = var.drop(columns=taken)
    for c in cols:
        var[c] = cols[c].to_numpy()
    current[method] = provenance(res, cols, fp, loc.shown)
    publish_copy(loc.target, out, var, prefix, current)
    return list(cols.columns)
