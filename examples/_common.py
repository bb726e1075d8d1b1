"""Shared scaffolding for ``examples/reproduce_*.py``.

Every script: find the shared data (or exit 0 saying it skips), load datasets, and write a
markdown table of our numbers beside the paper's to ``examples/results/<name>.md``.  Every
results file starts with a provenance header written here (commit, exact command, UTC date,
machine, load average, wall time, protocol quick/full), and every script also writes a small
JSON sidecar ``<name>.summary.json`` (same header + one entry per paper table/figure with the
paper's number, ours and a verdict computed from them) from which ``reproduce_all.py``
builds ``examples/results/SUMMARY.md``::

    from _common import count_rule, count_verdict, entry, load, shared_data_dir, write_summary
    shared_data_dir()                      # exits 0 with a message if ../shared/data is absent
    X, y, info = load("leukemia_golub")
    write_results_md("my_experiment", "Title", ["method", "ours", "paper"], rows, notes="…")
    write_summary("my_experiment", [entry("Table 1, Golub", "1/72", "2/72",
                                          count_verdict(2, 1, 72), count_rule(1, 72))])

The verdict rule, one for every script (each part is a function below):

* **Counts over n samples** (LOO or CV errors, successes over n trials): ``match`` when ours is
  within the binomial standard error of the paper's rate at n — ``sqrt(n p (1 − p))`` counts,
  ``p`` the paper's rate — and never less than one count; otherwise ``better`` / ``worse`` in
  the metric's direction (:func:`count_verdict`, :func:`rate_verdict`).  3/77 against 2/77 is a
  match (tolerance 1.4); 22/60 against 15/60 is worse (tolerance 3.4).
* **Means over repeated runs** printed with their sd: ``match`` within 2 standard errors of
  the difference of the two means (:func:`mean_verdict`).
* **Supervised rankers**: graded on the figure the paper most likely reports, but ``better``
  only when the figure with the genes ranked inside every fold is better too
  (:func:`supervised_verdict`).
* **Ties are ties**: methods within the count tolerance of each other share a range of ranks;
  a tie for 1st matches the paper's rank 1 or 2 and is never ``better`` (:func:`rank_among`,
  :func:`rank_verdict`).  "Close to the best" on a curve read off a figure: within 10 % of the
  lowest value (:func:`close_to_best`).
* **Win/tie/loss** records are compared on the same data sets only: the paper's record is
  restricted to the sets we ran (:func:`wtl_verdict`).
* **Not comparable**: a paper number obtained on other data or by another protocol (another
  algorithm in the paper's column, another task, another version of the data set) is
  ``not comparable``, always with the specific reason (:func:`entry` refuses one without).
  A claim about an ordering (a rank, "best or close", win/tie/loss) is graded on our version
  of the data, with the difference in the reason.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

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
    quick and the full versions are kept side by side.  Created if needed.

    ``$FSDASK_RESULTS_DIR`` replaces ``examples/results`` (a trial run that must not touch
    the recorded results)."""
    d = Path(os.environ.get("FSDASK_RESULTS_DIR") or EXAMPLES / "results")
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


# ------------------------------------------------------------------------------ the verdict rule

VERDICTS = ("match", "better", "worse", "not comparable")
#: "close to the best" on a curve read off a figure: within this fraction of the lowest value
CLOSE_TO_BEST = 0.10


def count_tolerance(paper: float, n: int) -> float:
    """The tolerance, in counts, of a count over ``n`` samples against the paper's ``paper``.

    Parameters
    ----------
    paper : float
        The paper's count (errors, or successes) over ``n`` samples; fractional counts (a
        rate × n) are fine.
    n : int
        The number of samples (LOO folds, test points, trials) the counts are over.

    Returns
    -------
    float
        ``max(1, sqrt(n p (1 − p)))`` with ``p = paper / n``: the binomial standard error of
        the paper's rate at ``n``, in counts, and never less than one count (a rate of 0 or 1
        has no spread, and one error is the resolution of a LOO count).

    Examples
    --------
    >>> round(count_tolerance(2, 77), 2)  # Logo Table 4, DLBCL: 2 of 77 errors
    1.4
    >>> count_tolerance(0, 62)
    1.0
    """
    if n <= 0:
        raise ValueError(f"count_tolerance: n = {n}; the counts must be over at least one sample")
    p = min(max(paper / n, 0.0), 1.0)
    return max(1.0, math.sqrt(n * p * (1.0 - p)))


def _direction(ours: float, paper: float, lower_is_better: bool) -> str:
    return "better" if (ours < paper) == lower_is_better else "worse"


def count_verdict(ours: float, paper: float, n: int, *, lower_is_better: bool = True) -> str:
    """``match`` when ``|ours − paper| ≤`` :func:`count_tolerance` ``(paper, n)``, else
    ``better`` / ``worse`` in the metric's direction.

    Parameters
    ----------
    ours, paper : float
        Counts over the same ``n`` (errors by default; successes with
        ``lower_is_better=False``).
    n : int
        Samples the counts are over (where the paper's n differs, ours: the tolerance is then
        the spread of our estimate).
    lower_is_better : bool
        Direction of the metric.

    Returns
    -------
    str
        ``"match"``, ``"better"`` or ``"worse"``.

    Examples
    --------
    >>> count_verdict(3, 2, 77)  # one LOO error apart at n = 77
    'match'
    >>> count_verdict(22, 15, 60)
    'worse'
    """
    if abs(ours - paper) <= count_tolerance(paper, n) + 1e-9:
        return "match"
    return _direction(ours, paper, lower_is_better)


def rate_verdict(ours: float, paper: float, n: int, *, lower_is_better: bool = True) -> str:
    """:func:`count_verdict` of two rates (fractions in [0, 1]) over ``n`` samples.

    Examples
    --------
    >>> rate_verdict(0.254, 0.243, 768)  # CPFS Table 4, pima: 8 errors apart, tolerance 11.9
    'match'
    """
    return count_verdict(ours * n, paper * n, n, lower_is_better=lower_is_better)


def count_rule(paper: float, n: int, unit: str = "errors") -> str:
    """The tolerance as a row's reason says it.

    Examples
    --------
    >>> count_rule(2, 77)
    "match = within 1.4 errors of the paper's at n = 77 (binomial SE, ≥ 1)"
    """
    return (
        f"match = within {count_tolerance(paper, n):.1f} {unit} of the paper's at n = {n} "
        "(binomial SE, ≥ 1)"
    )


def mean_verdict(
    ours: tuple[float, float, int],
    paper: tuple[float, float, int],
    *,
    lower_is_better: bool = True,
) -> str:
    """Two means over repeated runs: ``match`` within 2 standard errors of their difference.

    Parameters
    ----------
    ours, paper : (mean, sd, runs)
        Each mean with the sd over its runs and the number of runs.
    lower_is_better : bool
        Direction of the metric.

    Returns
    -------
    str
        ``"match"`` when ``|m₁ − m₂| ≤ 2 sqrt(sd₁²/r₁ + sd₂²/r₂)``, else ``better`` / ``worse``.

    Examples
    --------
    >>> mean_verdict((22.3, 3.3, 10), (19.0, 5.2, 10))  # Logo Table 2, heart
    'match'
    """
    (m1, s1, r1), (m2, s2, r2) = ours, paper
    se = math.hypot(s1 / math.sqrt(r1), s2 / math.sqrt(r2))
    if abs(m1 - m2) <= 2 * se + 1e-9:
        return "match"
    return _direction(m1, m2, lower_is_better)


def supervised_verdict(
    paper: float, once: float, inside: float, n: int, *, lower_is_better: bool = True
) -> str:
    """A supervised ranker's count against the paper's: graded on ``once`` (genes ranked on all
    samples, as the paper most likely did), but ``better`` only when ``inside`` (genes ranked
    inside every fold, the honest figure) is better too; when only ``once`` is, ``match``.

    Examples
    --------
    >>> supervised_verdict(9, once=0, inside=11, n=62)  # Zarkoob RFE-SVM, colon
    'match'
    """
    v = count_verdict(once, paper, n, lower_is_better=lower_is_better)
    if v != "better":
        return v
    return (
        "better"
        if count_verdict(inside, paper, n, lower_is_better=lower_is_better) == "better"
        else "match"
    )


def rank_among(values: Sequence[float], i: int, n: int | None = None) -> tuple[int, int]:
    """The best and worst rank (1 = lowest) of ``values[i]``, values within the tolerance of
    ``values[i]`` tied with it.

    Parameters
    ----------
    values : sequence of float
        Rates in [0, 1] over ``n`` samples, or any values with ``n=None`` (exact ties only).
    i : int
        Which value to rank.
    n : int, optional
        Samples the rates are over: two rates tie when they are within
        :func:`count_tolerance` of ``values[i]`` at ``n``.

    Returns
    -------
    (int, int)
        ``(1 + #strictly lower, 1 + #strictly lower + #tied others)``.

    Examples
    --------
    >>> rank_among([0.254, 0.254, 0.254, 0.254, 0.349], 0)  # a 4-way tie
    (1, 4)
    """
    tol = 0.0 if n is None else count_tolerance(values[i] * n, n) / n
    lower = sum(v < values[i] - tol - 1e-12 for j, v in enumerate(values) if j != i)
    tied = sum(abs(v - values[i]) <= tol + 1e-12 for j, v in enumerate(values) if j != i)
    return 1 + lower, 1 + lower + tied


def rank_text(ranks: tuple[int, int], total: int) -> str:
    """``"rank 2 of 5"``, or ``"tied for 1st of 5 (ranks 1–4)"``."""
    best, worst = ranks
    if best == worst:
        return f"rank {best} of {total}"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(best if best < 20 else best % 10, "th")
    return f"tied for {best}{suffix} of {total} (ranks {best}–{worst})"


def rank_verdict(ours: tuple[int, int], paper: int | tuple[int, int]) -> str:
    """Our (best, worst) rank against the paper's: ``match`` when the ranges overlap (a tie
    for 1st matches a paper's 1st or 2nd, never beats it), ``better`` when our worst rank is
    above the paper's best, else ``worse``.

    Examples
    --------
    >>> rank_verdict((1, 4), 2)  # tied for 1st against the paper's rank 2
    'match'
    >>> rank_verdict((1, 4), 1)
    'match'
    """
    p_best, p_worst = (paper, paper) if isinstance(paper, int) else paper
    if ours[1] < p_best:
        return "better"
    if ours[0] > p_worst:
        return "worse"
    return "match"


def close_to_best(value: float, values: Sequence[float], rel: float = CLOSE_TO_BEST) -> bool:
    """Whether ``value`` is within ``rel`` (10 %) of the lowest of ``values`` (+ 1e-4 absolute,
    the figures' resolution): "best or close to best" on a curve read off a figure."""
    return value <= (1 + rel) * min(values) + 1e-4


def wtl_text(outcomes: Mapping[str, str]) -> str:
    """``"win/tie/loss"`` counts of per-data-set outcomes (``"win"``, ``"tie"``, ``"loss"``)."""
    got = list(outcomes.values())
    return "/".join(str(got.count(o)) for o in ("win", "tie", "loss"))


def wtl_verdict(ours: Mapping[str, str], paper: Mapping[str, str]) -> tuple[str, str, str]:
    """A competitor's win/tie/loss against the paper's method, on the same data sets only.

    Parameters
    ----------
    ours, paper : mapping of data set → ``"win"`` / ``"tie"`` / ``"loss"``
        The competitor's outcome per data set, ours and the paper's.  Sets we did not run are
        dropped from the paper's record; a set we ran that the paper's record lacks is refused.

    Returns
    -------
    (verdict, ours, paper) : (str, str, str)
        The verdict and the two records as ``"w/t/l over k data sets"``: ``match`` when the
        counts are equal; else ``better`` when the paper's method is further ahead in ours
        (competitor's losses − wins larger), ``worse`` when less far, ``match`` when equally.

    Raises
    ------
    ValueError
        When ``ours`` has a data set that ``paper`` does not grade, or no data set at all.

    Examples
    --------
    >>> wtl_verdict({"a": "tie", "b": "loss"}, {"a": "tie", "b": "loss", "c": "loss"})
    ('match', '0/1/1 over 2 data sets', '0/1/1 over 2 data sets')
    """
    extra = sorted(set(ours) - set(paper))
    if extra or not ours:
        raise ValueError(
            f"win/tie/loss: the paper's record has no outcome for {extra or 'any data set'}; "
            "compare on the data sets both ran"
        )
    same = {k: paper[k] for k in ours}

    def ahead(d: Mapping[str, str]) -> int:
        got = list(d.values())
        return got.count("loss") - got.count("win")

    k = len(ours)
    o, p = f"{wtl_text(ours)} over {k} data sets", f"{wtl_text(same)} over {k} data sets"
    if wtl_text(ours) == wtl_text(same) or ahead(ours) == ahead(same):
        return "match", o, p
    return ("better" if ahead(ours) > ahead(same) else "worse"), o, p


def outcome_from_means(
    peer: tuple[float, float, int], ref: tuple[float, float, int], alpha: float = 0.05
) -> str:
    """A competitor's win/tie/loss against the reference method on one data set, recovered from
    the printed means and sds (Welch's two-tailed t-test at ``alpha``; lower is better) — for a
    paper that prints only the total; check the per-set outcomes against it."""
    from scipy.stats import ttest_ind_from_stats

    (m1, s1, r1), (m2, s2, r2) = peer, ref
    p = ttest_ind_from_stats(m1, s1, r1, m2, s2, r2, equal_var=False).pvalue
    if not p < alpha:
        return "tie"
    return "win" if m1 < m2 else "loss"


def entry(item: str, paper: Any, ours: Any, verdict_: str, reason: str = "") -> dict:
    """One SUMMARY.md row: the paper's table/figure, its number, ours, and the verdict
    (``match`` / ``better`` / ``worse`` / ``not comparable``; the reason says why, or how)."""
    if verdict_ not in VERDICTS:
        raise ValueError(f"verdict {verdict_!r}: use match, better, worse or not comparable")
    if verdict_ == "not comparable" and not reason.strip():
        raise ValueError(
            f"{item}: 'not comparable' needs the reason (which data or protocol differ)"
        )
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
