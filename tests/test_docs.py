"""The documentation site builds strictly, and the public API is documented and its examples run.

* The site (``docs/``) is built with ``sphinx-build -W -n`` — warnings are errors, every
  cross-reference must resolve — gallery included, as the README's docs command does.
* Small throw-away projects using the same configuration show that the build *fails* on a
  broken reference and on a CLI option without help text.
* Every object of the public API — ``fsdask.__all__`` read when the test runs, so objects
  added later are covered, and everything the API reference lists — has a numpydoc
  docstring with a summary, every parameter described, *Returns* (functions), *Attributes*
  (classes other than exceptions) and *Examples*; the examples run as doctests.
"""

from __future__ import annotations

import doctest
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numpydoc.docscrape import ClassDoc
from numpydoc.validate import validate

import fsdask

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: numpydoc validation codes a public object must pass: a docstring (GL08) with a summary
#: (SS01), every parameter documented (PR01) and described (PR07), no unknown parameter
#: (PR02), a Returns section for functions that return (RT01) and an Examples section (EX01)
REQUIRED = {"GL08", "SS01", "PR01", "PR02", "PR07", "RT01", "EX01"}


def public_api() -> list[str]:
    """Full names of the public API: ``fsdask.__all__`` and every object the reference lists."""
    names = [f"fsdask.{n}" for n in fsdask.__all__ if n != "__version__"]
    api = (DOCS / "api.md").read_text()
    for block in re.findall(r"\.\. currentmodule:: (\S+)\n\n\.\. autosummary::(.*?)```", api, re.S):
        module, body = block
        for line in body.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                names.append(f"{module}.{line}")
    return list(dict.fromkeys(names))


def _obj(name: str):
    module, _, attr = name.rpartition(".")
    return getattr(__import__(module, fromlist=[attr]), attr)


def docstring_problems(name: str, obj=None) -> list[str]:
    """What the docstring of the object ``name`` lacks (empty: nothing)."""
    obj = _obj(name) if obj is None else obj
    found = [f"{code} {msg}" for code, msg in validate(name)["errors"] if code in REQUIRED]
    if inspect.isclass(obj) and not issubclass(obj, BaseException):
        if not ClassDoc(obj, config={"show_class_members": False})["Attributes"]:
            found.append("no Attributes section")
    return found


def test_every_public_object_has_its_numpydoc_sections():
    problems = {n: p for n in public_api() if (p := docstring_problems(n))}
    report = "\n".join(f"{n}: {'; '.join(p)}" for n, p in problems.items())
    assert not problems, "numpydoc sections missing:\n" + report


def _undocumented(x, y=1):
    """Add."""
    return x + y


def test_the_docstring_check_can_fail():
    name = f"{__name__}._undocumented"
    found = " ".join(docstring_problems(name, _undocumented))
    assert "PR01" in found and "RT01" in found and "EX01" in found


def test_every_public_name_is_in_the_api_reference():
    listed = set(public_api()) - {f"fsdask.{n}" for n in fsdask.__all__}
    api = (DOCS / "api.md").read_text()
    absent = [n for n in fsdask.__all__ if n != "__version__" and f"\n   {n}\n" not in api]
    assert absent == [], f"fsdask.__all__ names missing from docs/api.md: {absent}"
    assert all(_obj(n) for n in listed)


@pytest.mark.parametrize("name", public_api())
def test_public_examples_run_as_doctests(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples may write stores: into a fresh folder
    obj = _obj(name)
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(obj, name, globs={"fsdask": fsdask, "np": np})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0, f"{name}: no example to run"
    assert result.failed == 0, f"{name}: {result.failed} example(s) failed (output above)"


# ------------------------------------------------------------------------------ the builds


def _build(srcdir: Path, outdir: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-n", "-q", "-b", "html", str(srcdir), str(outdir)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )


def test_site_builds_with_warnings_as_errors(tmp_path):
    """The real site, gallery executed, fresh (no cached environment)."""
    p = _build(DOCS, tmp_path / "html", FSDASK_DOCS_GALLERY="True")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-6000:]
    html = tmp_path / "html"
    for page in ("index", "getting_started", "api", "cli", "changes", "auto_examples/index"):
        assert (html / f"{page}.html").is_file(), page
    for name in fsdask.__all__:
        if name != "__version__":
            assert (html / "generated" / f"fsdask.{name}.html").is_file(), name
    cli = (html / "cli.html").read_text()
    assert "fsdask select" in cli and "--checkpoint-every" in cli
    assert len(list((html / "_images").glob("sphx_glr_plot_*.png"))) >= 6


def _tiny_project(tmp_path: Path, page: str, extra_py: str = "") -> Path:
    """A project with the site's configuration and extensions and one page (no gallery)."""
    src = tmp_path / "src"
    shutil.copytree(
        DOCS,
        src,
        ignore=shutil.ignore_patterns(
            "_build", "generated", "auto_*", "*.md", "*.rst", "_generated"
        ),
    )
    (src / "index.md").write_text(page)
    if extra_py:
        (src / "_ext" / "broken_cli.py").write_text(textwrap.dedent(extra_py))
    return src


def test_build_fails_on_a_broken_reference(tmp_path):
    ok = "# Page\n\n{py:func}`fsdask.open_dataset` and {py:class}`fsdask.base.Selector`.\n"
    src = _tiny_project(tmp_path, ok)
    p = _build(src, tmp_path / "out", FSDASK_DOCS_GALLERY="skip")
    assert p.returncode == 0, p.stderr[-3000:]
    (src / "index.md").write_text(ok + "\n{py:func}`fsdask.open_datasett`\n")
    p = _build(src, tmp_path / "out2", FSDASK_DOCS_GALLERY="skip")
    assert p.returncode != 0 and "fsdask.open_datasett" in p.stderr, p.stderr[-3000:]


def test_build_fails_on_a_cli_option_without_help(tmp_path):
    parser = """
    import argparse


    def build_parser():
        p = argparse.ArgumentParser(prog="fsdask")
        sub = p.add_subparsers(dest="command")
        s = sub.add_parser("select", help="select features")
        s.add_argument("--method", help="the method")
        s.add_argument("--mystery")
        return p
    """
    page = "# CLI\n\n```{eval-rst}\n.. fsdask-cli::\n   :parser: broken_cli:build_parser\n```\n"
    src = _tiny_project(tmp_path, page, extra_py=parser)
    p = _build(src, tmp_path / "out", FSDASK_DOCS_GALLERY="skip")
    assert (
        p.returncode != 0 and "CLI option without help text: fsdask select --mystery" in p.stderr
    ), p.stderr[-3000:]
