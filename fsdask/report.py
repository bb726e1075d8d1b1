"""A self-contained HTML report of a selection result, with PNG figures beside it.

``make_report(result, out_dir, data=…, evaluations=[…])`` writes ``out_dir/index.html`` and:

=================  ===========================================================================
file               content (written when the input has it)
=================  ===========================================================================
weights.png        the weights sorted in decreasing order, the selection cut marked (log rank
                   axis; thinned to ~3000 points, so 10⁶ features plot quickly)
convergence.png    the objective trace (result attribute ``objective``) and its change per iteration
path_<var>.png     every result variable with a *path dimension*: a dim named ``lambda``, ``rho``,
                   ``iteration``/``iter``/``step``, or ending in ``_path`` (e.g. CPFS's
                   ``weight_path(lambda, feature)``, HSIC's ``n_selected(rho)``, Q-α's
                   ``alpha_path(iteration, feature)``); 2-D variables over (path, feature) plot the
                   trajectories of the top features, 1-D ones a single curve
cv.png             cross-validation curves: error rate against the number of top features, from
                   ``--evaluation`` stores or ``cv_error_rate`` variables merged into the result
heatmap.png        with ``--data``: the top features across samples (z-scored per feature),
                   samples grouped by class
stability.png      a :class:`fsdask.Stability` result: the stability path (stable-set size
                   against the threshold τ) and the top features' selection frequencies with
                   their intervals, the threshold and the plain fit's top-k marked; the page
                   adds the stable set against the plain top-k and the error bound
ranked.csv         with ``csv=True``: rank, feature, weight, selected for every feature, and
                   pvalue, pvalue_adj, direction when the method gives them
=================  ===========================================================================

The HTML refers to the PNGs by relative path, inlines its CSS and needs no server.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr

from fsdask.errors import InputError

PATH_DIM = re.compile(r"^(lambda|lambdas|rho|rhos|iteration|iterations|iter|step)$|_path$|^path")


def pyplot():
    """matplotlib's ``pyplot`` on the Agg backend (figures are written to files, never shown).

    Returns
    -------
    module
        ``matplotlib.pyplot``.

    Raises
    ------
    MissingDependencyError
        When matplotlib (``fsdask[eval]``) is not installed.
    """
    from fsdask.errors import import_optional

    matplotlib = import_optional("matplotlib", "eval", "reports")
    matplotlib.use("Agg")
    return import_optional("matplotlib.pyplot", "eval", "reports")


def path_variables(result: xr.Dataset) -> list[str]:
    """Names of the result variables that have a path dimension (see the module docstring)."""
    return [
        str(v) for v in result.data_vars if any(PATH_DIM.search(str(d)) for d in result[v].dims)
    ]


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    pyplot().close(fig)
    return path.name


def _thin_ranks(p: int, n_points: int = 3000) -> np.ndarray:
    if p <= n_points:
        return np.arange(p)
    return np.unique(
        np.concatenate([np.arange(min(p, 200)), np.geomspace(1, p, n_points).astype(np.int64) - 1])
    )


def plot_weights(result: xr.Dataset, out: Path) -> str:
    plt = pyplot()
    order = np.argsort(result["rank"].values, kind="stable")
    w = result["weight"].values[order]
    k = int(result["selected"].values.sum())
    idx = _thin_ranks(w.size)
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.plot(idx + 1, w[idx], ".-", ms=2, lw=0.8, color="#1f5fa8")
    if 0 < k < w.size:
        ax.axvline(k + 0.5, color="#c0392b", ls="--", lw=1)
        ax.text(
            k + 0.5, ax.get_ylim()[1], f"  cut: {k} selected", color="#c0392b", va="top", fontsize=8
        )
    ax.set_xscale("log")
    ax.set_xlabel("rank (log scale)")
    ax.set_ylabel("weight")
    ax.set_title(
        f"{result.attrs.get('method', 'result')}: weights sorted in decreasing order", fontsize=10
    )
    ax.grid(alpha=0.3)
    return _save(fig, out / "weights.png")


def plot_convergence(objective: Sequence[float], out: Path) -> str:
    plt = pyplot()
    obj = np.asarray(objective, dtype=np.float64)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    axes[0].plot(np.arange(1, obj.size + 1), obj, "o-", ms=3)
    axes[0].set_xlabel("iteration")
    axes[0].set_ylabel("objective")
    axes[0].grid(alpha=0.3)
    if obj.size > 1:
        d = np.abs(np.diff(obj))
        d = np.where(d > 0, d, np.nan)
        axes[1].semilogy(np.arange(2, obj.size + 1), d, "o-", ms=3, color="#7d3c98")
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("|change|")
    axes[1].grid(alpha=0.3)
    fig.suptitle("convergence", fontsize=10)
    return _save(fig, out / "convergence.png")


def plot_path(result: xr.Dataset, var: str, out: Path, n_lines: int = 15) -> str:
    plt = pyplot()
    da_ = result[var]
    pdim = next(d for d in da_.dims if PATH_DIM.search(str(d)))
    x = da_[pdim].values if pdim in da_.coords else np.arange(da_.sizes[pdim])
    fig, ax = plt.subplots(figsize=(7, 3.4))
    if da_.ndim == 1:
        ax.plot(x, da_.values, "o-", ms=3)
        ax.set_ylabel(var)
    elif da_.ndim == 2 and "feature" in da_.dims:
        vals = da_.transpose(pdim, "feature").values
        order = (
            np.argsort(result["rank"].values, kind="stable")[:n_lines]
            if "rank" in result
            else np.argsort(-np.abs(vals[-1]))[:n_lines]
        )
        feats = result["feature"].values
        for j in order:
            ax.plot(x, vals[:, j], lw=1, label=str(feats[j]))
        ax.legend(fontsize=6, ncol=3, loc="best")
        ax.set_ylabel(f"{var} (top {len(order)} features)")
    else:
        vals = da_.transpose(pdim, ...).values.reshape(da_.sizes[pdim], -1)
        ax.plot(x, vals[:, :n_lines], lw=1)
        ax.set_ylabel(var)
    ax.set_xlabel(str(pdim))
    if (
        np.issubdtype(np.asarray(x).dtype, np.number)
        and np.all(np.asarray(x) > 0)
        and np.ptp(np.log10(np.asarray(x, float))) > 2
    ):
        ax.set_xscale("log")
    ax.set_title(f"{var} along {pdim}", fontsize=10)
    ax.grid(alpha=0.3)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", var)
    return _save(fig, out / f"path_{safe}.png")


def plot_cv(evaluations: Sequence[Any], out: Path) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for ev in evaluations:
        c = ev.curve
        lab = f"{ev.protocol}, {ev.selection}, {ev.classifier}: best {ev.best_error:.3f} @ {ev.best_n_features}"
        ax.plot(c.index, c["error_rate"], "o-", ms=2.5, lw=1, label=lab)
    ax.set_xlabel("number of top-ranked features fed to the classifier")
    ax.set_ylabel("cross-validated error rate")
    ax.set_title("cross-validation curves", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out / "cv.png")


def plot_heatmap(
    Xtop: np.ndarray,
    names: Sequence[str],
    y: np.ndarray | None,
    class_names: Sequence[str] | None,
    out: Path,
) -> str:
    plt = pyplot()
    Z = np.asarray(Xtop, dtype=np.float64)
    sd = Z.std(axis=0)
    Z = (Z - Z.mean(axis=0)) / np.where(sd > 0, sd, 1)
    order = np.argsort(y, kind="stable") if y is not None else np.arange(Z.shape[0])
    fig, ax = plt.subplots(figsize=(8, 0.18 * len(names) + 1.4))
    im = ax.imshow(
        Z[order].T, aspect="auto", cmap="RdBu_r", vmin=-2.5, vmax=2.5, interpolation="nearest"
    )
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([str(n)[:28] for n in names], fontsize=6)
    ax.set_xlabel("samples" + (" (grouped by class)" if y is not None else ""))
    if y is not None:
        ys = np.asarray(y)[order]
        bounds = np.flatnonzero(ys[1:] != ys[:-1]) + 0.5
        for b in bounds:
            ax.axvline(b, color="k", lw=1)
        starts = np.concatenate([[0], bounds + 0.5])
        ends = np.concatenate([bounds + 0.5, [ys.size]])
        for s, e in zip(starts, ends):
            lab = ys[int(s)]
            if (
                class_names is not None
                and np.issubdtype(np.asarray(lab).dtype, np.integer)
                and 0 <= lab < len(class_names)
            ):
                lab = class_names[int(lab)]
            ax.text((s + e) / 2 - 0.5, -0.8, str(lab), ha="center", va="bottom", fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.03, label="z-score")
    ax.set_title("top features across samples", fontsize=10, pad=14)
    return _save(fig, out / "heatmap.png")


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:980px;
color:#222;padding:0 1em}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.88em}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f4f6f8}td.num{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;
border:1px solid #eee}.note{color:#555;font-size:.9em}.sel{color:#1e8449;font-weight:600}"""


def _meta_rows(result: xr.Dataset) -> list[tuple[str, str]]:
    from fsdask.io.secrets import redact

    a = result.attrs
    keys = [
        "method",
        "estimator",
        "parameters",
        "n_features",
        "n_selected",
        "n_iter",
        "converged",
        "wall_time_s",
        "n_constant_features",
        "input_store",
        "input_fingerprint",
        "scheduler",
        "fsdask_version",
        "dask_version",
        "xarray_version",
    ]
    rows = []
    for k in keys:
        if k in a:
            v = a[k]
            rows.append((k, redact(json.dumps(v) if isinstance(v, (dict, list)) else str(v))))
    return rows


#: the report table's headers of the per-feature test results (:data:`fsdask.results.TEST_COLUMNS`)
TEST_HEADERS = {"pvalue": "p-value", "pvalue_adj": "BH-adjusted p", "direction": "direction"}


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str], num: Sequence[int] = ()) -> str:
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in header)
    body = []
    for r in rows:
        cells = "".join(
            f"<td class='num'>{html.escape(str(v))}</td>" if i in num else f"<td>{v}</td>"
            for i, v in enumerate(r)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


def make_report(
    result: xr.Dataset,
    out_dir: str | os.PathLike,
    *,
    data: xr.Dataset | None = None,
    evaluations: Sequence[Any] = (),
    csv: bool = False,
    top: int = 30,
    title: str | None = None,
    overwrite: bool = False,
    inputs: Sequence[str] = (),
    extra: Any = None,
) -> Path:
    """Write ``out_dir/index.html`` and its PNGs for ``result``; return the HTML path.

    ``extra(folder)``, if given, writes more pages into the report folder before it is published.

    The folder is written complete under a temporary name and then renamed into place
    (:func:`fsdask.io.outputs.publish`): a failed report leaves nothing, and an existing
    ``out_dir`` is replaced only if it is an fsdask report and ``overwrite`` is given.

    Parameters
    ----------
    result
        A selection result (``weight``, ``rank``, ``selected`` over ``feature``).
    data
        The dataset it was computed on (optional): its feature ids must match; adds the
        heatmap of the top features and their per-class means.
    evaluations
        :class:`fsdask.evaluate.EvaluationResult` objects to draw as CV curves (result
        variables ``cv_error_rate`` are drawn too).
    csv
        Also write ``ranked.csv`` (every feature, best first).
    top
        How many top features to list (and draw in the heatmap).
    """
    from fsdask.io.outputs import REPORT_MARKER, publish

    if not all(v in result for v in ("weight", "rank", "selected")):
        raise InputError(
            "not a selection result: it needs 'weight', 'rank' and 'selected' over 'feature'"
        )
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise InputError(f"top={top!r}: expected a whole number ≥ 0")
    with publish(out_dir, kind="report", overwrite=overwrite, inputs=inputs) as tmp:
        os.makedirs(tmp)
        _write_report(
            result, Path(tmp), data=data, evaluations=evaluations, csv=csv, top=top, title=title
        )
        if extra is not None:  # more pages beside index.html (e.g. the run history)
            extra(Path(tmp))
        with open(
            os.path.join(tmp, REPORT_MARKER), "w"
        ) as fh:  # last: marks the folder as a report
            json.dump({"fsdask_kind": "report", "method": str(result.attrs.get("method", ""))}, fh)
    return Path(os.path.abspath(os.fspath(out_dir))) / "index.html"


def _write_report(
    result: xr.Dataset,
    out: Path,
    *,
    data: xr.Dataset | None,
    evaluations: Sequence[Any],
    csv: bool,
    top: int,
    title: str | None,
) -> Path:
    figs = _result_figures(result, out, evaluations)
    order = np.argsort(result["rank"].values, kind="stable")[:top]
    relevant, truth_html = _against_truth(result, data)
    class_cols: list[str] = []
    class_means = None
    if data is not None:
        fig, class_cols, class_means = _data_figure(result, data, order, out)
        figs.append(fig)
    top_html = _top_table(result, order, relevant, class_cols, class_means)
    if csv:
        from fsdask.results import write_csv

        write_csv(result, str(out / "ranked.csv"))
    notes = []
    if relevant:
        notes.append(
            "<p class='note'>★ = a truly relevant feature (dataset attribute relevant_features)</p>"
        )
    notes.append(truth_html)
    notes += confidence_parts(result, out)
    if csv:
        notes.append(
            "<p class='note'>All features, ranked: <a href='ranked.csv'>ranked.csv</a></p>"
        )
    index = out / "index.html"
    index.write_text(_page(result, title, figs, len(order), top_html, notes), encoding="utf-8")
    return index


def _result_figures(
    result: xr.Dataset, out: Path, evaluations: Sequence[Any]
) -> list[tuple[str, str, str]]:
    """(section, file, caption) of the figures the result alone gives: weights, convergence,
    paths and cross-validation curves."""
    from fsdask.evaluate.protocol import EvaluationResult

    figs = [
        (
            "Weights",
            plot_weights(result, out),
            "Weights in decreasing order; the dashed line is the method's selection cut.",
        )
    ]
    obj = result.attrs.get("objective")
    if isinstance(obj, (list, tuple, np.ndarray)) and len(obj) > 0:
        converged = html.escape(str(result.attrs.get("converged", "n/a")))
        figs.append(
            (
                "Convergence",
                plot_convergence(obj, out),
                f"Objective per iteration ({len(obj)} recorded; converged: {converged}).",
            )
        )
    for var in path_variables(result):
        caption = f"Variable <code>{html.escape(var)}</code> along its path dimension."
        figs.append(("Paths", plot_path(result, var, out), caption))
    evs = list(evaluations)
    if "cv_error_rate" in result:
        cv = result[[v for v in result.data_vars if str(v).startswith("cv_")]]
        cv = cv.assign_attrs({k: v for k, v in result.attrs.items() if str(k).startswith("cv_")})
        evs.append(EvaluationResult.from_dataset(cv))
    if evs:
        caption = "<br>".join(html.escape(e.label) for e in evs)
        figs.append(("Cross-validation", plot_cv(evs, out), caption))
    return figs


def _against_truth(result: xr.Dataset, data: Any) -> tuple[set[int] | None, str]:
    """The relevant features a synthetic dataset names, and the paragraph that scores the
    selection against them (empty when the dataset names none)."""
    if not isinstance(data, xr.Dataset) or data.attrs.get("relevant_features") is None:
        return None, ""
    from fsdask.evaluate import false_discovery_rate, sparsity_gap

    relevant = set(int(i) for i in data.attrs["relevant_features"])
    sel = result["selected"].values
    if not 0 < len(relevant) < sel.size:
        return relevant, ""
    k, truth = len(relevant), sorted(relevant)
    fdr_sel = false_discovery_rate(sel, truth)
    fdr_top = false_discovery_rate(np.argsort(result["rank"].values, kind="stable")[:k], truth)
    gap = sparsity_gap(result["weight"].values, truth)
    return relevant, (
        f"<h2>Against the truth</h2><p>The dataset names {k} relevant features. "
        f"False-discovery rate of the selection: {fdr_sel:.3f}; of the top {k}: {fdr_top:.3f}. "
        f"Sparsity gap (mean weight relevant / irrelevant): {gap:.3g}.</p>"
    )


def _data_figure(
    result: xr.Dataset, data: Any, order: np.ndarray, out: Path
) -> tuple[tuple[str, str, str], list[str], np.ndarray | None]:
    """The heat map of the top features across samples, and the per-class means of the top
    features (their column names and values; none for more than 6 classes)."""
    from fsdask.evaluate.protocol import check_result_matches

    feats = result["feature"].values
    Xd = data["X"] if isinstance(data, xr.Dataset) else data
    names = Xd["feature"].values if "feature" in Xd.coords else None
    check_result_matches(result, Xd.sizes["feature"], names)
    Xtop = np.asarray(Xd.isel(feature=order).transpose("sample", "feature").values)
    y = data["y"].values if isinstance(data, xr.Dataset) and "y" in data else None
    cn = data.attrs.get("class_names") if isinstance(data, xr.Dataset) else None
    fig = (
        "Top features across samples",
        plot_heatmap(Xtop, [str(feats[i]) for i in order], y, cn, out),
        "Top features (rows, best first), z-scored per feature; samples grouped by class.",
    )
    if y is None or y.dtype.kind not in "iub" or np.unique(y).size > 6:
        return fig, [], None
    classes = np.unique(y)
    cols = [
        f"mean ({cn[int(c)] if cn is not None and 0 <= int(c) < len(cn) else c})" for c in classes
    ]
    return fig, cols, np.stack([Xtop[y == c].mean(axis=0) for c in classes], axis=1)


def _top_table(
    result: xr.Dataset,
    order: np.ndarray,
    relevant: set[int] | None,
    class_cols: list[str],
    class_means: np.ndarray | None,
) -> str:
    """The HTML table of the top features: rank, weight, selection, the tests' columns and
    the per-class means."""
    from fsdask.results import format_test_value, test_columns

    feats, weights = result["feature"].values, result["weight"].values
    sel, ranks = result["selected"].values, result["rank"].values
    tests = test_columns(result)
    rows = []
    for j, i in enumerate(order):
        r = [
            int(ranks[i]),
            html.escape(str(feats[i])) + (" ★" if relevant and int(i) in relevant else ""),
            f"{weights[i]:.6g}",
            "<span class='sel'>yes</span>" if sel[i] else "–",
        ]
        r += [format_test_value(c, float(result[c].values[i])) for c in tests]
        r += [frequency_cell(result, i)] if "stability" in result else []
        if class_means is not None:
            r += [f"{v:.4g}" for v in class_means[j]]
        rows.append(r)
    conf = ["selection frequency [95% interval]"] if "stability" in result else []
    heads = [test_header(result, c) for c in tests] + conf
    return _table(
        rows,
        ["rank", "feature", "weight", "selected", *heads, *class_cols],
        num=(0, 2, *range(4, 4 + len(heads) + len(class_cols))),
    )


# ---- stated confidence: stability selection and FDR (issue 41) ---------------------------


def test_header(result: xr.Dataset, column: str) -> str:
    """The table header of a test column; the adjusted p-value names its procedure."""
    if column == "pvalue_adj" and result.attrs.get("fdr_method") == "by":
        return "BY-adjusted p"
    return TEST_HEADERS[column]


def frequency_cell(result: xr.Dataset, i: int) -> str:
    """A feature's selection frequency and its interval, as the top table shows it."""
    f = float(result["stability"].values[i])
    lo, hi = (float(result[v].values[i]) for v in ("stability_low", "stability_high"))
    return f"{f:.2f} [{lo:.2f}, {hi:.2f}]"


def confidence_parts(result: xr.Dataset, out: Path) -> list[str]:
    """The HTML of a result's stated confidence: the stability section (figure, stable set
    against the plain top-k, bound) or the FDR paragraph; [] for other results."""
    a = result.attrs
    if "fdr_q" in a:
        return [
            f"<h2>False discovery rate</h2><p>{int(result['selected'].sum())} features have a "
            f"{html.escape(str(a['fdr_method']).upper())}-adjusted p-value ≤ {a['fdr_q']:g}: "
            "among them, the expected fraction of false discoveries is at most "
            f"{a['fdr_q']:g}. Null: {html.escape(str(a.get('null', '')))}.</p>"
        ]
    if "stability" not in result:
        return []
    fig = plot_stability(result, out)
    bound = a.get("error_bound", -1)
    said = (
        f"at most <b>{bound:.3g}</b> expected false selections"
        if bound >= 0
        else "no error bound (the threshold must exceed 0.5)"
    )
    return [
        "<h2>Stability</h2>",
        f"<figure><img src='{fig}' alt='stability path and selection frequencies'>"
        "<figcaption class='note'>Left: how many features reach each selection-frequency "
        "threshold τ (dashed: the threshold used). Right: the top features' frequencies "
        "with 95% intervals; orange bars are in the plain fit's selection.</figcaption></figure>",
        f"<p>{int(result['selected'].sum())} features were selected in at least "
        f"{a['stability_threshold']:g} of {a['n_resamples']} subsamples (mean selected per "
        f"subsample q = {a['mean_selected']:.3g}): {said}. "
        f"<span class='note'>{html.escape(str(a.get('bound', '')))}</span></p>",
        stable_vs_plain(result),
    ]


def stable_vs_plain(result: xr.Dataset, show: int = 25) -> str:
    """The stable set against the plain fit's selection: both, stable only, plain only."""
    names = result["feature"].values
    stable = result["selected"].values.astype(bool)
    plain = result["plain_selected"].values.astype(bool)
    order = np.argsort(result["rank"].values, kind="stable")
    rows = []
    for label, mask in (
        ("stable and in the plain selection", stable & plain),
        ("stable only", stable & ~plain),
        ("in the plain selection only (not stable)", ~stable & plain),
    ):
        ids = [str(names[i]) for i in order if mask[i]]
        more = f" … (+{len(ids) - show})" if len(ids) > show else ""
        rows.append([label, len(ids), html.escape(", ".join(ids[:show])) + more])
    return "<h3>Stable set against the plain selection</h3>" + _table(
        rows, ["", "features", "ids (by frequency)"], num=(1,)
    )


def plot_stability(result: xr.Dataset, out: Path, n_top: int = 30) -> str:
    """stability.png: the stability path and the top features' frequencies."""
    plt = pyplot()
    tau = float(result.attrs["stability_threshold"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.step(result["tau"].values, result["stability_path"].values, where="post", color="#1f5fa8")
    left.axvline(tau, color="#c0392b", ls="--", lw=1)
    from matplotlib.ticker import ScalarFormatter

    left.set_yscale("symlog", linthresh=1)
    left.yaxis.set_major_formatter(ScalarFormatter())  # 1, 10, 100 rather than 10⁰, 10¹
    left.set_ylim(bottom=0)
    left.set_xlabel("threshold τ (selection frequency)")
    left.set_ylabel("features reaching τ")
    left.grid(alpha=0.3)
    order = np.argsort(result["rank"].values, kind="stable")[:n_top]
    f = result["stability"].values[order]
    err = np.stack(
        [f - result["stability_low"].values[order], result["stability_high"].values[order] - f]
    )
    plain = result["plain_selected"].values[order].astype(bool)
    x = np.arange(order.size)
    right.bar(x, f, color=np.where(plain, "#e67e22", "#95a5a6"), yerr=err, capsize=2, lw=0)
    right.axhline(tau, color="#c0392b", ls="--", lw=1)
    right.set_xticks(x, [str(v) for v in result["feature"].values[order]], rotation=90, fontsize=7)
    right.set_ylim(0, 1.05)
    right.set_ylabel("selection frequency")
    right.set_title(f"top {order.size} features", fontsize=10)
    return _save(fig, out / "stability.png")


def _page(
    result: xr.Dataset,
    title: str | None,
    figs: list[tuple[str, str, str]],
    n_top: int,
    top_html: str,
    notes: list[str],
) -> str:
    """The report's HTML: the weights, the top-features table and its notes, the other
    figures by section, and the run's attributes."""
    method = result.attrs.get("method", "selection")
    title = title or f"fsdask report: {method}"
    sel = result["selected"].values
    sections: dict[str, list[str]] = {}
    for sec, f, cap in figs:
        sections.setdefault(sec, []).append(
            f"<figure><img src='{html.escape(f)}' alt='{html.escape(sec)}'>"
            f"<figcaption class='note'>{cap}</figcaption></figure>"
        )
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{int(sel.sum())} of {int(sel.size)} features selected by "
        f"<b>{html.escape(str(method))}</b>. Generated {now}.</p>",
    ]
    if "Weights" in sections:
        parts += ["<h2>Weights</h2>", *sections.pop("Weights")]
    parts += [f"<h2>Top {n_top} features</h2>", top_html, *notes]
    for sec, items in sections.items():
        parts += [f"<h2>{html.escape(sec)}</h2>", *items]
    meta = [(html.escape(k), html.escape(v)) for k, v in _meta_rows(result)]
    parts += ["<h2>Run</h2>", _table(meta, ["attribute", "value"]), "</body></html>"]
    return "\n".join(parts)
