"""The state file of a pipeline: which steps are done, with what options, inputs and version.

JSON, written atomically with secrets redacted: ``format``, ``format_version``,
``fsdask_version``, ``config`` and per completed step its option digest, input
fingerprints (:mod:`fsdask.pipeline.fingerprint`; an Icechunk input's is its snapshot id, and
one written by the same run is recorded with the id of the run's commit), fsdask version,
outputs, runtime and finish time.  A state file that is
damaged, of another pipeline or of a newer fsdask is refused, or with ``--restart`` renamed
aside (never deleted).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
from typing import Any

from fsdask.errors import ParameterError, StoreError

STATE_FORMAT = "fsdask-pipeline-state"
STATE_VERSION = 2


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def version() -> str:
    """This fsdask's version (recorded per step): ``fsdask.__version__``, as users see it."""
    from fsdask.version import current

    return current()


def _newer(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) > Version(b)
    except InvalidVersion:
        return False


def write_state(path: str, state: dict) -> None:
    """Write ``state`` to ``path`` atomically, secrets redacted.

    Parameters
    ----------
    path : str
        The state file.
    state : dict
        The state.

    Raises
    ------
    StoreError
        When the folder is not writable (the message says what to do).
    """
    from fsdask.io.secrets import redact

    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(tmp, "w") as fh:
            fh.write(redact(json.dumps(state, indent=1, sort_keys=True)))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise StoreError(
            f"{path}: cannot write the pipeline state ({exc.strerror or exc}); make the folder "
            "writable or set `state:` in the config to a writable path"
        ) from None


def check_appendable(path: str, what: str, hint: str) -> None:
    """Refuse, before any step runs, a bookkeeping file that cannot be appended to.

    The file is opened for appending and closed (its content is not touched; when missing it
    is created and removed again), which fails as the real write would: a directory there,
    a folder that cannot be made, no permission, a read-only file system, a link into a
    folder that does not exist.

    Parameters
    ----------
    path : str
        The file.
    what : str
        What it is, for the message (``"run history"``).
    hint : str
        What to do, for the message.

    Raises
    ------
    StoreError
        Naming the file, the reason and ``hint``.
    """
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # there already (or a link): can it be appended to?
            with open(path, "a", encoding="utf-8"):
                return
        os.close(fd)
        os.remove(path)  # made only to try: not left behind
    except OSError as exc:
        raise StoreError(
            f"{path}: cannot write the {what} ({exc.strerror or exc}); {hint}"
        ) from None


def _set_aside(path: str, why: str) -> str:
    aside = f"{path}.{why}-{_dt.datetime.now(_dt.UTC).strftime('%Y%m%dT%H%M%S')}"
    os.replace(path, aside)
    return aside


#: the type of each field of a state, and of each step record, when present
STATE_TYPES = {
    "format": str,
    "format_version": int,
    "fsdask_version": str,
    "config": str,
    "completed": str,
    "steps": dict,
}
RECORD_TYPES = {
    "digest": str,
    "command": str,
    "outputs": list,
    "inputs": dict,
    "fsdask_version": str,
    "seconds": (int, float),
    "finished": str,
}


def wrong_type(state: Any) -> str | None:
    """Which field of ``state`` has the wrong type (``"steps.ttest.inputs: …"``), or None.

    Parameters
    ----------
    state : Any
        A parsed state file.

    Returns
    -------
    str or None
    """
    if not isinstance(state, dict):
        return f"expected a JSON object, got {type(state).__name__}"
    if "steps" not in state:
        return "no 'steps'"
    fields = [(k, v, STATE_TYPES[k]) for k, v in state.items() if k in STATE_TYPES]
    if isinstance(state["steps"], dict):
        for name, rec in state["steps"].items():
            if not isinstance(rec, dict):
                fields.append((f"steps.{name}", rec, dict))
                continue
            fields += [
                (f"steps.{name}.{k}", v, RECORD_TYPES[k])
                for k, v in rec.items()
                if k in RECORD_TYPES
            ]
            inputs, outputs = rec.get("inputs"), rec.get("outputs")
            if isinstance(inputs, dict):
                fields += [
                    (f"steps.{name}.inputs.{t}", fp, (dict, type(None))) for t, fp in inputs.items()
                ]
            if isinstance(outputs, list):
                fields += [(f"steps.{name}.outputs[]", o, str) for o in outputs]
    for where, value, kind in fields:
        if isinstance(value, bool) or not isinstance(value, kind):
            names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            return f"{where} is {type(value).__name__} {value!r:.40}, expected {names}"
    return None


def _load(path: str) -> tuple[dict | None, str | None]:
    """(the state, None) or (None, why it cannot be used)."""
    try:
        with open(path, encoding="utf-8") as fh:
            state = json.load(fh)
        problem = wrong_type(state)
        if problem:
            raise ValueError(f"not a pipeline state: {problem}")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, (
            f"{path}: the pipeline state is damaged or truncated ({exc}); "
            "`fsdask run --restart` sets it aside and runs every step (outputs are kept)"
        )
    return state, None


def _foreign(path: str, state: dict, config: str) -> tuple[str, str] | None:
    """(kind, message) when ``state`` is of a newer fsdask or of another pipeline."""
    theirs = str(state.get("fsdask_version") or "")
    if (
        state.get("format", STATE_FORMAT) != STATE_FORMAT
        or int(state.get("format_version", 1)) > STATE_VERSION
        or (theirs and _newer(theirs, version()))
    ):
        return (
            "newer",
            f"{path}: written by fsdask {theirs or '?'} (state format "
            f"{state.get('format_version', '?')}), newer than this fsdask {version()}; upgrade "
            "fsdask, or `fsdask run --restart` to set the state aside and run every step",
        )
    if state.get("config") and os.path.realpath(str(state["config"])) != os.path.realpath(config):
        return (
            "other",
            f"{path}: the state of another pipeline ({state['config']}); give this "
            "pipeline its own file with `state:` in its config, or `fsdask run --restart` "
            "to set that state aside",
        )
    return None


def read_state(path: str, config: str, *, restart: bool = False, out=None) -> dict:
    """The recorded state of the pipeline ``config``; a fresh one when there is none.

    Parameters
    ----------
    path : str
        The state file.
    config : str
        The pipeline's config file (a state recorded for another one is refused).
    restart : bool
        Start fresh: a state that cannot be used is renamed aside instead of refused.
    out : file, optional
        Where to say that a state was set aside.

    Returns
    -------
    dict

    Raises
    ------
    ParameterError
        A damaged state file, one of another pipeline or of a newer fsdask (without
        ``restart``).
    """
    fresh = {"format": STATE_FORMAT, "format_version": STATE_VERSION, "steps": {}}
    if not os.path.exists(path):
        return fresh
    state, damage = _load(path)
    problem = ("corrupt", damage) if state is None else _foreign(path, state, config)
    if problem is None:
        return state if not restart else fresh
    if not restart:
        raise ParameterError(problem[1])
    aside = _set_aside(path, problem[0])
    print(f"--restart: set the state file aside as {aside}", file=out or sys.stdout, flush=True)
    return fresh
