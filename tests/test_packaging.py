"""What the package ships: license, dependency bounds, data files found by importlib.resources."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import dask

from fsdask.cluster import read_cluster_yaml, shipped_configs

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements() -> list[str]:
    reqs = list(PROJECT["dependencies"])
    for extra in PROJECT["optional-dependencies"].values():
        reqs += extra
    return reqs


def test_license_is_spdx_with_file():
    assert PROJECT["license"] == "BSD-3-Clause"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "BSD 3-Clause License" in text and "the fsdask developers" in text


def test_fast_moving_dependencies_have_lower_bounds_and_no_caps():
    reqs = {re.split(r"[\[<>=!~ ;]", r, maxsplit=1)[0].lower(): r for r in _requirements()}
    for name in (
        "dask",
        "distributed",
        "xarray",
        "fsspec",
        "s3fs",
        "zarr",
        "numpy",
        "pandas",
        "numba",
    ):
        assert ">=" in reqs[name], reqs[name]
        assert "<" not in reqs[name], (
            f"{reqs[name]}: an upper cap needs a known break and a comment"
        )


def test_cluster_configs_ship_with_the_package():
    shipped = shipped_configs()
    assert set(shipped) == {"slurm.yaml", "pbs.yaml", "kubernetes/daskcluster.yaml"}
    for name, path in shipped.items():
        assert (
            Path(path).read_bytes() == (ROOT / "cluster" / name).read_bytes()
        )  # cluster/ is the same file
    assert read_cluster_yaml(shipped["slurm.yaml"])[0] == "SLURMCluster"


def test_dask_config_defaults_registered():
    import fsdask  # noqa: F401  (registers fsdask/fsdask.yaml via fsdask._config)

    assert dask.config.get("fsdask.memory-budget") == "1GiB"
