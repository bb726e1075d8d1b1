"""benchmarks/peers.py --quick end to end: one data set, the scikit-learn F-test and fsdask's Filter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")  # the peer used here (the [peers] extra)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # three Python processes (parent + two capped fits), each importing its stack
def test_peers_quick_ranks_the_relevant_features(tmp_path):
    out = tmp_path / "peers.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "peers.py"),
            "--quick",
            "--datasets",
            "spiral",
            "--methods",
            "f_test",
            "fsdask.Filter",
            "--results",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith("# benchmarks/peers.py, ")
    assert re.search(r"^# commit: [0-9a-f]{7,}", text, re.M)
    assert "# machine: " in text and "load average before" in text
    m = re.search(
        r"## spiral: 460 × (\d+), classification, relevant features at columns \[(\d+), (\d+)\]",
        text,
    )
    assert m, text
    p = int(m.group(1))
    ranks = {}
    for name in ("f_test", "fsdask.Filter"):
        row = re.search(
            rf"^\| {re.escape(name)} \| ([0-9.]+) / [^|]* \| (\d+) \| (\d+), (\d+) \|", text, re.M
        )
        assert row, f"no ranks for {name}:\n{text}"
        ranks[name] = (int(row.group(3)), int(row.group(4)))
        assert all(1 <= k <= p for k in ranks[name])
    # two classes of 230: Welch's t² is the one-way F, so both rank every feature alike
    assert ranks["f_test"] == ranks["fsdask.Filter"]
    assert re.search(r"^\| fsdask\.Filter \|.*\| [0-9.]+×( = 1/[0-9.e+]+)? f_test", text, re.M), (
        text
    )


def test_ratio_below_one_keeps_its_digits():
    import importlib.util

    spec = importlib.util.spec_from_file_location("peers_bench", ROOT / "benchmarks" / "peers.py")
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    assert peers._ratio(3.514) == "3.51×"
    assert peers._ratio(0.00432) == "0.00432× = 1/231"
