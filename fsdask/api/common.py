"""Helpers every command function shares: option values checked the same way, data opened the same way."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

import yaml

from fsdask.errors import ParameterError
from fsdask.io.options import ReadOptions


def parse_kv(items: list[str] | None, what: str = "--param") -> dict[str, Any]:
    """``["k=v", …]`` → dict, values parsed as YAML scalars (``3`` → int, ``[1,2]`` → list).

    Parameters
    ----------
    items : list of str or None
        ``KEY=VALUE`` strings.
    what : str
        The option's name in the error message.

    Returns
    -------
    dict
    """
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ParameterError(f"{what} {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = yaml.safe_load(v) if v.strip() else None
        except yaml.YAMLError:
            out[k.strip()] = v
    return out


def check_count(value: Any, name: str, minimum: int = 0) -> int:
    """An integral option ≥ ``minimum`` (``--top``, ``--features``…), or a ParameterError.

    Parameters
    ----------
    value : Any
        The value given.
    name : str
        The option's name in the error message.
    minimum : int
        The smallest value accepted.

    Returns
    -------
    int
        ``value``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParameterError(f"{name}={value!r}: expected a whole number ≥ {minimum}")
    return value


def open_data(
    url: str, so: Mapping[str, Any] | None = None, read: ReadOptions | None = None
) -> Any:
    """An fsdask dataset from a Zarr store or a ``.npz`` file (shared/data layout).

    Parameters
    ----------
    url : str
        A store :func:`fsdask.open_dataset` reads, or a ``.npz`` file.
    so : mapping, optional
        fsspec storage options.
    read : ReadOptions, optional
        How to read a store other tools wrote (ignored for ``.npz``).

    Returns
    -------
    xarray.Dataset
        Lazy for a store; a ``.npz`` file is read into memory.
    """
    if str(url).endswith(".npz"):
        return _open_npz(url)
    from fsdask.io import open_dataset

    # evaluation and reports read X by feature blocks
    read = (read or ReadOptions()).replace(layout="features")
    return open_dataset(url, storage_options=so, **read.as_dict())


def _open_npz(url: str) -> Any:
    import zipfile

    from fsdask.datasets.shared import load_npz, to_dataset
    from fsdask.errors import FsdaskError, InputError

    try:
        X, y, info = load_npz(url)
    except FsdaskError:
        raise
    except FileNotFoundError:
        raise InputError(f"{url}: no such file") from None
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else ""
        raise InputError(
            f"{url}: not a readable .npz dataset ({type(exc).__name__}: {msg}); expected the "
            "layout of shared/data/README.md (arrays X, y, …, saved without pickles)"
        ) from None
    return to_dataset(X, y, info)


@contextlib.contextmanager
def running(
    scheduler: str, memory_limit: str | None = None, progress: bool = True
) -> Iterator[Any]:
    """Run the block where asked and show its progress: every command that computes enters it.

    The one place a command picks its scheduler (:func:`fsdask.cluster.scheduler`) and shows
    what runs there — dask's task counts (:func:`fsdask.cluster.progress`) and the fits' own
    lines, their cost, iterations and the time they may take
    (:func:`fsdask.fitting.progress_lines`).

    Parameters
    ----------
    scheduler : str
        ``threads``, ``sync``, ``local:N``, ``tcp://…`` or a cluster file.
    memory_limit : str, optional
        Memory limit per worker of a cluster made here.
    progress : bool
        False: no progress (``--no-progress``, ``-q``); the fits' lines are still log records.

    Yields
    ------
    distributed.Client or None
        The client, or None for the in-process schedulers.
    """
    from fsdask.cluster import progress as show_progress
    from fsdask.cluster import scheduler as run_on
    from fsdask.fitting import progress_lines

    with run_on(scheduler, memory_limit=memory_limit) as client:
        with show_progress(client, enabled=progress), progress_lines(progress):
            yield client
