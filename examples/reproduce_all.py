"""Regenerate every reproduction with the current code, then write examples/results/SUMMARY.md.

    python examples/reproduce_all.py [--quick] [--only NAME ...]

Runs every ``examples/reproduce_*.py`` in turn, each in its own subprocess (``--quick``
selects the reduced protocols, otherwise the papers' full protocols run; see the README for
the time each takes).  Each script writes its results files with a provenance header and a
``<name>.summary.json`` sidecar; SUMMARY.md is built from those sidecars only: one row per
paper table/figure with the paper's number, ours and the verdict.  A sidecar not rewritten
by this run is listed as stale, a script that fails is listed as failed, and either makes
the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import EXAMPLES, ROOT, header_text, results_dir

#: script → argument lists, one subprocess each (CPFS runs its small sets, faces and genes apart)
RUNS: dict[str, list[list[str]]] = {
    "reproduce_filters_loo.py": [[]],
    "reproduce_hsic_synthetic.py": [[]],
    "reproduce_hsic_tables.py": [[]],
    "reproduce_cpfs_figures.py": [
        ["glass", "bupa", "pima", "housing", "housing_scaled", "ionosphere"],
        ["face"],
        ["gene_ALL"],
    ],
    "reproduce_cpfs_nips.py": [[]],
    "reproduce_logo_spiral.py": [[]],
    "reproduce_logo_uci.py": [[]],
    "reproduce_logo_microarray.py": [[]],
    "reproduce_qalpha_synthetic.py": [[]],
    "reproduce_qalpha_table1.py": [[]],
}


def scripts() -> list[str]:
    """Every reproduce_*.py next to this file (each must be listed in RUNS)."""
    found = sorted(p.name for p in EXAMPLES.glob("reproduce_*.py") if p.name != "reproduce_all.py")
    missing = [s for s in found if s not in RUNS]
    if missing:
        raise SystemExit(
            f"reproduce_all.py: {', '.join(missing)} not listed in RUNS; add it with its arguments"
        )
    return found


def run(script: str, args: list[str], quick: bool) -> tuple[int, float]:
    cmd = [sys.executable, str(EXAMPLES / script), *args, *(["--quick"] if quick else [])]
    print("$", " ".join(cmd[1:]), flush=True)
    t = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    return rc, time.perf_counter() - t


def summary_md(
    started: float, failures: list[str], timings: list[tuple[str, float]]
) -> tuple[str, bool]:
    """SUMMARY.md text from the sidecars, and whether every sidecar is from this run."""
    rows, stale = [], []
    counts: dict[str, int] = {}
    for path in sorted(results_dir().glob("*.summary.json")):
        if path.stat().st_mtime < started:
            stale.append(path.name)
            continue
        data = json.loads(path.read_text())
        sources = data.get("results") or [path.name.removesuffix(".summary.json")]
        links = ", ".join(f"[{m}]({m}.md)" for m in sources)
        for e in data["entries"]:
            counts[e["verdict"]] = counts.get(e["verdict"], 0) + 1
            reason = f" — {e['reason']}" if e.get("reason") else ""
            rows.append(
                f"| {e['item']} | {e['paper']} | {e['ours']} | **{e['verdict']}**{reason} "
                f"| {links} |".replace("\n", " ")
            )
    text = (
        "# Reproductions: the papers' numbers against ours\n\n"
        + header_text()
        + "\nWritten by `examples/reproduce_all.py` from the `*.summary.json` sidecars the scripts wrote "
        "in this run; verdicts are computed by each script from its numbers (see its results file for "
        "the protocol and the readings of the paper).\n\n"
        + "Verdicts: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + "\n\n"
        + "| paper table / figure | paper | ours | verdict | results |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
        + "\n## Scripts run\n\n"
        + "".join(f"* `{s}`: {t:.0f} s\n" for s, t in timings)
        + ("\n## Failed\n\n" + "".join(f"* {f}\n" for f in failures) if failures else "")
        + (
            "\n## Stale (not rewritten by this run)\n\n" + "".join(f"* {s}\n" for s in stale)
            if stale
            else ""
        )
    )
    return text, not stale


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="reduced protocols (minutes instead of hours)"
    )
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="run only these scripts (SUMMARY then lists the others' sidecars as stale)",
    )
    args = ap.parse_args()
    started = time.time()
    failures, timings = [], []
    for script in scripts():
        if args.only and script not in args.only and script.removesuffix(".py") not in args.only:
            continue
        for extra in RUNS[script]:
            rc, secs = run(script, extra, args.quick)
            label = " ".join([script, *extra])
            timings.append((label, secs))
            if rc != 0:
                failures.append(f"`{label}` exited with status {rc}")
    text, fresh = summary_md(started, failures, timings)
    out = results_dir() / "SUMMARY.md"
    out.write_text(text)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if fresh and not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
