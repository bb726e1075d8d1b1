"""Config-driven batch runs: ``fsdask run config.yaml``.

A pipeline is an ordered list of steps, each one an ``fsdask`` subcommand (``ingest``,
``select``, ``evaluate``, ``report``, ``verify``, ``info``) with the same options as on the
command line (``param`` / ``storage_option`` as mappings, flags as true/false), written as
YAML; each step calls the command's Python function (:mod:`fsdask.commands`)::

    scheduler: local:2                # default --scheduler of every step that takes one
    storage_options: {}               # default --storage-option (credentials: use env vars)
    state: pipeline.state.json        # where completed steps are recorded (default: next to the config)
    history_top_k: 20                 # how many top features each run records in the history
    steps:
      - name: ingest
        ingest: {source: data.npz, url: data.zarr, overwrite: true}
      - name: ttest
        select: {url: data.zarr, method: ttest, param: {n_features_to_select: 50},
                 output: ttest.zarr, csv: ttest.csv}

Relative paths are relative to the directory of the config file (steps run there).

* Every step's output is written atomically by the command itself (a store is renamed
  into place or marked complete last; CSV tables are renamed into place), so a crash
  never leaves an output that looks finished.
* After each step succeeds it is recorded in the state file (a hash of its options, the
  fingerprints of its inputs, the fsdask version), written atomically.  A re-run skips a
  step only when all of these match and its outputs exist; otherwise it and every later
  step run.  Each step prints ``skipped`` or ``runs (why: input X changed, options
  changed, …)``.  ``--restart`` ignores the state (see :mod:`fsdask.pipeline.session`).
* A ``select`` step with ``checkpoint_every: 5`` (iterations, or ``60s``) checkpoints its fit
  next to its output (:mod:`fsdask.checkpoint`); when a run is killed mid-fit, the next run
  continues that fit from the checkpoint (``--restart`` ignores it).
* One run per state file: a second concurrent run exits 75 (:mod:`fsdask.pipeline.lock`).
* ``--log-json FILE`` appends machine-readable events (:mod:`fsdask.pipeline.logjson`);
  each run appends per step to ``STATE.history.jsonl`` (:mod:`fsdask.pipeline.history`).
* Exit status: 0 ok, 1 unexpected error (a bug), 2 bad input / parameters / storage /
  config, 75 another run holds the lock (try later), 130 interrupted (Ctrl-C, SIGTERM).
  A failing step stops the run with a one-line reason naming the step.
* A step that runs again replaces its own earlier output (``overwrite`` defaults to true in
  a pipeline; the overwrite rule still holds: only an fsdask output of the same kind, never
  an input).  Secret storage options are shown as ``***`` in everything the run prints or
  records.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from fsdask.errors import FsdaskError, ParameterError

log = logging.getLogger("fsdask")

#: keys allowed at the top of a pipeline file
TOP_LEVEL_KEYS = frozenset(
    {"scheduler", "storage_options", "memory_limit", "state", "history_top_k", "steps"}
)
#: command-line spellings → keyword of the command's function (``no_X`` flags are negated)
_ALIASES = {"param": "params", "storage_option": "storage_options"}
_NEGATED = {"no_progress": "progress", "no_overwrite": "overwrite", "no_standardize": "standardize"}

#: options of a step that name the files it produces (checked to exist before skipping)
OUTPUT_OPTIONS = ("url", "output", "csv", "out", "report")
_INPUT_ONLY = {"select": {"url"}, "info": {"url"}, "evaluate": {"url"}, "verify": {"url"}}


@dataclass
class Step:
    name: str
    command: str
    options: dict[str, Any]

    def digest(self) -> str:
        blob = json.dumps(
            {"command": self.command, "options": self.options}, sort_keys=True, default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def outputs(self) -> list[str]:
        skip = _INPUT_ONLY.get(self.command, set())
        return [
            str(self.options[k])
            for k in OUTPUT_OPTIONS
            if k in self.options and k not in skip and self.options[k] is not None
        ]


@dataclass
class Pipeline:
    path: str
    steps: list[Step]
    defaults: dict[str, Any] = field(default_factory=dict)
    state_path: str = ""


def load_config(path: str | os.PathLike) -> Pipeline:
    """Read and check a pipeline YAML file (raises :class:`ParameterError` naming the problem)."""
    path = os.path.abspath(os.fspath(path))
    try:
        with open(path) as fh:
            cfg = yaml.safe_load(fh)
    except OSError as exc:
        raise ParameterError(
            f"{path}: cannot read the pipeline config ({exc.strerror or exc})"
        ) from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("steps"), list) or not cfg["steps"]:
        raise ParameterError(
            f"{path}: expected a mapping with a non-empty list 'steps' (see examples/pipeline.yaml)"
        )
    from fsdask.commands import COMMANDS as SUBCOMMANDS

    unknown = sorted(set(cfg) - TOP_LEVEL_KEYS)
    if unknown:
        import difflib

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
    steps: list[Step] = []
    for i, raw in enumerate(cfg["steps"], 1):
        if not isinstance(raw, dict):
            raise ParameterError(f"{path}: step {i} must be a mapping like {{select: {{…}}}}")
        raw = dict(raw)
        name = str(raw.pop("name", ""))
        commands = [k for k in raw if k in SUBCOMMANDS]
        if len(commands) != 1 or len(raw) != 1:
            raise ParameterError(
                f"{path}: step {i} ({name or 'unnamed'}) must name exactly one command "
                f"({', '.join(c for c in SUBCOMMANDS if c not in ('run', 'demo'))}) "
                f"and its options; found keys {sorted(raw)}"
            )
        command = commands[0]
        if command in ("run", "demo"):
            raise ParameterError(f"{path}: step {i}: '{command}' cannot be a pipeline step")
        options = raw[command] or {}
        if not isinstance(options, dict):
            raise ParameterError(f"{path}: step {i} ({command}): options must be a mapping")
        name = name or f"{i}-{command}"
        if any(s.name == name for s in steps):
            raise ParameterError(f"{path}: two steps are named {name!r}; step names must be unique")
        steps.append(Step(name, command, options))
    defaults = {
        k: cfg[k]
        for k in ("scheduler", "storage_options", "memory_limit", "history_top_k")
        if k in cfg
    }
    top_k = defaults.get("history_top_k", 20)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ParameterError(f"{path}: history_top_k must be a whole number ≥ 1; got {top_k!r}")
    state = cfg.get("state") or os.path.splitext(os.path.basename(path))[0] + ".state.json"
    state_path = os.path.join(os.path.dirname(path), str(state))
    return Pipeline(path, steps, defaults, state_path)


def _function(command: str):
    try:
        module = importlib.import_module(f"fsdask.commands.{command}")
    except ModuleNotFoundError:
        return None
    return getattr(module, command, None)


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ParameterError(f"{where}: expected true or false; got {value!r}")


def _kwargs(step: Step, func, defaults: dict[str, Any]) -> dict[str, Any]:
    """The step's options as keyword arguments of the command's function, checked against it."""
    sig = inspect.signature(func)
    params = {n: p for n, p in sig.parameters.items() if n != "stdout"}
    kwargs: dict[str, Any] = {}
    for key, value in step.options.items():
        name = key.replace("-", "_")
        if name in _NEGATED:
            name, value = _NEGATED[name], not _as_bool(value, f"step {step.name!r}: {key}")
        name = _ALIASES.get(name, name)
        if name not in params:
            raise ParameterError(
                f"step {step.name!r} ({step.command}): unknown option {key!r}; "
                f"valid: {', '.join(sorted(params))}"
            )
        if isinstance(params[name].default, bool):
            value = _as_bool(value, f"step {step.name!r} ({step.command}): option {key!r}")
        kwargs[name] = value
    from fsdask.commands import parse_kv

    for name, what in (("params", "param"), ("storage_options", "storage_option")):
        if isinstance(kwargs.get(name), list):  # the command-line form: [KEY=VALUE, …]
            kwargs[name] = parse_kv([str(v) for v in kwargs[name]], what)
    if "params" in kwargs and not isinstance(kwargs["params"], dict):
        raise ParameterError(
            f"step {step.name!r}: 'param' must be a mapping like {{n_features_to_select: 50}}"
        )
    for name in ("scheduler", "memory_limit"):
        if name in params and name not in kwargs and name in defaults:
            kwargs[name] = defaults[name]
    if "storage_options" in params:
        merged = dict(defaults.get("storage_options") or {})
        merged.update(kwargs.get("storage_options") or {})
        kwargs["storage_options"] = merged
    if "overwrite" in params and "overwrite" not in kwargs:
        kwargs["overwrite"] = True  # a re-run step replaces its own earlier output
    missing = [
        n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in kwargs
    ]
    if missing:
        raise ParameterError(
            f"step {step.name!r} ({step.command}): missing option(s) {', '.join(map(repr, missing))}"
        )
    return kwargs


def _describe(step: Step, kwargs: dict[str, Any]) -> str:
    """The step as a redacted one-liner for the log."""
    from fsdask.io.secrets import redact, redact_options

    shown = {
        k: (redact_options(v) if k == "storage_options" else v)
        for k, v in kwargs.items()
        if not (k == "storage_options" and not v)
    }
    return redact(f"fsdask {step.command} " + " ".join(f"{k}={v}" for k, v in shown.items()))


def _write_state(path: str, state: dict) -> None:
    from fsdask.errors import StoreError
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


@contextlib.contextmanager
def _cwd(path: str):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


class StepFailed(FsdaskError):
    """A pipeline step failed; ``exit_code`` is what the CLI returns."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def run_pipeline(
    config: str | os.PathLike,
    *,
    restart: bool = False,
    out=None,
    log_json: str | os.PathLike | None = None,
    defaults: dict | None = None,
) -> dict[str, str]:
    """Run (or resume) the pipeline in ``config``; return {step name: "ran" | "skipped"}.

    ``log_json``: append JSON-lines events to this file; ``defaults``: override the config's
    ``scheduler`` / ``memory_limit`` (e.g. sized from a batch allocation).  Raises
    :class:`StepFailed` (one-line message naming the step; ``exit_code`` 75 when another run
    holds the lock) when a step fails.
    """
    from fsdask.io.secrets import redact, register
    from fsdask.pipeline.lock import Locked
    from fsdask.pipeline.session import Session

    out = out or sys.stdout
    night = Session(config, restart=restart, out=out, log_json=log_json, defaults=defaults)
    try:
        night.open()
    except Locked as exc:
        raise StepFailed(str(exc), exit_code=exc.exit_code) from None
    with night, _cwd(os.path.dirname(night.pipe.path)):
        pipe = night.pipe
        register(pipe.defaults.get("storage_options"))
        for step in pipe.steps:
            register(
                step.options.get("storage_options") or step.options.get("storage_option"),
                *(str(v) for v in step.options.values() if isinstance(v, str)),
            )
        calls = []
        for i, step in enumerate(pipe.steps, 1):  # every step's options are checked before any runs
            func = _function(step.command)
            if func is None:
                raise StepFailed(
                    f"step {i} ({step.name}): the command '{step.command}' is not available "
                    "in this installation"
                )
            kwargs = _kwargs(step, func, pipe.defaults)
            if (
                restart
                and "resume" in inspect.signature(func).parameters
                and "resume" not in kwargs
            ):
                kwargs["resume"] = False  # --restart: a step's fit checkpoint is ignored too
            calls.append((func, kwargs))
        night.preflight()
        _write_state(
            pipe.state_path, night.state
        )  # an unwritable state file stops the run before any step
        for i, (step, (func, kwargs)) in enumerate(zip(pipe.steps, calls), 1):
            if night.skip(i, step):
                continue
            night.start(i, step, shown=_describe(step, kwargs))
            try:
                with night.capture():
                    func(**kwargs, stdout=out)
            except FsdaskError as exc:
                raise StepFailed(redact(f"step {i} ({step.name}) failed: {exc}")) from None
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                msg = str(exc).splitlines()[0] if str(exc) else ""
                raise StepFailed(
                    redact(
                        f"step {i} ({step.name}) failed unexpectedly: {type(exc).__name__}: {msg}"
                    ),
                    exit_code=1,
                ) from exc
            night.done(i, step)
        night.complete()
    return night.summary
