"""benchmarks/_harness.py tells the benchmark's own CPU from other processes' (what "(loaded)" means)."""

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _harness  # noqa: E402

BUSY = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < {s}: pass\n"


def test_own_children_are_not_foreign():
    background = _harness.foreign_cores(1.5)  # whatever else this machine is doing now
    meter = _harness.ForeignMeter()
    subprocess.run([sys.executable, "-c", BUSY.format(s=1.5)], check=True)
    # the child's ~1 core is the benchmark's own work, not added to the others'
    assert meter.cores() < background + 0.5, (meter.cores(), background)


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
