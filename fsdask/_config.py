"""fsdask's entries in dask's configuration, registered as defaults on import.

The defaults live in ``fsdask/fsdask.yaml`` (package data); the user's dask config files,
``DASK_FSDASK__…`` environment variables and ``dask.config.set`` override them as for any
dask key.  ``fsdask.memory-budget``, read by :func:`memory_budget`, is the one budget every
in-memory-or-chunked decision uses (:mod:`fsdask.linalg.execution`) and the bound of one task
when a foreign store is re-blocked (:mod:`fsdask.io.rechunk`); ``fsdask.hold-x-below``, read
by :func:`hold_x_below`, is the size below which an iterative method holds X itself in memory;
``fsdask.gram-precision``, read by :func:`gram_precision`, whether large Gram products follow
the data's precision.
"""

from __future__ import annotations

import math
import numbers
from importlib import resources
from typing import Any

import dask.config
import yaml
from dask.utils import parse_bytes

#: the dask config key of the memory budget
CONFIG_KEY = "fsdask.memory-budget"
#: the dask config key of the size below which X is held in memory by iterative methods
HOLD_KEY = "fsdask.hold-x-below"
#: the dask config key of the precision of large Gram products ("data" or "float64")
PRECISION_KEY = "fsdask.gram-precision"
PRECISIONS = ("data", "float64")


def _register_defaults() -> None:
    text = resources.files("fsdask").joinpath("fsdask.yaml").read_text(encoding="utf-8")
    dask.config.update_defaults(yaml.safe_load(text))


_register_defaults()


def memory_budget(override: Any = None) -> int:
    """The memory budget in bytes: ``override`` if given, else dask config ``fsdask.memory-budget``.

    Parameters
    ----------
    override : int, float, str or None
        Bytes (``2**30``, ``2e9``) or a size string (``"512MiB"``); ``None`` reads the config.

    Returns
    -------
    int
        The budget, ≥ 0.  0 sends every decision to the chunked (dask) path.
    """
    value = dask.config.get(CONFIG_KEY) if override is None else override
    where = "memory_budget" if override is not None else f"dask config {CONFIG_KEY!r}"
    return _size(value, where)


def hold_x_below() -> int:
    """Bytes (dask config ``fsdask.hold-x-below``) below which an iterative method reads X into
    memory once instead of building a dask graph per pass; 0 keeps every pass on dask."""
    return _size(dask.config.get(HOLD_KEY, 0), f"dask config {HOLD_KEY!r}")


def gram_precision() -> str:
    """``"data"`` or ``"float64"`` (dask config ``fsdask.gram-precision``): whether the BLAS
    products of a large Gram are taken in the input's precision or always in double."""
    value = dask.config.get(PRECISION_KEY, "data")
    if value not in PRECISIONS:
        from fsdask.errors import ParameterError  # here: `import fsdask` stays light (--version)

        raise ParameterError(
            f"dask config {PRECISION_KEY!r}={value!r} is not a precision; use one of {PRECISIONS}"
        )
    return value


def _size(value: Any, where: str) -> int:
    try:
        nbytes = parse_bytes(value) if isinstance(value, str) else value
    except (ValueError, TypeError):
        nbytes = None
    if (
        isinstance(nbytes, bool)
        or not isinstance(nbytes, numbers.Real)
        or not math.isfinite(nbytes)
        or nbytes < 0
    ):
        from fsdask.errors import ParameterError  # here: `import fsdask` stays light (--version)

        raise ParameterError(
            f"{where}={value!r} is not a size; use a number of bytes ≥ 0 "
            "(e.g. 2**30) or a string such as '1GiB'"
        )
    return int(nbytes)
