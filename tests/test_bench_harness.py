"""benchmarks/_harness.py tells the benchmark's own CPU from other processes' (what "(loaded)" means)."""

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _harness  # noqa: E402

BUSY = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < {s}: pass\n"
#: busy for {s} CPU seconds however loaded the machine is (BUSY counts wall seconds)
BUSY_CPU = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_own_children_are_not_foreign():
    # The child's ~1.5 CPU seconds are the benchmark's own work: the meter subtracts them
    # from the machine's busy time.  Asserted on the own-time account, not on the foreign
    # figure, which also holds whatever else the machine does meanwhile (the other xdist
    # worker, another job on a shared CI host) and so cannot be bounded here.
    meter = _harness.ForeignMeter()
    subprocess.run([sys.executable, "-c", BUSY_CPU.format(s=1.5)], check=True)
    own = _harness._own_seconds() - meter.own
    busy = _harness._busy_seconds() - meter.busy
    assert own >= 1.4, own  # the reaped child is counted as this process tree's
    assert busy >= own - 0.2, (busy, own)  # and it is part of the machine's busy time


def test_a_process_outside_the_tree_is_foreign(tmp_path):
    # double fork: the busy process is re-parented away from this process tree
    code = (
        "import os, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', {BUSY.format(s=3.0)!r}], start_new_session=True)\n"
    )
    meter = _harness.ForeignMeter()
    subprocess.run([sys.executable, "-c", code], check=True)
    time.sleep(2.5)
    assert meter.cores() > 0.5
    time.sleep(1.0)  # let it end


def test_peak_rss_of_a_child_is_its_own():
    # ru_maxrss would report the parent's 400 MB in a child started after the parent grew
    code = (
        "import subprocess, sys\n"
        "import numpy as np\n"
        "big = np.ones(50_000_000)\n"
        f"sys.path.insert(0, {str(Path(_harness.__file__).parent)!r})\n"
        "out = subprocess.run([sys.executable, '-c', 'import _harness; print(_harness.peak_rss())'],"
        " capture_output=True, text=True, check=True, cwd=sys.path[0])\n"
        "print(out.stdout)\n"
    )
    child = int(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    assert child < 200 * 2**20, child / 2**20
    big = __import__("numpy").ones(50_000_000)  # this process's own peak is seen
    assert _harness.peak_rss() >= big.nbytes


def test_alternate_reports_each_round_as_it_ends(tmp_path, monkeypatch, capsys):
    # a run stopped before its last round (a cap, a kill) must still have shown its rounds
    monkeypatch.setattr(_harness, "foreign_cores", lambda seconds=5.0: 0.0)
    bench = _harness.Bench("x", tmp_path / "x.txt")
    best = bench.alternate({"a": lambda: {"time": 0.5}, "b": lambda: None}, repeat=3, warm=False)
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[x] round")]
    assert len(shown) == 6 and shown[0].startswith("[x] round 1/3 a: 0.500 s"), shown
    assert shown[-1].startswith("[x] round 3/3 b:")
    assert best["a"].seconds == 0.5 and best["a"].runs == 3
    assert bench.lines == []  # progress is not part of the result file


def test_a_self_timed_figure_keeps_its_best_runs_report(tmp_path, monkeypatch):
    """A callable that times itself reports more than its time (e.g. the client's CPU in
    workers_speedup): the figure keeps the dict of the run it chose, not of another run."""
    monkeypatch.setattr(_harness, "foreign_cores", lambda seconds=5.0: 0.0)
    runs = iter(
        [
            {"time": 0.7, "cpu": 1.0, "client_cpu": 0.3},
            {"time": 0.4, "cpu": 0.9, "client_cpu": 0.2},
            {"time": 0.6, "cpu": 1.1, "client_cpu": 0.5},
        ]
    )
    best = _harness.Bench("x", tmp_path / "x.txt").alternate(
        {"a": lambda: next(runs), "b": lambda: None}, repeat=3, warm=False
    )
    assert best["a"].seconds == 0.4 and best["a"].report == {
        "time": 0.4,
        "cpu": 0.9,
        "client_cpu": 0.2,
    }
    assert best["b"].report is None  # timed from outside: nothing reported
