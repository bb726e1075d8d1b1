"""fsdask's entries in dask's configuration, registered as defaults on import.

The defaults live in ``fsdask/fsdask.yaml`` (package data); the user's dask config files,
``DASK_FSDASK__…`` environment variables and ``dask.config.set`` override them as for any
dask key.  The only key so far is ``fsdask.memory-budget``
(:mod:`fsdask.linalg.execution`).
"""

from __future__ import annotations

from importlib import resources

import dask.config
import yaml


def _register_defaults() -> None:
    text = resources.files("fsdask").joinpath("fsdask.yaml").read_text(encoding="utf-8")
    dask.config.update_defaults(yaml.safe_load(text))


_register_defaults()
