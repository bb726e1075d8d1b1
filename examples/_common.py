"""Shared scaffolding for ``examples/reproduce_*.py``.

Every script: find the shared data (or exit 0 saying it skips), load datasets, and write a
markdown table of our numbers beside the paper's to ``examples/results/<name>.md``.  Every
results file starts with a provenance header written here (commit, exact command, UTC date,
machine, load average, wall time, protocol quick/full), and every script also writes a small
JSON sidecar ``<name>.summary.json`` (same header + one entry per paper table/figure with the
paper's number, ours and a verdict computed from them) from which ``reproduce_all.py``
builds ``examples/results/SUMMARY.md``::

    from _common import load, shared_data_dir, write_results_md, write_summary, verdict
    shared_data_dir()                      # exits 0 with a message if ../shared/data is absent
    X, y, info = load("leukemia_golub")
    write_results_md("my_experiment", "Title", ["method", "ours", "paper"], rows, notes="…")
    write_summary("my_experiment", [entry("Table 1, Golub", paper=1, ours=2, lower_is_better=True)])
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

EXAMPLES = Path(__file__).resolve().parent
ROOT = EXAMPLES.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

_T0 = time.perf_counter()  # wall time is measured from the script's first import of this module
_FIGURES: list[str] = []  # PNGs saved by this run (embedded in the next markdown written)

#: ``--quick`` selects the reduced protocols (minutes); without it the papers' full protocols run
QUICK = "--quick" in sys.argv


def protocol() -> str:
    """``"quick"`` (reduced repetitions, ``--quick``) or ``"full"`` (the paper's protocol)."""
    return "quick" if QUICK else "full"


def shared_data_dir() -> Path:
    """Path of the shared datasets (``$FSDASK_SHARED_DATA`` or ``../shared/data``).

    Exits the script with status 0 and a clear message when it is absent, so example runs
    in a checkout without the data skip instead of failing.
    """
    from fsdask.datasets.shared import shared_data_path

    path = shared_data_path()
    if not path.is_dir() or not any(path.glob("*.npz")):
        print(
            f"skipping: {path} absent (../shared/data with the .npz datasets; "
            "set FSDASK_SHARED_DATA to its location)"
        )
        raise SystemExit(0)
    return path


def load(name: str) -> tuple[Any, Any, dict]:
    """``(X, y, info)`` of a shared dataset (see :func:`fsdask.datasets.shared.load_npz`)."""
    shared_data_dir()
    from fsdask.datasets.shared import load_npz

    return load_npz(name)


def results_dir() -> Path:
    """``examples/results/``, or ``examples/results/full/`` for a reproduction run with the
    papers' full protocols (a ``reproduce_*.py`` script without ``--quick``), so that the
    quick and the full versions are kept side by side.  Created if needed."""
    d = EXAMPLES / "results"
    if not QUICK and Path(sys.argv[0]).name.startswith("reproduce_"):
        d = d / "full"
    d.mkdir(parents=True, exist_ok=True)
    return d


# ------------------------------------------------------------------------------ provenance


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit() -> str:
    """HEAD's full hash, with ``+modified`` when tracked source files (outside
    ``examples/results/``, which a regeneration rewrites) differ from HEAD."""
    head = _git("rev-parse", "HEAD") or "unknown"
    dirty = _git(
        "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)examples/results"
    )
    return head + ("+modified" if dirty else "")


def command() -> str:
    """The command line that ran this script, paths relative to the repository root."""
    if not sys.argv or not sys.argv[0]:
        return "?"
    script = sys.argv[0]
    try:
        script = os.path.relpath(os.path.abspath(script), ROOT)
    except ValueError:
        pass
    return " ".join(["python", shlex.quote(script), *map(shlex.quote, sys.argv[1:])])


def header() -> dict[str, str]:
    """Provenance of the current run: commit, command, date, machine, load, wall time, protocol."""
    import fsdask

    try:
        load1, load5, load15 = os.getloadavg()
        load_s = f"{load1:.2f} {load5:.2f} {load15:.2f} (1/5/15 min, {os.cpu_count()} CPUs)"
    except OSError:
        load_s = "unavailable"
    return {
        "commit": commit(),
        "command": command(),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": (
            f"{platform.node() or '?'}, {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, fsdask {fsdask.__version__}"
        ),
        "load average": load_s,
        "wall time": f"{time.perf_counter() - _T0:.0f} s",
        "protocol": (
            "quick (reduced repetitions, --quick)" if QUICK else "full (the papers' repetitions)"
        ),
    }


def header_text(prefix: str = "- ") -> str:
    """The header as ``key: value`` lines (``prefix`` before each: ``"- "`` markdown, ``"# "`` text)."""
    return "".join(f"{prefix}{k}: {v}\n" for k, v in header().items())


# ------------------------------------------------------------------------------ writers


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(header_row: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(map(str, header_row)) + " |",
        "|" + "|".join("---" for _ in header_row) + "|",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def save_figure(fig, filename: str) -> Path:
    """Save a matplotlib figure to ``examples/results/<filename>``; the next
    :func:`write_results_md` embeds it (so the PNG is covered by that file's header)."""
    out = results_dir() / filename
    fig.savefig(out, dpi=80)
    _FIGURES.append(filename)
    return out


def write_results_md(
    name: str,
    title: str,
    header_row: Sequence[str],
    rows: Sequence[Sequence[Any]],
    notes: str | Sequence[str] = "",
    extra: str = "",
) -> Path:
    """Write ``examples/results/<name>.md``: title, provenance header, a table, notes
    (paper references, protocol, caveats), any ``extra`` markdown and the figures saved
    since the last call (:func:`save_figure`) that the text does not embed yet."""
    if not isinstance(notes, str):
        notes = "\n".join(f"* {n}" for n in notes)
    body = (
        markdown_table(header_row, rows)
        + ("\n" + notes.strip() + "\n" if notes else "")
        + ("\n" + extra.strip() + "\n" if extra else "")
    )
    figs = [f for f in _FIGURES if f"({f})" not in body]
    body += "".join(f"\n![{f}]({f})\n" for f in figs)
    _FIGURES.clear()
    out = results_dir() / f"{name}.md"
    out.write_text(f"# {title}\n\n" + header_text() + "\n" + body)
    print(f"wrote {os.path.relpath(out, Path.cwd())}")
    return out


def write_results_text(filename: str, text: str) -> Path:
    """Write a plain-text results file with the header as ``# key: value`` lines on top."""
    out = results_dir() / filename
    out.write_text(header_text("# ") + text)
    print(f"wrote {os.path.relpath(out, Path.cwd())}")
    return out


# ------------------------------------------------------------------------------ summary sidecar


def verdict(ours: float, paper: float, *, lower_is_better: bool = True, tol: float = 0.0) -> str:
    """``match`` when |ours − paper| ≤ tol, else ``better`` / ``worse`` in the metric's direction."""
    if abs(ours - paper) <= tol:
        return "match"
    return "better" if (ours < paper) == lower_is_better else "worse"


def entry(item: str, paper: Any, ours: Any, verdict_: str, reason: str = "") -> dict:
    """One SUMMARY.md row: the paper's table/figure, its number, ours, and the verdict
    (``match`` / ``better`` / ``worse`` / ``not comparable``; the reason says why, or how)."""
    if verdict_ not in ("match", "better", "worse", "not comparable"):
        raise ValueError(f"verdict {verdict_!r}: use match, better, worse or not comparable")
    return {
        "item": item,
        "paper": str(paper),
        "ours": str(ours),
        "verdict": verdict_,
        "reason": reason,
    }


def write_summary(name: str, entries: Sequence[dict], results: Sequence[str] = ()) -> Path:
    """Write ``examples/results/<name>.summary.json`` (header + entries) for SUMMARY.md;
    ``results`` names the markdown files SUMMARY.md links to (default ``<name>.md``)."""
    out = results_dir() / f"{name}.summary.json"
    data = {"header": header(), "entries": list(entries), "results": list(results) or [name]}
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {os.path.relpath(out, Path.cwd())}")
    return out
