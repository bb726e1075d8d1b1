"""A pipeline file read and checked: its steps, their options as the command functions' arguments.

:func:`load_config` reads the YAML into a :class:`Pipeline` of :class:`Step` s and refuses,
naming the problem, anything that is not a known step; :func:`step_kwargs` turns a step's
options (command-line spellings allowed) into the keyword arguments of its
:mod:`fsdask.api` function, checked against that function's signature.  What a step writes
and reads comes from the function's declaration (:class:`fsdask.api.Command`).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import inspect
import json
import os
from typing import Any

from fsdask.api import COMMANDS, Command, parse_kv
from fsdask.api.runs import read_config, state_path
from fsdask.errors import ParameterError
from fsdask.io.options import ReadOptions
from fsdask.pipeline.validate import closest

#: keys allowed at the top of a pipeline file
TOP_LEVEL_KEYS = frozenset(
    {
        "scheduler",
        "storage_options",
        "memory_limit",
        "state",
        "history_top_k",
        "fingerprint",
        "steps",
    }
)
#: keys a step may have besides its command: its name and how its inputs are fingerprinted
STEP_KEYS = ("name", "fingerprint", "alert_on_drift")
#: ``fingerprint:`` values (:mod:`fsdask.pipeline.fingerprint`)
FINGERPRINTS = ("stat", "content")
#: top-level keys that are defaults of every step (or of the run)
DEFAULT_KEYS = ("scheduler", "storage_options", "memory_limit", "history_top_k")
#: command-line spellings → keyword of the command's function (``no_X`` flags are negated)
ALIASES = {"param": "params", "storage_option": "storage_options"}
NEGATED = {"no_progress": "progress", "no_overwrite": "overwrite", "no_standardize": "standardize"}
#: what a step may name besides the commands: itself, which cannot be a step
NOT_A_STEP = ("run",)


@dataclasses.dataclass
class Step:
    """One step: its name, its command and its options as written in the file.

    Parameters
    ----------
    name : str
        Unique in the pipeline.
    command : str
        A name of :data:`fsdask.api.COMMANDS`.
    options : dict
        The options as written (command-line spellings allowed).
    fingerprint : str
        How its inputs are fingerprinted: ``"stat"`` (default) or ``"content"``
        (:mod:`fsdask.pipeline.fingerprint`).
    alert_on_drift : float or None
        A Jaccard threshold: when the step's top-k against the previous run falls below
        it, the run ends with a drift alert (exit 3) after recording the step.
    """

    name: str
    command: str
    options: dict[str, Any]
    fingerprint: str = "stat"
    alert_on_drift: float | None = None

    @property
    def spec(self) -> Command:
        """The declaration of the step's command function."""
        return COMMANDS[self.command]

    def digest(self) -> str:
        """A hash of the command and its options (a changed option makes the step run)."""
        blob = json.dumps(
            {"command": self.command, "options": self.options}, sort_keys=True, default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def named(self) -> dict[str, Any]:
        """The options keyed by the function's parameter names (values as written)."""
        return {
            ALIASES.get(k.replace("-", "_"), k.replace("-", "_")): v
            for k, v in self.options.items()
        }

    def outputs(self) -> list[str]:
        """The locations the step writes (as its command declares them)."""
        return self.spec.outputs_of(self.named())

    def inputs(self) -> list[str]:
        """The datasets and files the step reads (as its command declares them)."""
        return self.spec.inputs_of(self.named())


@dataclasses.dataclass
class Pipeline:
    """A checked pipeline file.

    Parameters
    ----------
    path : str
        The config file (absolute); steps run in its folder.
    steps : list of Step
    defaults : dict
        The top-level defaults (:data:`DEFAULT_KEYS`).
    state_path : str
        Where completed steps are recorded.
    """

    path: str
    steps: list[Step]
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    state_path: str = ""


def load_config(path: str | os.PathLike) -> Pipeline:
    """Read and check a pipeline YAML file.

    Parameters
    ----------
    path : str or path-like
        The config file.

    Returns
    -------
    Pipeline

    Raises
    ------
    ParameterError
        Naming the problem: unreadable file, unknown key, a step that names no command or
        two, duplicate step names, a bad ``history_top_k``.
    """
    path = os.path.abspath(os.fspath(path))
    cfg = read_config(path)
    if not isinstance(cfg, dict) or not isinstance(cfg.get("steps"), list) or not cfg["steps"]:
        raise ParameterError(
            f"{path}: expected a mapping with a non-empty list 'steps' (see examples/pipeline.yaml)"
        )
    _check_top_level(path, cfg)
    steps: list[Step] = []
    default_fp = _fingerprint_mode(path, "fingerprint", cfg.get("fingerprint", "stat"))
    for i, raw in enumerate(cfg["steps"], 1):
        step = _parse_step(path, i, raw, default_fp)
        if any(s.name == step.name for s in steps):
            raise ParameterError(
                f"{path}: two steps are named {step.name!r}; step names must be unique"
            )
        steps.append(step)
    defaults = {k: cfg[k] for k in DEFAULT_KEYS if k in cfg}
    top_k = defaults.get("history_top_k", 20)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ParameterError(f"{path}: history_top_k must be a whole number ≥ 1; got {top_k!r}")
    return Pipeline(path, steps, defaults, state_path(path, cfg.get("state")))


def _check_top_level(path: str, cfg: dict) -> None:
    unknown = sorted(set(cfg) - TOP_LEVEL_KEYS)
    if unknown:
        hints = [
            f"{k!r} (did you mean {m[0]!r}?)"
            if (m := difflib.get_close_matches(k, TOP_LEVEL_KEYS, 1))
            else repr(k)
            for k in unknown
        ]
        raise ParameterError(
            f"{path}: unknown top-level key(s) {', '.join(hints)}; "
            f"valid: {', '.join(sorted(TOP_LEVEL_KEYS))}"
        )


def _fingerprint_mode(path: str, where: str, value: Any) -> str:
    if value not in FINGERPRINTS:
        raise ParameterError(
            f"{path}: {where}: expected one of {', '.join(FINGERPRINTS)}; got {value!r}"
            f"{closest(str(value), FINGERPRINTS)}"
        )
    return str(value)


def _parse_step(path: str, i: int, raw: Any, default_fp: str = "stat") -> Step:
    """Step ``i`` of the file: one command and its options."""
    if not isinstance(raw, dict):
        raise ParameterError(f"{path}: step {i} must be a mapping like {{select: {{…}}}}")
    raw = dict(raw)
    name = str(raw.pop("name", ""))
    where = f"step {i} ({name or 'unnamed'})"
    fp = _fingerprint_mode(path, f"{where} fingerprint", raw.pop("fingerprint", default_fp))
    alert = drift_threshold(path, where, raw.pop("alert_on_drift", None))
    commands = [k for k in raw if k in COMMANDS or k in NOT_A_STEP]
    if len(commands) != 1 or len(raw) != 1:
        steps = [n for n, c in COMMANDS.items() if c.step]
        hints = "".join(_step_key_hint(str(k), commands, steps) for k in raw if k not in commands)
        raise ParameterError(
            f"{path}: {where} must name exactly one command "
            f"({', '.join(steps)}) and its options; found keys {sorted(map(str, raw))}{hints}"
        )
    command = commands[0]
    if command in NOT_A_STEP or not COMMANDS[command].step:
        raise ParameterError(f"{path}: step {i}: '{command}' cannot be a pipeline step")
    options = raw[command] or {}
    if not isinstance(options, dict):
        raise ParameterError(f"{path}: step {i} ({command}): options must be a mapping")
    if alert is not None and not COMMANDS[command].result:
        raise ParameterError(
            f"{path}: {where}: alert_on_drift needs a selecting step (select), not {command}"
        )
    return Step(name or f"{i}-{command}", command, options, fp, alert)


def drift_threshold(path: str, where: str, value: Any) -> float | None:
    """A step's ``alert_on_drift``: a Jaccard threshold in (0, 1], or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ParameterError(
            f"{path}: {where}: alert_on_drift must be a Jaccard threshold in (0, 1], "
            f"e.g. alert_on_drift: 0.5; got {value!r}"
        )
    return float(value)


def _step_key_hint(key: str, commands: list[str], steps: list[str]) -> str:
    """What a stray key next to a step's command probably is."""
    if len(commands) == 1 and commands[0] in COMMANDS:
        options = inspect.signature(COMMANDS[commands[0]].function).parameters
        name = key.replace("-", "_")
        if ALIASES.get(name, name) in options or name in NEGATED:
            return f"; {key!r} is an option of {commands[0]}: put it inside `{commands[0]}: {{…}}`"
    return f"; {key!r}{closest(key, [*steps, *STEP_KEYS])}"


def as_bool(value: Any, where: str) -> bool:
    """A flag's value: a YAML boolean or one of true/yes/on/1, false/no/off/0.

    Parameters
    ----------
    value : Any
        The value written.
    where : str
        Where it was written (for the error message).

    Returns
    -------
    bool
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ParameterError(f"{where}: expected true or false; got {value!r}")


def step_kwargs(step: Step, func, defaults: dict[str, Any]) -> dict[str, Any]:
    """The step's options as keyword arguments of ``func``, checked against its signature.

    Parameters
    ----------
    step : Step
        The step.
    func : callable
        Its command function (:attr:`Step.spec`'s ``function``).
    defaults : dict
        The pipeline's defaults: ``scheduler`` / ``memory_limit`` apply where the step sets
        none, ``storage_options`` are merged under the step's.

    Returns
    -------
    dict
        Keyword arguments; the read options the command accepts are gathered into one
        :class:`~fsdask.io.options.ReadOptions` (``read``), ``overwrite`` defaults to True (a
        re-run step replaces its own earlier output).
    """
    params = {n: p for n, p in inspect.signature(func).parameters.items() if n != "stdout"}
    reads = func.command.reads if hasattr(func, "command") else ()
    kwargs, read = _named_options(step, params, reads)
    if "read" in params:
        try:
            kwargs["read"] = ReadOptions(**read)
        except ParameterError as exc:
            raise ParameterError(f"step {step.name!r} ({step.command}): {exc}") from None
    for name, what in (("params", "param"), ("storage_options", "storage_option")):
        if isinstance(kwargs.get(name), list):  # the command-line form: [KEY=VALUE, …]
            kwargs[name] = parse_kv([str(v) for v in kwargs[name]], what)
    if "params" in kwargs and not isinstance(kwargs["params"], dict):
        raise ParameterError(
            f"step {step.name!r}: 'param' must be a mapping like {{n_features_to_select: 50}}"
        )
    _apply_defaults(kwargs, params, defaults)
    missing = [
        n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in kwargs
    ]
    if missing:
        raise ParameterError(
            f"step {step.name!r} ({step.command}): missing option(s) {', '.join(map(repr, missing))}"
        )
    return kwargs


def _named_options(step: Step, params: dict, reads: tuple) -> tuple[dict, dict]:
    """(keyword arguments, read options) of the step's options; unknown ones are refused."""
    read_defaults = {f.name: f.default for f in dataclasses.fields(ReadOptions)}
    kwargs: dict[str, Any] = {}
    read: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in step.options.items():
        key = str(key)
        name = key.replace("-", "_")
        if name in NEGATED:
            name, value = NEGATED[name], not as_bool(value, f"step {step.name!r}: {key}")
        name = ALIASES.get(name, name)
        where = f"step {step.name!r} ({step.command}): option {key!r}"
        if name in spelled:
            raise ParameterError(
                f"{where} and {spelled[name]!r} set the same option; keep one of them"
            )
        spelled[name] = key
        if name in reads and name not in params:
            if isinstance(read_defaults[name], bool):
                value = as_bool(value, where)
            read[name] = value
            continue
        if name not in params or name == "read":
            valid = sorted({*params, *reads} - {"read"})
            spellings = [*valid, *ALIASES, *NEGATED]
            raise ParameterError(
                f"step {step.name!r} ({step.command}): unknown option {key!r}"
                f"{closest(name, spellings)}; valid: {', '.join(valid)}"
            )
        if isinstance(params[name].default, bool):
            value = as_bool(value, where)
        kwargs[name] = value
    return kwargs, read


def _apply_defaults(kwargs: dict, params: dict, defaults: dict[str, Any]) -> None:
    for name in ("scheduler", "memory_limit"):
        if name in params and name not in kwargs and name in defaults:
            kwargs[name] = defaults[name]
    if "storage_options" in params:
        merged = dict(defaults.get("storage_options") or {})
        merged.update(kwargs.get("storage_options") or {})
        kwargs["storage_options"] = merged
    if "overwrite" in params and "overwrite" not in kwargs:
        kwargs["overwrite"] = True  # a re-run step replaces its own earlier output
