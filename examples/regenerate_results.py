"""Regenerate everything in examples/results/ at one commit: reproductions, nightly, benchmarks.

    python examples/regenerate_results.py [--dry-run] [--skip NAME ...]

Runs, one subprocess at a time, ``examples/reproduce_all.py --quick`` (into
examples/results/), ``examples/reproduce_all.py`` (the papers' full protocols, into
examples/results/full/), the two nightly examples and every script of ``benchmarks/`` with
the arguments of the committed result files.  Each writes its own
result files with a provenance header naming the commit, so the tree must be clean: a run
from a modified tree would write headers no commit can reproduce, and this script refuses
to start, as it does when a step's optional modules (e.g. the ``[peers]`` extra) are
missing.  The benchmarks mark a figure "(loaded)" when other processes were busy; run this
on an otherwise idle machine: it takes about 2 h 30 min on 2 cores, the full protocols
~25 min of it and ``benchmarks/qalpha_scale.py`` ~55 min (each results file's header records
its own wall time).

At the end it lists every step with its exit status and wall time, and every file in
examples/results/ that this run did not rewrite (stale); either makes the exit status 1.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "examples" / "results"

#: name → command (after ``python``); the arguments are those the committed files record
STEPS: dict[str, list[str]] = {
    "reproduce_all": ["examples/reproduce_all.py", "--quick"],
    "reproduce_all_full": ["examples/reproduce_all.py"],
    "nightly": ["examples/nightly/simulate_nights.py"],
    "nightly_resume": ["examples/nightly/kill_and_resume.py"],
    "logo_scale": ["benchmarks/logo_scale.py", "--case", "spiral20k", "breast", "spiral1m"],
    "cpfs_scale": ["benchmarks/cpfs_scale.py", "all"],
    "qalpha_scale": [
        "benchmarks/qalpha_scale.py",
        "--variants",
        "power,basic,laplacian,supervised,power-float64",
        "--dense-sizes",
        "0",
    ],
    "hsic_scale": ["benchmarks/hsic_scale.py"],
    "workers_speedup": ["benchmarks/workers_speedup.py"],
    "scaling_model": ["benchmarks/scaling_model.py"],
    "ingest_csv": ["benchmarks/ingest_csv.py"],
    "io_floor": ["benchmarks/io_floor.py"],
    "open_formats": ["benchmarks/open_formats.py"],
    "peers": [
        "benchmarks/peers.py",
        "--datasets",
        "spiral",
        "weston",
        "zarkoob",
        "leukemia_golub",
        "--folds",
        "0",
        "--time-cap",
        "120",
    ],
    "busy_machine": ["benchmarks/busy_machine.py", "--sizes", "small,demo"],
    "atlas": ["benchmarks/atlas.py"],
    "confidence": ["benchmarks/confidence.py"],
    "out_of_core": [
        "benchmarks/out_of_core.py",
        "--methods",
        "ttest,hsic,qalpha,logo,cpfs,cpfs_passes",
        "--max-iter",
        "5",
    ],
}


#: step → (modules it needs that fsdask's core does not install, the extra that installs them)
NEEDS: dict[str, tuple[list[str], str]] = {
    "peers": (["sklearn", "skrebate", "pyHSICLasso"], "peers"),
    "open_formats": (["anndata", "h5py"], "h5ad"),
    "atlas": (["anndata", "scanpy"], "test"),
}


def missing_extras(steps) -> list[str]:
    """One line per step whose optional modules are not installed (a peers table without
    its peers would be committed as if it were the comparison)."""
    import importlib.util

    out = []
    for name in steps:
        mods, extra = NEEDS.get(name, ([], ""))
        absent = [m for m in mods if importlib.util.find_spec(m) is None]
        if absent:
            out.append(
                f"{name}: {', '.join(absent)} not installed; pip install -e '.[{extra}]' "
                f"or --skip {name}"
            )
    return out


def dirty() -> str:
    """``git status --porcelain`` of the tracked files ('' when clean)."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() if out.returncode == 0 else "not a git checkout"


def stale(started: float) -> list[str]:
    """Files of examples/results/ (and its subfolders) not rewritten since ``started``."""
    return sorted(
        str(p.relative_to(RESULTS))
        for p in RESULTS.rglob("*")
        if p.is_file() and p.stat().st_mtime < started
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--skip", nargs="+", default=[], choices=list(STEPS), metavar="NAME")
    args = ap.parse_args(argv)
    steps = {k: list(v) for k, v in STEPS.items() if k not in args.skip}
    if args.dry_run:
        for cmd in steps.values():
            print("python", " ".join(cmd))
        return 0
    if changes := dirty():
        print(
            "regenerate_results.py: the work tree has uncommitted changes; commit them first "
            f"so every header names a commit that reproduces it:\n{changes}",
            file=sys.stderr,
        )
        return 2
    if absent := missing_extras(steps):
        print(
            "regenerate_results.py: " + "\n  ".join(["missing modules:", *absent]), file=sys.stderr
        )
        return 2
    started = time.time()
    done: list[tuple[str, int, float]] = []
    for name, cmd in steps.items():
        print(f"\n=== {name}: python {' '.join(cmd)}", flush=True)
        t = time.perf_counter()
        rc = subprocess.run([sys.executable, *cmd], cwd=ROOT).returncode
        done.append((name, rc, time.perf_counter() - t))
    print("\nstep              exit   wall")
    for name, rc, wall in done:
        print(f"{name:16s} {rc:5d} {wall:7.0f} s")
    left = stale(started) if not args.skip else []
    if left:
        print("not rewritten by this run (stale):\n  " + "\n  ".join(left))
    return 1 if left or any(rc for _, rc, _ in done) else 0


if __name__ == "__main__":
    sys.exit(main())
