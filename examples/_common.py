"""Shared scaffolding for ``examples/reproduce_*.py``.

Every script: find the shared data (or exit 0 saying it skips), load datasets, and write a
markdown table of our numbers beside the paper's to ``examples/results/<name>.md`` with a
timestamp and the command that produced it::

    from _common import load, shared_data_dir, write_results_md
    shared_data_dir()                      # exits 0 with a message if ../shared/data is absent
    X, y, info = load("leukemia_golub")
    write_results_md("my_experiment", "Title", ["method", "ours", "paper"], rows, notes="…")
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

EXAMPLES = Path(__file__).resolve().parent
ROOT = EXAMPLES.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))


def shared_data_dir() -> Path:
    """Path of the shared datasets (``$FSDASK_SHARED_DATA`` or ``../shared/data``).

    Exits the script with status 0 and a clear message when it is absent, so example runs
    in a checkout without the data skip instead of failing.
    """
    from fsdask.datasets.shared import shared_data_path
    path = shared_data_path()
    if not path.is_dir() or not any(path.glob("*.npz")):
        print(f"skipping: {path} absent (../shared/data with the .npz datasets; "
              "set FSDASK_SHARED_DATA to its location)")
        raise SystemExit(0)
    return path


def load(name: str) -> tuple[Any, Any, dict]:
    """``(X, y, info)`` of a shared dataset (see :func:`fsdask.datasets.shared.load_npz`)."""
    shared_data_dir()
    from fsdask.datasets.shared import load_npz
    return load_npz(name)


def results_dir() -> Path:
    """``examples/results/`` (created if needed)."""
    d = EXAMPLES / "results"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_results_md(name: str, title: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
                     notes: str | Sequence[str] = "", extra: str = "") -> Path:
    """Write ``examples/results/<name>.md``: title, provenance (UTC time, command, machine),
    a table, notes (paper references, protocol, caveats) and any ``extra`` markdown."""
    import fsdask
    cmd = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]) if sys.argv else "?"
    try:
        cmd = " ".join(["python", os.path.relpath(sys.argv[0], ROOT), *map(shlex.quote, sys.argv[1:])])
    except (ValueError, IndexError):
        pass
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if not isinstance(notes, str):
        notes = "\n".join(f"* {n}" for n in notes)
    text = (f"# {title}\n\n"
            f"Produced by `{cmd}` on {when} (fsdask {fsdask.__version__}, Python "
            f"{platform.python_version()}, {os.cpu_count()} CPU(s), shared machine).\n\n"
            + markdown_table(header, rows) + ("\n" + notes.strip() + "\n" if notes else "")
            + ("\n" + extra.strip() + "\n" if extra else ""))
    out = results_dir() / f"{name}.md"
    out.write_text(text)
    print(f"wrote {os.path.relpath(out, Path.cwd())}")
    return out
