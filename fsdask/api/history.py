"""``history``: the per-run record of a pipeline (selected count, stability, runtime)."""

from __future__ import annotations

from fsdask.api.spec import command


@command(inputs=("state",))
def history(state: str, *, top: int = 5, as_json: bool = False, stdout=None) -> list[dict]:
    """Print the run history of the pipeline whose state file (or config) is ``state``.

    Parameters
    ----------
    state : str
        The pipeline's state file, its config YAML or its ``.history.jsonl`` file.
    top : int
        How many top feature ids to show per line.
    as_json : bool
        Print the records (with stability) as JSON lines instead of a table.
    stdout : file, optional
        Where to print (default: ``sys.stdout``).

    Returns
    -------
    list of dict
        The records of selecting steps, each with its stability against the previous run.
    """
    import json
    import sys

    from fsdask.api.runs import history_path, read_history, state_of, table, with_stability
    from fsdask.errors import ParameterError

    out = stdout or sys.stdout
    path = history_path(state_of(state))
    records = read_history(path)
    if not records:
        raise ParameterError(
            f"{path}: no run history; `fsdask run CONFIG` writes it next to the state file "
            "(give the state file or the config of a pipeline that has run)"
        )
    rows = with_stability(records)
    if as_json:
        for rec in rows:
            print(json.dumps(rec, ensure_ascii=False), file=out)
    else:
        print(table(records, show_top=top), file=out)
    return rows
