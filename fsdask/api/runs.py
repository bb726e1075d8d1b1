"""Run history across nights: ``STATE`` → ``STATE-without-.json.history.jsonl``.

Each ``fsdask run`` appends one JSON line per step: date, run id, step, status (ran /
skipped), runtime, the input fingerprints, and for a selecting step the method, the number
of features, the number selected and the ids of the top-k features.  ``fsdask history
STATE`` prints the table; ``fsdask report --history STATE --out DIR`` draws it
(:func:`write_history_report`).  The pipeline (:mod:`fsdask.pipeline`) appends the records;
the ``history`` and ``report`` commands read them.  Stability against the previous night is the Jaccard index
and Kuncheva's consistency index of the two top-k sets (:mod:`fsdask.evaluate.metrics`).
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
    }


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
        previous[rec["step"]] = rec
        out.append(rec)
    return out


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
    return "\n".join(lines)


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
