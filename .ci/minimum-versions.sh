#!/usr/bin/env bash
# The declared minimum versions, installed and tried: a separate venv gets fsdask[all] with
# every dependency pinned to its lower bound in pyproject.toml (constraints/minimum.txt), plus
# the test runner (pytest and its plugins at the test extra's bounds, not pinned), then a smoke
# subset of the tests runs in it.  The subset touches each dependency once: fsdask and foreign
# (xarray, zarr-python) stores, AnnData .h5ad and on Zarr with write-back (anndata, h5py),
# MATLAB v7.3 (h5py), a Filter and a Logo fit (numba, scipy), select through the CLI, a chunk
# deleted from a store (the fill value xarray writes), graphs built without pickling (dask), a
# one-line CLI error (zarr's imports), a local cluster (distributed), jobqueue scripts
# (dask-jobqueue), a report (matplotlib) and an Icechunk repository read and written (icechunk).  s3fs is installed and imported only: the S3 test
# server (moto) does not co-install in reasonable time with the old botocore that s3fs 2025.2's
# aiobotocore pins.
#
# FSDASK_MINVER_VENV: where the venv goes (default .venv-min, git-ignored); it is rebuilt
# from scratch on every run, so a version left over from an earlier run cannot pass.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${FSDASK_MINVER_VENV:-.venv-min}"

SMOKE=(
    tests/test_packaging.py
    tests/test_io.py::test_roundtrip_in_memory
    "tests/test_open_foreign.py::test_foreign_stores_equal_numpy[xarray-v3-local]"
    "tests/test_open_foreign.py::test_foreign_stores_equal_numpy[xarray-v2-consolidated-local]"
    "tests/test_open_foreign.py::test_foreign_stores_equal_numpy[zarr-v2-local]"
    "tests/test_anndata.py::test_anndata_equals_numpy[csr-h5ad-local]"
    "tests/test_anndata.py::test_anndata_equals_numpy[csr-zarr-local]"
    tests/test_anndata.py::test_annotate_and_export
    tests/test_ingest_formats.py::test_mat_v5_and_v73
    tests/test_filters.py::test_welch_and_student_t
    tests/test_logo.py::test_cli_select_logo
    tests/test_cli.py::test_ingest_info_select
    tests/test_linalg.py::test_graphs_over_closures_are_built_without_pickling_them
    tests/test_pipeline.py::test_cli_failure_is_one_line
    tests/test_safety.py::test_corrupted_label_chunk_and_deleted_chunk
    tests/test_cluster.py::test_local_2_is_a_real_cluster_and_is_closed
    tests/test_cluster.py::test_slurm_yaml_makes_a_slurm_cluster_without_submitting
    tests/test_cluster.py::test_pbs_yaml_job_script
    tests/test_report.py::test_report_paths_and_convergence
    tests/test_icechunk.py::test_read_pins_a_snapshot_and_results_record_it
)

rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# the runner: pytest, pytest-timeout and pytest-xdist as the test extra declares them
runner=$(python3 -c 'import re, tomllib
test = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"]
print(" ".join(r for r in test if re.match(r"pytest(-timeout|-xdist)?[<>=]", r)))')
# shellcheck disable=SC2086  # one word per requirement
"$venv/bin/pip" install -q -c constraints/minimum.txt -e '.[all]' $runner
"$venv/bin/pip" check
# pip -c pins only what it installs, and pytest.importorskip would skip a test whose module
# fails to import: every pin must be installed at its version, and import
"$venv/bin/python" - <<'EOF'
import importlib
import re
from importlib.metadata import version

MODULE = {"pyyaml": "yaml", "scikit-learn": "sklearn"}
pins = re.findall(r"^([\w.-]+)==(\S+)", open("constraints/minimum.txt").read(), re.M)
wrong = [f"{name} {version(name)} (pinned {pin})" for name, pin in pins if version(name) != pin]
assert not wrong, "installed at other than the minimum: " + ", ".join(wrong)
for name, _ in pins:
    importlib.import_module(MODULE.get(name, name.replace("-", "_")))
print(f"{len(pins)} pins of constraints/minimum.txt installed and imported")
EOF
"$venv/bin/python" -m pytest -q -n 0 -p no:cacheprovider "${SMOKE[@]}"
