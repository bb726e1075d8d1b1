"""``report``: an HTML page with figures for a result (and a pipeline's run history)."""

from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence

from fsdask.api.common import check_count, open_data
from fsdask.api.spec import DATA_READS, command
from fsdask.io.options import ReadOptions


@command(outputs=("out",), inputs=("result", "data", "evaluation", "history"), reads=DATA_READS)
def report(
    result: str | None = None,
    *,
    out: str,
    data: str | None = None,
    evaluation: Sequence[str] = (),
    csv: bool = False,
    top: int = 30,
    title: str | None = None,
    overwrite: bool = False,
    read: ReadOptions | None = None,
    storage_options: Mapping[str, Any] | None = None,
    history: str | None = None,
    stdout=None,
) -> str:
    """Write the HTML report of ``result`` to the folder ``out``; return the index path.

    Parameters
    ----------
    result : str, optional
        A result written by ``select`` (optional with ``history``).
    out : str
        The report folder (local).
    data : str, optional
        The dataset the result was computed on (adds a heatmap and class means).
    evaluation : sequence of str
        Evaluations written by ``evaluate --output``.
    csv, top, title, overwrite
        Also write ``out/ranked.csv``; how many top features to list; the page title;
        replace an fsdask report at ``out``.
    read, storage_options
        How to read a dataset other tools wrote; fsspec storage options.
    history : str, optional
        A pipeline's state file (or config); adds its run-history page (also alone, without
        a result).
    stdout : file, optional
        Where to print (default: ``sys.stdout``).

    Returns
    -------
    str
        The path of the report's index page.
    """
    from fsdask.evaluate import open_evaluation
    from fsdask.io.outputs import check_output
    from fsdask.report import make_report
    from fsdask.results import open_result

    so = dict(storage_options or {})
    check_count(top, "--top")
    if isinstance(evaluation, str):
        evaluation = [evaluation]
    inputs = tuple(x for x in (result, data, *evaluation) if x)
    check_output(out, kind="report", overwrite=overwrite, inputs=inputs)
    pages = _history_pages(history, result)
    if result is None:
        return _history_only(out, pages, overwrite, inputs, stdout)
    res = open_result(result, storage_options=so)
    ds = open_data(data, so, read) if data else None
    evs = [open_evaluation(e, storage_options=so) for e in evaluation]
    index = make_report(
        res,
        out,
        data=ds,
        evaluations=evs,
        csv=csv,
        top=top,
        title=title,
        overwrite=overwrite,
        inputs=inputs,
        extra=pages,
    )
    print(f"report written to {index} (open it in a browser)", file=stdout or sys.stdout)
    return str(index)


def _history_pages(history: str | None, result: str | None):
    """The history pages' writer, read (and checked) before anything is computed; None without ``history``."""
    if history:
        from fsdask.api.runs import history_pages

        return history_pages(history)
    if result is None:
        from fsdask.errors import ParameterError

        raise ParameterError(
            "fsdask report: give a RESULT, or --history STATE for the run-history page"
        )
    return None


def _history_only(out: str, pages, overwrite: bool, inputs: tuple, stdout) -> str:
    """A report folder holding the run-history page alone; return its path."""
    from fsdask.api.runs import history_report

    index = history_report(out, pages, overwrite=overwrite, inputs=inputs)
    print(f"history report written to {index} (open it in a browser)", file=stdout or sys.stdout)
    return str(index)
