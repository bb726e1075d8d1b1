"""Readers of whole-array files: NumPy ``.npz`` and MATLAB ``.mat`` (v5 and v7.3/HDF5).

Each returns the record :func:`fsdask.io.ingest.build.write_arrays` writes (``X``, ``y``,
``feature_names``, ``sample_names``, ``class_names``); such files are read whole, so memory
holds the matrix once.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fsdask.errors import InputError, import_optional


def read_npz(path: Path) -> dict:
    """The record of a ``.npz`` in the layout of ``shared/data`` (no pickles)."""
    import zipfile

    try:
        return _read_npz_arrays(path)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, InputError):
            raise
        msg = " ".join(str(exc).split())
        raise InputError(
            f"{path}: not a readable .npz of numeric arrays ({type(exc).__name__}: {msg}); "
            "save it with numpy.savez (no object arrays / pickles)"
        ) from None


def _read_npz_arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as d:
        keys = set(d.files)
        if "X" not in keys:
            raise InputError(
                f"{path}: no array 'X' in the .npz (found {sorted(keys)}); "
                "expected the layout of shared/data/README.md"
            )
        out = {"X": d["X"], "y": d["y"] if "y" in keys else None}
        for k in ("feature_names", "sample_names", "class_names"):
            out[k] = d[k] if k in keys else None
        task = str(d["task"]) if "task" in keys else None
    if task == "unlabeled" or (out["y"] is not None and np.all(out["y"] == -1)):
        out["y"] = None
    return out


def read_mat(path: Path, x_key: str | None, y_key: str | None) -> dict:
    """The record of a MATLAB file: ``x_key`` (default X, x or data) and ``y_key``."""
    import scipy.io

    try:
        d = scipy.io.loadmat(path)
    except NotImplementedError:  # MATLAB v7.3 = HDF5
        h5py = import_optional("h5py", "mat", f"{path}: a MATLAB v7.3 file")
        # HDF5 stores MATLAB's column-major arrays transposed: .T restores (sample, feature)
        with h5py.File(path, "r") as f:
            d = {
                k: np.asarray(f[k]).T
                for k in f.keys()
                if isinstance(f[k], h5py.Dataset) and f[k].dtype.kind in "fiub"
            }
    except Exception as exc:
        raise InputError(
            f"{path}: not a readable MATLAB .mat file ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    arrays = {k: v for k, v in d.items() if not k.startswith("__")}
    xk = x_key or next((k for k in ("X", "x", "data") if k in arrays), None)
    if xk is None:
        raise InputError(
            f"{path}: no 'X' variable in the .mat file (found {sorted(arrays)}); name it with --x-key"
        )
    if xk not in arrays:
        raise InputError(
            f"{path}: no 'X' variable named {xk!r} in the .mat file (found {sorted(arrays)}); "
            "name the data variable with --x-key"
        )
    yk = y_key or next((k for k in ("Y", "y", "labels", "gnd") if k in arrays), None)
    if yk is not None and yk not in arrays:
        raise InputError(
            f"{path}: no label variable {yk!r} in the .mat file (found {sorted(arrays)})"
        )
    X = arrays[xk]
    if hasattr(X, "toarray"):
        X = X.toarray()
    y = None if yk is None else np.asarray(arrays[yk]).ravel()
    return {
        "X": np.asarray(X),
        "y": y,
        "feature_names": None,
        "sample_names": None,
        "class_names": None,
    }
