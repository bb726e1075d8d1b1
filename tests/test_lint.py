"""The code base stays ruff-clean (lint and format, configured in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.fail(
            "ruff is not installed: it is part of the [test] extra (pip install -e '.[test]')"
        )
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_lint_is_clean():
    r = _ruff("check", "--output-format", "concise", ".")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]


def test_ruff_format_is_clean():
    r = _ruff("format", "--check", ".")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]
