"""Regenerate every reproduction with the current code, then write examples/results/SUMMARY.md.

    python examples/reproduce_all.py [--quick] [--only NAME ...]

Runs every ``examples/reproduce_*.py`` in turn, each in its own subprocess (``--quick``
selects the reduced protocols, otherwise the papers' full protocols run; see the README for
the time each takes).  Each script writes its results files with a provenance header and a
``<name>.summary.json`` sidecar; SUMMARY.md is built from those sidecars only: one row per
paper table/figure with the paper's number, ours and the verdict.  A sidecar not rewritten
by this run is listed as stale, a script that fails is listed as failed, and either makes
the exit status 1.  The papers' tables and figures that no script reproduces are listed in
the section "Not attempted" (NOT_ATTEMPTED, with the reason), never omitted.  The verdicts
follow the one rule of ``examples/_common.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import EXAMPLES, QUICK, ROOT, header_text, results_dir

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

#: the papers' tables, figures and columns no script grades, and why (SUMMARY lists them)
NOT_ATTEMPTED: list[tuple[str, str]] = [
    (
        "CPFS Fig. 1 / Table 3 (glass: the weights A along λ)",
        "shown in cpfs_fig1_glass.md; a path, no number to grade",
    ),
    ("CPFS Fig. 6 and Table 4, HRCT", "the high-resolution CT data set is not public"),
    ("CPFS Table 4, housing", "the paper does not say how it made the regression target a class"),
    ("CPFS Fig. 10 (the face pixels selected)", "a picture of the selection; no number to grade"),
    (
        "Logo Fig. 4 (10⁶ irrelevant features)",
        "a scale run: benchmarks/logo_scale.py, logo_scale.txt",
    ),
    (
        "Logo Fig. 5a and Table 3 (CPU time)",
        "the authors' machine and MATLAB code; our timings are in the results files",
    ),
    (
        "Logo Fig. 8, Fig. 9 (feature weights of single runs)",
        "pictures of one run; no number to grade",
    ),
    (
        "Logo Table 2, FDR column",
        "reported in logo_uci.md, not graded: the paper's own-method FDR only",
    ),
    ("Logo Table 2, AMS and Simba columns", "no maintained implementation"),
    ("Q-α Fig. 2b (positive, sparse α on one draw)", "a picture of one run; no number to grade"),
    ("Q-α Figs. 4–5 (animal images)", "the image set is not public"),
    (
        "Q-α Table 1, lymph status and lymphoma columns",
        "lymph status (breast tumours, West et al.) is not in ../shared/data; lymphoma (Shipp "
        "2002 outcome, 58 samples) is not the DLBCL-vs-FL set we have (its outcome labels are not in the file)",
    ),
    (
        "Q-α Table 1, RAW, PCA-N, GS-N, RMB rows",
        "RAW and PCA-N are in qalpha_table1.md (graded as Q-α against PCA-N); GS-N and RMB have no implementation",
    ),
    (
        "Zarkoob Table 3.1, L0-SVM; Golub-Golub, RFE-SVM and FC-SVM on lymphoma and prostate",
        "L0-SVM has no implementation; the filters run on leukemia and colon only (filters_loo)",
    ),
    (
        "Zarkoob Table 3.2, 11 tumors; BSS/WSS-SVM rows",
        "11 tumors is not in ../shared/data; BSS/WSS-SVM is in hsic_tables.md, not graded",
    ),
    (
        "Zarkoob Chapter 2 (PCA and NMF on the CD133 data)",
        "exploratory analysis, no selection result",
    ),
]


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


#: the verdict rule in one paragraph (examples/_common.py has it in full)
RULE = (
    "The rule: error counts over n samples match when within the binomial standard error of the "
    "paper's rate at n (at least one error); means over runs within 2 standard errors of their "
    "difference; ties are ties (a tie for 1st is never 'better'); a supervised ranker is "
    "'better' only on the figure with the genes ranked inside every fold; win/tie/loss on the "
    "same data sets only; a number on other data or by another protocol is 'not comparable', "
    "with the reason.\n"
)


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
        + (
            "\nQuick protocols (reduced repetitions): the reference is the full-protocol "
            "[SUMMARY](full/SUMMARY.md).\n"
            if QUICK
            else ""
        )
        + "\nWritten by `examples/reproduce_all.py` from the `*.summary.json` sidecars the scripts wrote "
        "in this run; verdicts are computed by each script from its numbers with the one rule of "
        "`examples/_common.py` (see its results file for the protocol and the readings of the "
        "paper).\n\n"
        + RULE
        + "\n"
        + "Verdicts: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + "\n\n"
        + "| paper table / figure | paper | ours | verdict | results |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
        + "\n## Not attempted\n\n"
        + "".join(f"* {item}: {why}\n" for item, why in NOT_ATTEMPTED)
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
