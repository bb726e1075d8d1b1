"""Run history across nights: ``STATE`` → ``STATE-without-.json.history.jsonl``.

Each ``fsdask run`` appends one JSON line per step: date, run id, step, status (ran /
skipped), runtime, the input fingerprints, and for a selecting step the method, the number
of features, the number selected and the ids of the top-k features.  ``fsdask history
STATE`` prints the table; ``fsdask report --history STATE --out DIR`` draws it
(:func:`write_history_report`).  The pipeline (:mod:`fsdask.pipeline`) appends the records;
the ``history`` and ``report`` commands read them.  Stability against the previous night is the Jaccard index
and Kuncheva's consistency index of the two top-k sets (:mod:`fsdask.evaluate.metrics`);
the drift (:func:`drift`) names the features that entered and left the top-k and the rank
shifts of the top features, and — for a step run with ``--stability`` — says whether the
change exceeds what resampling noise explains (:func:`noise_jaccard`).
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
from typing import Any, Mapping

from fsdask.errors import ParameterError

TOP_K = 20
FORMAT = "fsdask-history/1"


def history_path(state_path: str) -> str:
    """The history file next to the state file ``state_path``.

    Parameters
    ----------
    state_path : str
        A pipeline's state file.

    Returns
    -------
    str
        ``STATE`` without ``.json``, plus ``.history.jsonl``.
    """
    base = state_path[: -len(".json")] if state_path.endswith(".json") else state_path
    return base + ".history.jsonl"


def read_config(path: str) -> Any:
    """The parsed YAML of the pipeline config at ``path`` (unchecked).

    Parameters
    ----------
    path : str
        The config file.

    Returns
    -------
    Any
        What the YAML holds; :func:`fsdask.pipeline.load_config` checks it.

    Raises
    ------
    ParameterError
        When the file cannot be read or is not YAML.
    """
    import yaml

    try:
        with open(path) as fh:
            return yaml.safe_load(fh)
    except OSError as exc:
        raise ParameterError(
            f"{path}: cannot read the pipeline config ({exc.strerror or exc})"
        ) from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None


def state_path(config_path: str, state: Any = None) -> str:
    """Where the pipeline of ``config_path`` records its state.

    Parameters
    ----------
    config_path : str
        The config file (absolute).
    state : str, optional
        Its ``state:`` key; default ``<config name>.state.json`` next to it.

    Returns
    -------
    str
    """
    state = state or os.path.splitext(os.path.basename(config_path))[0] + ".state.json"
    return os.path.join(os.path.dirname(config_path), str(state))


def state_of(path: str) -> str:
    """Accept a state file, a history file or a pipeline YAML; return the state file's path.

    Parameters
    ----------
    path : str
        The state file, its ``.history.jsonl`` or the pipeline's config.

    Returns
    -------
    str
        The absolute path of the state file.
    """
    path = os.path.abspath(os.fspath(path))
    if path.endswith((".yaml", ".yml")):
        cfg = read_config(path)
        return state_path(path, cfg.get("state") if isinstance(cfg, dict) else None)
    if path.endswith(".history.jsonl"):
        return path[: -len(".history.jsonl")] + ".json"
    return path


def read_history(path: str) -> list[dict]:
    """All records of a history file (missing file → []); a damaged line is an error naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(
            f"{path}: cannot read the run history ({exc}); move it away or run "
            "`fsdask run --restart`, which sets it aside and starts a new one"
        ) from None
    records = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or rec.get("format") != FORMAT:
                raise ValueError
        except ValueError:
            raise ParameterError(
                f"{path}: line {no} is not a history record (truncated or edited?); "
                "`fsdask run --restart` sets the file aside and starts a new one, "
                "or delete that line"
            ) from None
        records.append(rec)
    return records


def set_aside(path: str) -> str | None:
    """Rename a damaged history file to ``….corrupt-<UTC stamp>`` (never deleted)."""
    if not os.path.exists(path):
        return None
    aside = f"{path}.corrupt-{_dt.datetime.now(_dt.UTC).strftime('%Y%m%dT%H%M%S')}"
    os.replace(path, aside)
    return aside


def selection_summary(url: str, storage_options: Mapping[str, Any] | None, k: int = TOP_K) -> dict:
    """Method, n features, n selected and the top-k feature ids of a result store."""
    import numpy as np

    from fsdask.results import open_result

    res = open_result(url, storage_options=storage_options)
    rank = np.asarray(res["rank"].values)
    order = np.argsort(rank, kind="stable")[: min(k, rank.size)]
    return {
        "method": res.attrs.get("method"),
        "n_features": int(rank.size),
        "n_selected": int(np.asarray(res["selected"].values).sum()),
        "top_k": [str(f) for f in np.asarray(res["feature"].values)[order]],
        **stability_summary(res),
    }


#: selection frequencies a history record keeps (the largest; enough for the noise model)
MAX_FREQUENCIES = 1000


def stability_summary(res) -> dict:
    """The selection frequencies of a result of :class:`fsdask.Stability` (``frequency``:
    feature id → frequency, the ``MAX_FREQUENCIES`` largest nonzero) and its stable set
    (``stable``, when it has at most that many features); {} for other results."""
    import numpy as np

    if "stability" not in res:
        return {}
    freq = np.asarray(res["stability"].values)
    names = np.asarray(res["feature"].values)
    top = np.argsort(-freq, kind="stable")[:MAX_FREQUENCIES]
    top = top[freq[top] > 0]
    out: dict = {"frequency": {str(names[j]): round(float(freq[j]), 4) for j in top}}
    sel = np.flatnonzero(np.asarray(res["selected"].values))
    if sel.size <= MAX_FREQUENCIES:
        out["stable"] = [str(names[j]) for j in sel]
    return out


def append(path: str, record: Mapping[str, Any]) -> None:
    """Append one record (one write of one line, flushed and synced)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    from fsdask.io.secrets import redact

    line = redact(json.dumps({"format": FORMAT, **record}, default=str, ensure_ascii=False)) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


# ---------------------------------------------------------------------------------------------
# stability against the previous night
# ---------------------------------------------------------------------------------------------


def with_stability(records: list[dict]) -> list[dict]:
    """Records of selecting steps, each with ``jaccard`` / ``kuncheva`` against the previous
    record of the same step (None for a step's first night)."""
    from fsdask.evaluate.metrics import jaccard_stability, kuncheva_index

    previous: dict[str, dict] = {}
    out = []
    for rec in records:
        if rec.get("top_k") is None:
            continue
        rec = dict(rec, jaccard=None, kuncheva=None)
        prev = previous.get(rec["step"])
        if prev is not None:
            k = min(len(prev["top_k"]), len(rec["top_k"]))
            ids = {f: j for j, f in enumerate(dict.fromkeys(prev["top_k"][:k] + rec["top_k"][:k]))}
            a, b = [ids[f] for f in prev["top_k"][:k]], [ids[f] for f in rec["top_k"][:k]]
            if k:
                rec["jaccard"] = jaccard_stability([a, b])
                n = int(rec.get("n_features") or 0)
                if 0 < k < n and prev.get("n_features") == n:
                    rec["kuncheva"] = kuncheva_index([a, b], n)
            rec["drift"] = drift(prev, rec)
        previous[rec["step"]] = rec
        out.append(rec)
    return out


# ---------------------------------------------------------------------------------------------
# drift: what changed against the previous night, and whether noise explains it
# ---------------------------------------------------------------------------------------------

#: rank shifts are reported for the features in this many top places
SHIFT_TOP = 10
#: simulated pairs of the noise model, and its seed (the verdict is reproducible)
NOISE_DRAWS, NOISE_SEED = 2000, 0
#: a change "exceeds noise" when noise gives a Jaccard this low or lower less often than this
NOISE_LEVEL = 0.05


def drift(prev: Mapping[str, Any], rec: Mapping[str, Any]) -> dict:
    """What changed between two history records of one step.

    Parameters
    ----------
    prev, rec : dict
        The previous and the current record (``top_k``; ``frequency`` and ``stable`` for a
        step run with ``--stability``).

    Returns
    -------
    dict
        ``entered`` / ``left``: feature ids that entered / left the top-k; ``shifts``:
        ``[feature, previous place, place]`` for the features in the top ``SHIFT_TOP``
        places that moved (places from 1); for stability results also ``stable_jaccard``
        (Jaccard of the two stable sets), ``noise_p`` (how often two selections drawn from
        the previous run's frequencies are at most as similar, :func:`noise_jaccard`) and
        ``exceeds_noise`` (``noise_p < NOISE_LEVEL``); otherwise those three are None.
    """
    a, b = list(prev.get("top_k") or []), list(rec.get("top_k") or [])
    k = min(len(a), len(b))
    a, b = a[:k], b[:k]
    place = {f: i + 1 for i, f in enumerate(a)}
    out: dict = {
        "entered": [f for f in b if f not in place],
        "left": [f for f in a if f not in set(b)],
        "shifts": [
            [f, place[f], i + 1]
            for i, f in enumerate(b[:SHIFT_TOP])
            if place.get(f, i + 1) != i + 1
        ],
        "stable_jaccard": None,
        "noise_p": None,
        "exceeds_noise": None,
    }
    freq, s0, s1 = prev.get("frequency"), prev.get("stable"), rec.get("stable")
    if freq and s0 is not None and s1 is not None:
        union = set(s0) | set(s1)
        jac = 1.0 if not union else len(set(s0) & set(s1)) / len(union)
        p = float((noise_jaccard(freq) <= jac + 1e-12).mean())
        out.update(stable_jaccard=round(jac, 4), noise_p=round(p, 4), exceeds_noise=p < NOISE_LEVEL)
    return out


def noise_jaccard(frequency: Mapping[str, float], draws: int = NOISE_DRAWS):
    """Jaccard indices of pairs of selections that differ by resampling noise alone.

    Each selection takes every feature independently with its selection frequency π_j
    (the previous run's): two fits on independent halves of the data select feature j with
    probability π_j each.  Fits on all samples vary less than fits on halves, so the model
    over-states the noise: a change it cannot explain is a real change.

    Parameters
    ----------
    frequency : dict
        Feature id → selection frequency.
    draws : int
        Simulated pairs.

    Returns
    -------
    ndarray (draws,).  Memory: draws × (number of features with π_j > 0) booleans.
    """
    import numpy as np

    pi = np.clip(np.asarray(list(frequency.values()), dtype=np.float64), 0, 1)
    rng = np.random.default_rng(NOISE_SEED)
    s1 = rng.random((draws, pi.size)) < pi
    s2 = rng.random((draws, pi.size)) < pi
    union = (s1 | s2).sum(1)
    return np.where(union > 0, (s1 & s2).sum(1) / np.maximum(union, 1), 1.0)


def drift_lines(rows: list[dict]) -> list[str]:
    """The drift of each changed run as indented lines under the history table."""
    lines = []
    for r in rows:
        d = r.get("drift")
        if not d or not (d["entered"] or d["left"] or d["shifts"]):
            continue
        shifts = ", ".join(f"{f} {p0}→{p1}" for f, p0, p1 in d["shifts"][:6])
        lines.append(
            f"  {str(r.get('date', '?'))[:19]} {r['step']}: entered {', '.join(d['entered']) or '-'}; "
            f"left {', '.join(d['left']) or '-'}; moved {shifts or '-'}; {noise_verdict(d)}"
        )
    return lines


def noise_verdict(d: Mapping[str, Any]) -> str:
    """Whether a drift exceeds resampling noise, in words."""
    if d.get("exceeds_noise") is None:
        return "noise unknown (run the step with --stability N)"
    word = "exceeds" if d["exceeds_noise"] else "within"
    return f"{word} resampling noise (stable-set Jaccard {d['stable_jaccard']:.2f}, p={d['noise_p']:.3f})"


def drift_alert(step: str, rows: list[dict], threshold: float) -> str | None:
    """The alert line when the last record of ``step`` has a top-k Jaccard against the
    previous run below ``threshold`` (the step key ``alert_on_drift``), else None."""
    mine = [r for r in rows if r["step"] == step]
    if not mine or mine[-1].get("jaccard") is None or mine[-1]["jaccard"] >= threshold:
        return None
    r, d = mine[-1], mine[-1].get("drift") or {}
    return (
        f"drift alert: step {step}: top-{len(r['top_k'])} Jaccard {r['jaccard']:.2f} < "
        f"{threshold:g} against the previous run; entered {', '.join(d.get('entered', [])[:5]) or '-'}; "
        f"left {', '.join(d.get('left', [])[:5]) or '-'}; {noise_verdict(d)}"
    )


def _fmt(v: Any, spec: str = "") -> str:
    return "-" if v is None else format(v, spec)


def short(fp: Mapping[str, Any] | None) -> str:
    """A short printable id of a fingerprint (for tables and logs)."""
    if fp is None:
        return "-"
    if fp.get("snapshot"):  # an Icechunk input: its snapshot id, whole (for --as-of)
        return str(fp["snapshot"])
    text = (
        fp.get("fingerprint")
        or fp.get("hash")
        or fp.get("digest")
        or fp.get("etag")
        or json.dumps(fp)
    )
    return str(text).split(":")[-1][:12]


def table(records: list[dict], show_top: int = 5) -> str:
    """The history as a text table, one line per selecting step and night."""
    rows = with_stability(records)
    if not rows:
        return "no selecting step recorded yet"
    head = (
        f"{'date':<20} {'step':<16} {'status':<8} {'input':<12} {'selected':>8} {'jaccard':>7} "
        f"{'kuncheva':>8} {'seconds':>8}  top features"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        fps = r.get("inputs") or {}
        fp = short(next(iter(fps.values()))) if fps else "-"
        top = ", ".join(r["top_k"][:show_top]) + (" …" if len(r["top_k"]) > show_top else "")
        lines.append(
            f"{str(r.get('date', '?'))[:19]:<20} {r['step'][:16]:<16} {r.get('status', '?'):<8} "
            f"{fp:<12} {r.get('n_selected', '-'):>8} {_fmt(r['jaccard'], '.3f'):>7} "
            f"{_fmt(r['kuncheva'], '.3f'):>8} {_fmt(r.get('seconds'), '.1f'):>8}  {top}"
        )
    drifted = drift_lines(rows)
    return "\n".join(lines + (["", "drift against the previous run:", *drifted] if drifted else []))


# ---------------------------------------------------------------------------------------------
# the report page
# ---------------------------------------------------------------------------------------------


def _plot_series(
    plt,
    series: dict[str, list[tuple[int, float]]],
    ylabel: str,
    path: str,
    ylim: tuple | None = None,
) -> None:
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for name, pts in series.items():
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=name)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("run (night)")
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_history(records: list[dict], rows: list[dict], night: dict, out_dir: str) -> None:
    """history_selected.png, history_stability.png and history_runtime.png in ``out_dir``."""
    from fsdask.report import pyplot

    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    by_step: dict[str, list[dict]] = {}
    for r in rows:
        by_step.setdefault(r["step"], []).append(r)
    _plot_series(
        plt,
        {s: [(night[r["run"]], r["n_selected"]) for r in rs] for s, rs in by_step.items()},
        "features selected",
        os.path.join(out_dir, "history_selected.png"),
    )
    _plot_series(
        plt,
        {f"{s} Jaccard": [(night[r["run"]], r["jaccard"]) for r in rs] for s, rs in by_step.items()}
        | {
            f"{s} Kuncheva": [(night[r["run"]], r["kuncheva"]) for r in rs]
            for s, rs in by_step.items()
        },
        "top-k stability vs previous run",
        os.path.join(out_dir, "history_stability.png"),
        (-1.05, 1.05),
    )
    steps: dict[str, list] = {}
    for r in records:
        steps.setdefault(r["step"], []).append((night[r.get("run")], r.get("seconds")))
    _plot_series(plt, steps, "runtime (s)", os.path.join(out_dir, "history_runtime.png"))


def write_history_report(state: str, out_dir: str, *, page: str = "history.html") -> str:
    """Write ``out_dir/page`` with plots of the history next to ``state``; return its path."""
    state = state_of(state)
    hpath = history_path(state)
    records = read_history(hpath)
    if not records:
        raise ParameterError(
            f"{hpath}: no run history yet; it is written by `fsdask run` next to the "
            "state file — pass the state file (or config) of a pipeline that has run"
        )
    runs = list(dict.fromkeys(r.get("run") for r in records))
    night = {run: i + 1 for i, run in enumerate(runs)}
    rows = with_stability(records)
    _plot_history(records, rows, night, out_dir)
    changed = [r for r in rows if r["jaccard"] is not None and r["jaccard"] < 1]
    trs = "".join(
        f"<tr><td>{night[r['run']]}</td><td>{html.escape(str(r.get('date', ''))[:19])}</td>"
        f"<td>{html.escape(r['step'])}</td><td>{r.get('status', '')}</td><td>{r.get('n_selected', '')}</td>"
        f"<td>{_fmt(r['jaccard'], '.3f')}</td><td>{_fmt(r['kuncheva'], '.3f')}</td>"
        f"<td>{_fmt(r.get('seconds'), '.1f')}</td>"
        f"<td{' class=changed' if r in changed else ''}>{html.escape(', '.join(r['top_k'][:8]))}</td></tr>"
        for r in rows
    )
    summary = (
        (
            "the top-k selection changed in run(s) "
            + ", ".join(f"{night[r['run']]} ({html.escape(r['step'])})" for r in changed)
        )
        if changed
        else "the top-k selection did not change between runs"
    )
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>fsdask run history</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{padding:2px 8px;text-align:left}}
.changed{{background:#fde2c8}} img{{max-width:100%}}</style></head><body>
<h1>Run history</h1><p>{html.escape(hpath)} — {len(runs)} run(s). <b>{summary}</b>.</p>
<h2>Features selected</h2><img src="history_selected.png" alt="selected count per run">
<h2>Stability of the top-k against the previous run</h2>
<p>Jaccard |A∩B|/|A∪B| and Kuncheva's index (1 = same set, ≈0 = chance overlap).</p>
<img src="history_stability.png" alt="stability per run">
{drift_panel(rows, night)}
<h2>Runtime per step</h2><img src="history_runtime.png" alt="runtime per step">
<h2>Table</h2><table><tr><th>run</th><th>date</th><th>step</th><th>status</th><th>selected</th>
<th>Jaccard</th><th>Kuncheva</th><th>s</th><th>top features</th></tr>{trs}</table></body></html>
"""
    path = os.path.join(out_dir, page)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(body)
    os.replace(tmp, path)
    return path


def drift_panel(rows: list[dict], night: Mapping[Any, int]) -> str:
    """The history page's drift section: per changed run, the features that entered and
    left the top-k, the rank shifts of the top features and the noise verdict."""
    changed = [
        r
        for r in rows
        if r.get("drift") and (r["drift"]["entered"] or r["drift"]["left"] or r["drift"]["shifts"])
    ]
    if not changed:
        return "<h2>Drift</h2><p>No run changed its top features against the run before.</p>"
    esc = html.escape
    trs = "".join(
        f"<tr><td>{night[r['run']]}</td><td>{esc(r['step'])}</td>"
        f"<td>{esc(', '.join(r['drift']['entered'][:10])) or '-'}</td>"
        f"<td>{esc(', '.join(r['drift']['left'][:10])) or '-'}</td>"
        f"<td>{esc(', '.join(f'{f} {a}→{b}' for f, a, b in r['drift']['shifts'][:8])) or '-'}</td>"
        f"<td{' class=changed' if r['drift'].get('exceeds_noise') else ''}>"
        f"{esc(noise_verdict(r['drift']))}</td></tr>"
        for r in changed
    )
    return (
        "<h2>Drift</h2><p>Features that entered and left the top-k against the run before, "
        "places that moved among the top features, and whether the change exceeds what "
        "resampling noise explains (steps run with <code>--stability N</code>: two "
        "selections drawn from the previous run's selection frequencies are compared with "
        "the two stable sets).</p><table><tr><th>run</th><th>step</th><th>entered</th>"
        f"<th>left</th><th>moved (place before→now)</th><th>vs noise</th></tr>{trs}</table>"
    )


def history_pages(state: str):
    """``write(folder)`` adding history.html (+ PNGs) for the pipeline of ``state`` to a report
    folder, and a link to it from the folder's index.html; the history is read now."""
    state = state_of(state)
    records = read_history(history_path(state))
    if not records:
        raise ParameterError(
            f"{history_path(state)}: no run history yet; it is written by `fsdask run` next "
            "to the state file — pass the state file (or config) of a pipeline that has run"
        )

    def write(folder) -> None:
        write_history_report(state, str(folder))
        index = os.path.join(folder, "index.html")
        if os.path.exists(index):
            link_history(index)
        else:
            with open(index, "w", encoding="utf-8") as fh:
                fh.write(
                    '<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; '
                    'url=history.html"><a href="history.html">run history</a>\n'
                )

    return write


def history_report(out: str, pages, *, overwrite: bool = False, inputs=()) -> str:
    """A report folder holding only the run-history page (published like every report)."""
    from fsdask.io.outputs import REPORT_MARKER, publish

    with publish(out, kind="report", overwrite=overwrite, inputs=inputs) as tmp:
        os.makedirs(tmp)
        pages(tmp)
        with open(
            os.path.join(tmp, REPORT_MARKER), "w"
        ) as fh:  # last: marks the folder as a report
            json.dump({"fsdask_kind": "report", "method": "history"}, fh)
    return os.path.join(os.path.abspath(out), "history.html")


def link_history(index: str) -> None:
    """Add a link to history.html at the top of a result report's index.html."""
    with open(index, encoding="utf-8") as fh:
        text = fh.read()
    link = '<p><a href="history.html">run history across nights</a></p>'
    if link in text:
        return
    at = text.find("<body>")
    text = text[: at + 6] + link + text[at + 6 :] if at >= 0 else link + text
    with open(index, "w", encoding="utf-8") as fh:
        fh.write(text)
