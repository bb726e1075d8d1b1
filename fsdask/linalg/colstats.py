"""Per-feature statistics of X, computed the way each kind of array computes them best.

One implementation per array kind (``functools.singledispatch``), so that a method asks for
the statistic and never tests which kind of array it holds.
"""

from __future__ import annotations

import functools
from typing import Any

import dask.array as da
import numpy as np

from fsdask._blocks import compute_blocks

__all__ = ["column_std"]


def _std(xb: np.ndarray) -> np.ndarray:
    return xb.std(axis=0, dtype=np.float64)


@functools.singledispatch
def column_std(X: Any, ex: Any) -> np.ndarray:
    """The population standard deviation of every column of X (float64), in memory.

    Parameters
    ----------
    X : ndarray or dask array (N, J)
    ex : Execution
        The fit's execution; an in-memory X is swept in its column slices.

    Returns
    -------
    ndarray (J,), float64.  Memory: the output only.
    """
    raise TypeError(f"column_std: no implementation for {type(X).__name__}")


@column_std.register
def _(X: np.ndarray, ex: Any) -> np.ndarray:
    # held in memory: column slices in the client's threads (each column's sd alone)
    return ex.map_columns(_std, X)


@column_std.register
def _(X: da.Array, ex: Any) -> np.ndarray:
    # p values joined on the client; a preprocessing pass, not one of the fit's passes_over_X
    (sd,) = compute_blocks(X.std(axis=0, dtype=np.float64))
    return sd
