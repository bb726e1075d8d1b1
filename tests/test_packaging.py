"""What the package ships: license, dependency bounds, data files found by importlib.resources.

The declared lower bounds are installed and tried by .ci/minimum-versions.sh through
constraints/minimum.txt; the tests here keep that file and pyproject.toml equal.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import dask
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from fsdask.cluster import read_cluster_yaml, shipped_configs

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
MINIMUM = ROOT / "constraints" / "minimum.txt"
MINIMUM_JOB = ROOT / ".ci" / "minimum-versions.sh"
#: what a user installs (fsdask[all]): the extras whose bounds minimum.txt pins too
USER_EXTRAS = ("s3", "eval", "mat", "h5ad", "jobqueue", "icechunk")


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


def _lower_bounds(requirements: list[str]) -> dict[str, Version | None]:
    """Canonical name → the ``>=`` bound of each requirement (None without one)."""
    out = {}
    for text in requirements:
        req = Requirement(text)
        if req.name == "fsdask":  # fsdask[all] names extras, not a dependency
            continue
        lows = [Version(s.version) for s in req.specifier if s.operator == ">="]
        out[canonicalize_name(req.name)] = lows[0] if lows else None
    return out


def _declared_minimum() -> dict[str, Version | None]:
    declared = _lower_bounds(PROJECT["dependencies"])
    for extra in USER_EXTRAS:
        declared |= _lower_bounds(PROJECT["optional-dependencies"][extra])
    return declared


def _pins() -> dict[str, Version]:
    pins = {}
    for line in MINIMUM.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        (spec,) = Requirement(line).specifier
        assert spec.operator == "==", f"constraints/minimum.txt: {line!r} is not a == pin"
        name = canonicalize_name(Requirement(line).name)
        assert name not in pins, f"constraints/minimum.txt: {name} pinned twice"
        pins[name] = Version(spec.version)
    return pins


def test_minimum_constraints_pin_exactly_the_declared_lower_bounds():
    declared = _declared_minimum()
    unbounded = sorted(name for name, low in declared.items() if low is None)
    assert not unbounded, f"no >= lower bound in pyproject.toml: {unbounded}"
    pins = _pins()
    assert sorted(set(declared) - set(pins)) == [], "declared but not in constraints/minimum.txt"
    assert sorted(set(pins) - set(declared)) == [], "in constraints/minimum.txt, not declared"
    differ = {n: (str(declared[n]), str(pins[n])) for n in declared if declared[n] != pins[n]}
    assert differ == {}, "pyproject.toml's >= bound differs from the pin (declared, pinned)"


def test_a_dependency_repeated_in_an_extra_keeps_its_lower_bound():
    declared = _declared_minimum()
    for extra, requirements in PROJECT["optional-dependencies"].items():
        for name, low in _lower_bounds(requirements).items():
            if name in declared:
                assert low == declared[name], f"[{extra}] {name}>={low}, elsewhere {declared[name]}"


def test_ci_runs_the_minimum_version_job_on_the_constraints():
    run = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ".ci/minimum-versions.sh" in run[:-1]  # before the README's test command
    job = MINIMUM_JOB.read_text()
    assert "-c constraints/minimum.txt" in job
    smoke = re.findall(r"^ +\"?(tests/test_\w+\.py)(?:::(\w+))?", job, re.M)
    assert len(smoke) >= 10, "the smoke subset of .ci/minimum-versions.sh was not found"
    for path, test in smoke:  # a renamed test would make the job fail on a missing id
        assert (ROOT / path).is_file(), path
        assert not test or f"def {test}(" in (ROOT / path).read_text(), f"{path}::{test}"
