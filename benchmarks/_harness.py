"""Shared benchmark hygiene: every figure comes with the machine's state, and the I/O floor
and the method are timed in the same run, alternating, warm, best of ≥ 3.

A :class:`Bench` records the commit, the command, the CPU count and the 1-minute load
average before and after the run; :meth:`Bench.alternate` times several callables in turns
(one warm-up each, then ``repeat`` rounds floor, method, floor, method, …) and keeps the
best of each.  What makes a figure ``(loaded)`` — printed and stored so, never quoted as a
result — is other work on the machine: the CPU time that processes *outside* this
benchmark's process tree used while the figure's runs were timed (``/proc/stat`` busy time
minus this process's and its descendants' CPU time), above ``QUIET_FOREIGN`` cores on
average, or above that in the few seconds before the run starts.  The 1-minute load average
cannot decide it: on 2 cores the benchmark's own two busy threads raise it to ~2, and after
the previous benchmark it stays high for minutes; it is recorded for the reader.
:meth:`Bench.write` writes the result file itself, header first, so no result file is
edited by hand.

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
#: a 1-minute load average above this is reported (the machine was busy recently)
QUIET_LOAD = 0.5
#: CPU cores used on average by processes outside the benchmark above this → "(loaded)"
QUIET_FOREIGN = 0.2
#: a figure whose runs total less than this is judged over the whole alternating block
MIN_METER_SECONDS = 1.0
#: best of at least this many alternating rounds
MIN_REPEAT = 3


def load1() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (/proc/stat, all CPUs)."""
    with open("/proc/stat") as f:
        fields = [float(v) for v in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU seconds of this process, its reaped children and its live descendants."""
    import resource

    import psutil

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + kids.ru_utime + kids.ru_stime
    for proc in psutil.Process().children(recursive=True):
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.Error:  # ended between the listing and the read
            pass
    return total


class ForeignMeter:
    """Average CPU cores used by processes outside this benchmark over an interval."""

    def __init__(self) -> None:
        self.t, self.busy, self.own = time.perf_counter(), _busy_seconds(), _own_seconds()

    def cores(self) -> float:
        wall = time.perf_counter() - self.t
        other = (_busy_seconds() - self.busy) - (_own_seconds() - self.own)
        return max(other, 0.0) / wall if wall > 0 else 0.0


def foreign_cores(seconds: float = 5.0) -> float:
    """Cores used by other processes over the next ``seconds`` (this process idles)."""
    meter = ForeignMeter()
    time.sleep(seconds)
    return meter.cores()


def peak_rss() -> int:
    """Peak resident memory of this process in bytes (``VmHWM`` of ``/proc/self/status``).

    Not ``ru_maxrss``: Linux carries it over ``fork`` + ``exec``, so a measured child started
    by a benchmark that has just built a 1 GB matrix reports 1 GB before doing anything.
    ``VmHWM`` belongs to the address space, which ``exec`` replaces.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource  # no /proc: the carried-over figure is the best there is

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def commit() -> str:
    """HEAD of the repository the benchmark runs from (``+dirty`` with uncommitted changes
    outside ``examples/results``)."""

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # the results a run writes are outputs, not sources: only changes elsewhere make it dirty
    changed = git(
        "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)examples/results"
    )
    return head + ("+dirty" if changed else "")


@dataclasses.dataclass
class Timing:
    """Best wall time of a figure (and its CPU time), the highest 1-minute load average seen
    around its runs and the most CPU other processes used during one of them (cores); for a
    callable that times itself, the dict its best run returned (``report``)."""

    seconds: float
    cpu: float
    load: float
    runs: int
    foreign: float = 0.0
    report: dict | None = None

    @property
    def loaded(self) -> bool:
        return self.foreign > QUIET_FOREIGN

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
        self.foreign_before = foreign_cores()
        self.started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        self.lines: list[str] = []
        self.any_loaded = self.foreign_before > QUIET_FOREIGN
        self.foreign_max = 0.0
        if self.any_loaded:
            print(
                f"[{name}] other processes use {self.foreign_before:.2f} CPU cores > {QUIET_FOREIGN}: "
                "every figure of this run is marked (loaded) and is not a result",
                flush=True,
            )

    # ---- timing
    def alternate(
        self, fns: dict[str, Callable[[], Any]], repeat: int = MIN_REPEAT, warm: bool = True
    ) -> dict[str, Timing]:
        """Time each callable ``repeat`` times in turns (after one untimed warm-up call each).

        A callable may time itself (e.g. a subprocess that reports its own time): if it
        returns a dict with ``"time"`` (and optionally ``"cpu"``), that is its figure, and
        the best run's dict is kept as the figure's ``report`` (its other measurements).
        """
        repeat = max(repeat, MIN_REPEAT)
        if warm:
            for fn in fns.values():
                fn()
        best = {k: Timing(float("inf"), float("nan"), 0.0, 0) for k in fns}
        other = {k: [0.0, 0.0] for k in fns}  # other processes' CPU seconds, wall seconds
        for i in range(repeat):
            for k, fn in fns.items():
                l0, meter = load1(), ForeignMeter()
                t0, c0 = time.perf_counter(), time.process_time()
                out = fn()
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                other[k][0] += meter.cores() * wall
                other[k][1] += wall
                report = out if isinstance(out, dict) and "time" in out else None
                if report is not None:
                    wall, cpu = report["time"], report.get("cpu", float("nan"))
                # progress only (not in the result file): a run stopped early still shows
                # the rounds it finished
                print(f"[{self.name}] round {i + 1}/{repeat} {k}: {wall:.3f} s", flush=True)
                b = best[k]
                load = max(b.load, l0, load1())
                if wall < b.seconds:
                    b.seconds, b.cpu, b.report = wall, cpu, report
                b.load, b.runs = load, b.runs + 1
        for k, b in best.items():
            # over all of a figure's runs, and at least MIN_METER_SECONDS: /proc/stat counts
            # 10 ms ticks, so one 30 ms run alone could read as half a core of "other" work
            cpu_s, wall_s = other[k]
            if wall_s < MIN_METER_SECONDS:
                cpu_s, wall_s = sum(c for c, _ in other.values()), sum(w for _, w in other.values())
            b.foreign = cpu_s / wall_s if wall_s > 0 else 0.0
        self._saw(best.values())
        return best

    def _saw(self, timings) -> None:
        for t in timings:
            self.any_loaded |= t.loaded
            self.foreign_max = max(self.foreign_max, t.foreign)

    def once(self, fn: Callable[[], Any]) -> tuple[Timing, Any]:
        """Time one call (for long runs that cannot be repeated); the figure is a single run."""
        l0, meter = load1(), ForeignMeter()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        t = Timing(
            time.perf_counter() - t0, time.process_time() - c0, max(l0, load1()), 1, meter.cores()
        )
        self._saw([t])
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
        return [
            f"# benchmarks/{self.name}.py, {self.started}",
            f"# commit: {self.commit}",
            f"# command: {self.command}",
            f"# machine: {self.cpus} CPUs; 1-min load average before {self.load_before:.2f}, after "
            f"{after:.2f} (includes this benchmark's own work); other processes used "
            f"{self.foreign_before:.2f} cores before the run and at most {self.foreign_max:.2f} "
            "during a timed figure; "
            + (
                "quiet run"
                if not self.any_loaded
                else f"LOADED run (others > {QUIET_FOREIGN} cores): figures marked (loaded) are not results"
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
