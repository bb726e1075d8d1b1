"""Load the real datasets of ``../shared/data`` (``<name>.npz``, layout in its README)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from fsdask.errors import InputError, StoreError

#: where the shared datasets live unless ``FSDASK_SHARED_DATA`` says otherwise
DEFAULT_SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def shared_data_path() -> Path:
    """``$FSDASK_SHARED_DATA`` or ``<repo>/../shared/data``."""
    env = os.environ.get("FSDASK_SHARED_DATA")
    return Path(env) if env else DEFAULT_SHARED_DATA


def load_npz(
    name_or_path: str | os.PathLike,
) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    """Load a shared dataset by name (``"leukemia_golub"``) or an ``.npz`` path.

    Returns
    -------
    X : ndarray (n_samples, n_features), float32
    y : ndarray or None
        Class codes (int64), a continuous response (float) or None for unlabeled data.
    info : dict
        ``name``, ``path``, ``task``, ``feature_names`` (str array; ``"f0"…`` when the file
        has none), ``class_names`` (or None), ``sample_names`` (or None), and any extra keys
        of the file under ``extras``.
    """
    p = Path(name_or_path)
    if p.suffix != ".npz":
        p = shared_data_path() / f"{name_or_path}.npz"
    if not p.exists():
        avail = sorted(f.stem for f in p.parent.glob("*.npz")) if p.parent.exists() else []
        raise StoreError(
            f"{p}: no such dataset"
            + (
                f"; available: {', '.join(avail)}"
                if avail
                else f" ({p.parent} is absent; set FSDASK_SHARED_DATA)"
            )
        )
    with np.load(p, allow_pickle=False) as d:
        if "X" not in d.files:
            raise InputError(f"{p}: no array 'X' in the .npz (found {sorted(d.files)})")
        X = d["X"]
        y = d["y"] if "y" in d.files else None
        task = (
            str(d["task"])
            if "task" in d.files
            else ("classification" if y is not None else "unlabeled")
        )
        fn = d["feature_names"].astype(str) if "feature_names" in d.files else None
        info: dict[str, Any] = {
            "name": p.stem,
            "path": str(p),
            "task": task,
            "feature_names": fn
            if fn is not None
            else np.array([f"f{i}" for i in range(X.shape[1])]),
            "has_feature_names": fn is not None,
            "class_names": d["class_names"].astype(str) if "class_names" in d.files else None,
            "sample_names": d["sample_names"].astype(str) if "sample_names" in d.files else None,
            "extras": {
                k: d[k]
                for k in d.files
                if k not in ("X", "y", "task", "feature_names", "class_names", "sample_names")
            },
        }
    if task == "unlabeled" or (y is not None and y.dtype.kind in "iu" and np.all(y == -1)):
        y = None
    return X, y, info


def to_dataset(X: np.ndarray, y: np.ndarray | None, info: dict[str, Any]):
    """An in-memory fsdask ``xarray.Dataset`` (X, y, feature/sample coords, class names)."""
    import xarray as xr

    coords = {
        "feature": np.asarray(info["feature_names"]),
        "sample": (
            np.asarray(info["sample_names"])
            if info.get("sample_names") is not None
            else np.arange(X.shape[0])
        ),
    }
    ds = xr.Dataset({"X": (("sample", "feature"), X)}, coords=coords)
    if y is not None:
        ds["y"] = ("sample", y)
    if info.get("class_names") is not None:
        ds.attrs["class_names"] = [str(c) for c in info["class_names"]]
    ds.attrs["source"] = info.get("path", "")
    return ds
