"""Where fsdask writes, as functions: the never-destroy rule of :mod:`fsdask.io.location`.

Every output (dataset, result, evaluation, report, CSV table) is checked by
:func:`check_output` before any computation starts and written through :func:`publish` (a
store or folder) or :func:`publish_file` (one local file): publish-then-swap, replacing only
an fsdask output of the same kind, and only with ``overwrite``.  The rule itself, and what
is recognised as fsdask's, live in :class:`~fsdask.io.location.Location`; these functions
take a URL and its storage options for callers that hold no :class:`Location`.
"""

from __future__ import annotations

import os
from typing import Any, ContextManager, Mapping, Sequence

from fsdask.io.location import (
    COMPLETE_ATTR,
    CSV_HEADERS,
    FOREIGN_TEMP_AGE_S,
    KIND_ATTR,
    OLD_TAG,
    REPORT_MARKER,
    TMP_TAG,
    LocalLocation,
    Location,
    host_tag,
    pid_alive,
)

__all__ = [
    "COMPLETE_ATTR",
    "CSV_HEADERS",
    "FOREIGN_TEMP_AGE_S",
    "KIND_ATTR",
    "OLD_TAG",
    "REPORT_MARKER",
    "TMP_TAG",
    "check_output",
    "cleanup_stale",
    "host_tag",
    "pid_alive",
    "publish",
    "publish_file",
    "same_location",
    "what_is_there",
]


def same_location(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` are the same place, or one contains the other."""
    return Location.of(a).overlaps(Location.of(b))


def what_is_there(
    url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None
) -> tuple[str, str | None]:
    """(description, fsdask kind or None) of what is at ``url``; ("", None) when nothing is."""
    return Location.of(url, storage_options).what_is_there()


def check_output(
    url: str | os.PathLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    kind: str,
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike] = (),
) -> None:
    """Refuse an output location that would destroy something; call before any computation.

    See :meth:`fsdask.io.location.Location.check_output`.
    """
    Location.of(url, storage_options).check_output(kind=kind, overwrite=overwrite, inputs=inputs)


def cleanup_stale(
    url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Remove the temporaries a killed run left next to ``url``; return what was removed.

    Only names fsdask gives its temporaries are touched, and locally only those whose
    process is gone.  A run killed between the two renames of a swap left the old output
    under its ``-old-`` name and nothing at ``url``: it is put back.
    """
    return Location.of(url, storage_options).cleanup_stale()


def publish(
    url: str | os.PathLike,
    storage_options: Mapping[str, Any] | None = None,
    *,
    kind: str,
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike] = (),
) -> ContextManager[str]:
    """Yield a temporary place to write the output for ``url``; publish it if the block succeeds.

    See :meth:`fsdask.io.location.Location.publish`.
    """
    return Location.of(url, storage_options).publish(kind=kind, overwrite=overwrite, inputs=inputs)


def publish_file(
    path: str | os.PathLike,
    *,
    kind: str = "csv",
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike] = (),
) -> ContextManager[str]:
    """Like :func:`publish` for a single local file (a CSV table, a netCDF evaluation)."""
    return LocalLocation(os.fspath(path)).publish_file(
        kind=kind, overwrite=overwrite, inputs=inputs
    )
