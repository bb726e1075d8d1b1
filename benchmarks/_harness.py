"""Shared benchmark hygiene: every figure comes with the machine's state, and the I/O floor
and the method are timed in the same run, alternating, warm, best of ≥ 3.

A :class:`Bench` records the commit, the command, the CPU count and the 1-minute load
average before and after the run; :meth:`Bench.alternate` times several callables in turns
(one warm-up each, then ``repeat`` rounds floor, method, floor, method, …) and keeps the
best of each; a figure whose timed runs saw a 1-minute load above ``QUIET_LOAD`` is printed
and stored with ``(loaded)`` and must not be quoted as a result.  :meth:`Bench.write` writes
the result file itself, header first, so no result file is edited by hand.

    bench = Bench("hsic_scale", args.results)
    t = bench.alternate({"floor": floor, "fit": fit}, repeat=args.repeat)
    bench.line(f"fit {bench.fmt(t['fit'])}, {bench.ratio(t['fit'], t['floor'])} × the floor")
    bench.write()
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "examples" / "results"
#: a 1-minute load average above this makes a figure "(loaded)"
QUIET_LOAD = 0.5
#: best of at least this many alternating rounds
MIN_REPEAT = 3


def load1() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def commit() -> str:
    """HEAD of the repository the benchmark runs from (``+dirty`` with uncommitted changes)."""

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


@dataclasses.dataclass
class Timing:
    """Best wall time of a figure (and its CPU time), and the highest load seen around its runs."""

    seconds: float
    cpu: float
    load: float
    runs: int

    @property
    def loaded(self) -> bool:
        return self.load > QUIET_LOAD

    def __str__(self) -> str:
        return f"{self.seconds:.3f} s" + (" (loaded)" if self.loaded else "")


class Bench:
    """One benchmark run: its header facts, its output lines and its result file."""

    def __init__(self, name: str, results: str | os.PathLike | None = None):
        self.name = name
        self.path = Path(results) if results else RESULTS / f"{name}.txt"
        self.commit = commit()
        self.command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
        self.cpus = os.cpu_count()
        self.load_before = load1()
        self.started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        self.lines: list[str] = []
        self.any_loaded = False
        if self.load_before > QUIET_LOAD:
            print(
                f"[{name}] load average {self.load_before:.2f} > {QUIET_LOAD}: every figure of this run "
                "is marked (loaded) and is not a result",
                flush=True,
            )

    # ---- timing
    def alternate(
        self, fns: dict[str, Callable[[], Any]], repeat: int = MIN_REPEAT, warm: bool = True
    ) -> dict[str, Timing]:
        """Time each callable ``repeat`` times in turns (after one untimed warm-up call each).

        A callable may time itself (e.g. a subprocess that reports its own time): if it
        returns a dict with ``"time"`` (and optionally ``"cpu"``), that is its figure.
        """
        repeat = max(repeat, MIN_REPEAT)
        if warm:
            for fn in fns.values():
                fn()
        best = {k: Timing(float("inf"), float("nan"), 0.0, 0) for k in fns}
        for _ in range(repeat):
            for k, fn in fns.items():
                l0 = load1()
                t0, c0 = time.perf_counter(), time.process_time()
                out = fn()
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                if isinstance(out, dict) and "time" in out:
                    wall, cpu = out["time"], out.get("cpu", float("nan"))
                b = best[k]
                load = max(b.load, l0, load1())
                if wall < b.seconds:
                    b.seconds, b.cpu = wall, cpu
                b.load, b.runs = load, b.runs + 1
        self.any_loaded |= any(t.loaded for t in best.values())
        return best

    def once(self, fn: Callable[[], Any]) -> tuple[Timing, Any]:
        """Time one call (for long runs that cannot be repeated); the figure is a single run."""
        l0 = load1()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        t = Timing(time.perf_counter() - t0, time.process_time() - c0, max(l0, load1()), 1)
        self.any_loaded |= t.loaded
        return t, out

    @staticmethod
    def ratio(num: Timing, den: Timing) -> str:
        r = num.seconds / den.seconds if den.seconds > 0 else float("inf")
        return f"{r:.2f}×" + (" (loaded)" if num.loaded or den.loaded else "")

    # ---- output
    def line(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def header(self) -> list[str]:
        after = load1()
        quiet = not self.any_loaded and self.load_before <= QUIET_LOAD and after <= QUIET_LOAD
        return [
            f"# benchmarks/{self.name}.py, {self.started}",
            f"# commit: {self.commit}",
            f"# command: {self.command}",
            f"# machine: {self.cpus} CPUs; 1-min load average before {self.load_before:.2f}, after {after:.2f}; "
            + (
                "quiet run"
                if quiet
                else f"LOADED run (load > {QUIET_LOAD}): figures marked (loaded) are not results"
            ),
            "# timings: warm cache, floor and method alternating in the same run, best of "
            f"≥ {MIN_REPEAT} unless marked 'single run'",
        ]

    def write(self) -> Path:
        """Write the header and every line to the result file (replacing it) and return its path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(self.header() + [""] + self.lines) + "\n")
        print(f"wrote {self.path}", flush=True)
        return self.path


def add_args(ap, name: str, repeat: int = MIN_REPEAT) -> None:
    """The options every benchmark shares: ``--repeat`` and ``--results``."""
    ap.add_argument(
        "--repeat", type=int, default=repeat, help=f"best of N alternating rounds (≥ {MIN_REPEAT})"
    )
    ap.add_argument(
        "--results", default=str(RESULTS / f"{name}.txt"), help="result file written by this run"
    )
