"""Release hygiene: the built sdist and wheel, what the wheel installs, the recipes' files.

* The sdist and the wheel are built with ``python -m build`` (isolated: it fetches the
  build backend pyproject.toml names) from a copy of the package's files, and the wheel is
  installed into a fresh venv (made ``--without-pip``; this environment's pip installs into
  it with ``pip --python VENV install --no-deps --no-index``): nothing else is
  downloaded, and the installed files are inspected (the scheduling recipes, the cluster
  configs, the license, the ``fsdask`` script).  ``fsdask --version`` then runs from that
  venv with this environment's dependencies on ``PYTHONPATH`` (the numerical stack is not
  reinstalled, which keeps the test well under a minute).
* The Dockerfile is linted by :func:`dockerfile_problems` (hadolint is not available): every
  file it copies exists in the build context, LICENSE among them, a pinned base image, a
  non-root numeric user the Kubernetes CronJob runs as, exec-form ENTRYPOINT.  Building the
  image needs a daemonless builder *and* a reachable registry for the base image; it runs
  only when ``FSDASK_TEST_IMAGE_BUILD=1`` (this machine cannot pull from Docker Hub).
* ``CHANGES.md``'s newest section is the current version; ``CITATION.cff`` names the
  software and the four papers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from fsdask.version import VERSION

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "fsdask" / "recipes"
#: what a user of the wheel must find installed, relative to the fsdask package
SHIPPED = (
    "recipes/Dockerfile",
    "recipes/crontab",
    "recipes/kubernetes/cronjob.yaml",
    "recipes/slurm/fsdask-nightly.sbatch",
    "recipes/slurm/scrontab",
    "recipes/systemd/fsdask-nightly.service",
    "recipes/systemd/fsdask-nightly.timer",
    "cluster_configs/slurm.yaml",
    "cluster_configs/pbs.yaml",
    "cluster_configs/kubernetes/daskcluster.yaml",
    "fsdask.yaml",
)


def _source_copy(dest: Path) -> Path:
    """The files an sdist is made from, copied (the build writes egg-info beside them)."""
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "fsdask", dest / "fsdask", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return dest


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    src = _source_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    p = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if p.returncode != 0 and "Could not find a version that satisfies" in p.stdout + p.stderr:
        pytest.skip("python -m build could not fetch the build backend (no package index)")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (wheel,) = out.glob("fsdask-*.whl")
    (sdist,) = out.glob("fsdask-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_sdist_and_wheel_carry_the_recipes_and_the_license(dists):
    assert dists["wheel"].name == f"fsdask-{VERSION}-py3-none-any.whl"
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    missing = [f for f in SHIPPED if f"fsdask/{f}" not in names]
    assert missing == [], f"not in the wheel: {missing}"
    assert f"fsdask-{VERSION}.dist-info/licenses/LICENSE" in names
    with tarfile.open(dists["sdist"]) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    assert "LICENSE" in members and "fsdask/recipes/Dockerfile" in members


def test_wheel_installs_into_a_fresh_venv_with_recipes_and_script(dists, tmp_path):
    venv = tmp_path / "venv"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_USER")}
    # no pip in the venv (seconds saved): this environment's pip installs into it
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=clean
    )
    py = venv / "bin" / "python"
    p = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps"]
        + ["--no-index", str(dists["wheel"])],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean,  # a PYTHONPATH holding a source tree would make pip see fsdask installed
    )
    assert p.returncode == 0, p.stderr
    # where the wheel put its files, read from the installed metadata (nothing imported)
    listing = subprocess.run(
        [
            str(py),
            "-c",
            "import importlib.metadata as m, json; d = m.distribution('fsdask');"
            "print(json.dumps([str(d.locate_file(f)) for f in d.files]))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=clean,
    )
    installed = {Path(f) for f in json.loads(listing.stdout)}
    package = next(f.parent for f in installed if f.name == "version.py")
    for name in SHIPPED:
        path = package / name
        assert path in installed and path.is_file(), f"not installed: {name}"
        assert path.read_bytes() == (ROOT / "fsdask" / name).read_bytes()
    # the console script runs the installed package (dependencies from this environment)
    env = dict(os.environ, PYTHONPATH=sysconfig.get_paths()["purelib"])
    version = subprocess.run(
        [str(venv / "bin" / "fsdask"), "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert version.stdout.strip() == f"fsdask {VERSION}", version.stderr
    where = subprocess.run(
        [str(py), "-c", "import fsdask; print(fsdask.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # not the source tree: `python -c` puts the working directory first
    )
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr


# ---------------------------------------------------------------------------- Dockerfile lint


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def dockerfile_problems(text: str, context: Path) -> list[str]:
    """What is wrong with a Dockerfile built from ``context`` (empty: nothing found)."""
    problems = []
    steps = _instructions(text)
    base = next((a for i, a in steps if i == "FROM"), "")
    if ":" not in base or base.endswith(":latest"):
        problems.append(f"base image {base!r} is not pinned to a tag")
    copied = []
    for instr, args in steps:
        if instr == "ADD":
            problems.append(f"ADD {args}: use COPY for local files")
        if instr == "COPY" and not args.startswith("--from"):
            *sources, _dest = args.split()
            copied += sources
    for src in copied:
        if not (context / src).exists():
            problems.append(f"COPY {src}: not in the build context")
    pyproject = (context / "pyproject.toml").read_text()
    declared_files = re.findall(r"license-files = \[(.*?)\]", pyproject)
    for declared in re.findall(r'"([^"]+)"', declared_files[0] if declared_files else ""):
        if declared not in copied:
            problems.append(f"{declared} is declared in pyproject.toml but not copied")
    users = [a for i, a in steps if i == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0") or not users[-1][0].isdigit():
        problems.append("the image must end as a numeric non-root USER (Kubernetes checks it)")
    entry = [a for i, a in steps if i == "ENTRYPOINT"]
    if not entry or not entry[-1].startswith("["):
        problems.append("ENTRYPOINT must be in exec form (JSON array)")
    for instr, args in steps:
        if instr == "RUN" and "pip install" in args and "--no-cache-dir" not in args:
            if not any(i == "ENV" and "PIP_NO_CACHE_DIR=1" in a for i, a in steps):
                problems.append("pip install without --no-cache-dir or PIP_NO_CACHE_DIR=1")
    return problems


def test_dockerfile_lint_passes_and_can_fail():
    text = (RECIPES / "Dockerfile").read_text()
    assert dockerfile_problems(text, ROOT) == []
    broken = text.replace(
        "COPY pyproject.toml README.md LICENSE ./", "COPY pyproject.toml README.md ./"
    )
    broken = broken.replace("USER 10001:10001", "USER root").replace("COPY fsdask", "COPY fsdaskx")
    found = "\n".join(dockerfile_problems(broken.replace("3.12-slim", "latest"), ROOT))
    for expected in ("LICENSE is declared", "non-root USER", "COPY fsdaskx", "not pinned"):
        assert expected in found, found


def test_cronjob_runs_as_the_images_user_on_a_writable_volume():
    doc = yaml.safe_load((RECIPES / "kubernetes" / "cronjob.yaml").read_text())
    assert doc["spec"]["concurrencyPolicy"] == "Forbid"
    pod = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    sc = pod["securityContext"]
    uid = re.search(r"^USER (\d+)", (RECIPES / "Dockerfile").read_text(), re.M).group(1)
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == int(uid)
    assert sc["fsGroup"] == int(uid)  # the volume is group-writable for that user
    (container,) = pod["containers"]
    mount = container["volumeMounts"][0]
    assert not mount.get("readOnly") and any(
        v["name"] == mount["name"] and "persistentVolumeClaim" in v for v in pod["volumes"]
    )
    # the image is a reference the header tells users how to build and push
    image = container["image"]
    header = (RECIPES / "kubernetes" / "cronjob.yaml").read_text().split("apiVersion")[0]
    assert ":" in image and not image.endswith(":latest")
    assert f"-t {image} ." in header and f"push {image}" in header


def test_recipes_assume_no_clone_in_home_and_make_their_log_folder():
    crontab = (RECIPES / "crontab").read_text()
    scrontab = (RECIPES / "slurm" / "scrontab").read_text()
    for text in (crontab, scrontab):
        line = next(x for x in text.splitlines() if x.strip() and not x.startswith("#"))
        assert "$HOME" not in line and "~/" not in line
    cron_line = next(x for x in crontab.splitlines() if x.strip() and not x.startswith("#"))
    assert 'mkdir -p "$PROJECT/logs"' in cron_line.split("&&")[0]
    assert (
        'mkdir -p "$(dirname "$LOG")"' in (RECIPES / "slurm" / "fsdask-nightly.sbatch").read_text()
    )


def test_image_builds_with_a_daemonless_builder():
    builder = shutil.which("podman") or shutil.which("buildah")
    if os.environ.get("FSDASK_TEST_IMAGE_BUILD") != "1" or builder is None:
        pytest.skip(
            "set FSDASK_TEST_IMAGE_BUILD=1 on a machine with podman or buildah that can pull "
            "python:3.12-slim (here registry-1.docker.io does not resolve)"
        )
    cmd = [builder, "build"] if builder.endswith("podman") else [builder, "bud"]
    tag = "localhost/fsdask-test:latest"
    p = subprocess.run(
        [*cmd, "-f", str(RECIPES / "Dockerfile"), "-t", tag, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = [shutil.which("podman") or "podman", "run", "--rm", tag, "--version"]
    if shutil.which("podman"):
        out = subprocess.run(run, capture_output=True, text=True, timeout=300)
        assert out.stdout.strip() == f"fsdask {VERSION}", out.stderr


# ------------------------------------------------------------------------ changelog, citation


def test_changes_newest_section_is_the_current_version():
    text = (ROOT / "CHANGES.md").read_text()
    sections = re.findall(r"^## (\S+)", text, re.M)
    assert sections and sections[0] == VERSION, (sections[:1], VERSION)


def test_citation_names_the_software_and_the_four_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == VERSION and cff["license"] == "BSD-3-Clause"
    firsts = {r["authors"][0]["family-names"]: r for r in cff["references"]}
    assert set(firsts) == {"Wolf", "Sun", "Zarkoob", "Masaeli"}
    for ref in cff["references"]:
        assert ref["title"] and ref["year"] in (2005, 2010) and ref["type"]


def test_install_instructions_work_without_pypi():
    """fsdask is not on PyPI: no `pip install fsdask` anywhere a user is told to install."""
    pattern = re.compile(r"pip install\s+['\"]?fsdask\b")
    for path in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "cluster" / "README.md"]:
        assert not pattern.search(path.read_text()), path
    for path in [*(ROOT / "docs").rglob("*.md"), *RECIPES.rglob("*")]:
        if path.is_file() and "_build" not in path.parts:
            assert not pattern.search(path.read_text()), path
    assert pattern.search("then pip install 'fsdask[s3]'")  # the check can fail
