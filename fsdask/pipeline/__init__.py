"""Config-driven batch runs: ``fsdask run config.yaml``.

A pipeline is an ordered list of steps, each one an ``fsdask`` subcommand (``ingest``,
``select``, and ``evaluate`` / ``report`` where this installation has them) with the same
options as on the command line, written as YAML::

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
* One run per state file: a second concurrent run exits 75 (:mod:`fsdask.pipeline.lock`).
* ``--log-json FILE`` appends machine-readable events (:mod:`fsdask.pipeline.logjson`);
  each run appends per step to ``STATE.history.jsonl`` (:mod:`fsdask.pipeline.history`).
* Exit status: 0 ok, 1 unexpected error (a bug), 2 bad input / parameters / storage /
  config, 75 another run holds the lock (try later), 130 interrupted.  A failing step
  stops the run with a one-line reason naming the step.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from fsdask.errors import FsdaskError, ParameterError

log = logging.getLogger("fsdask")

#: options of a step that name the files it produces (checked to exist before skipping)
OUTPUT_OPTIONS = ("url", "output", "csv", "out", "report")
TOP_LEVEL_KEYS = {"scheduler", "storage_options", "memory_limit", "state", "history_top_k", "steps"}
_INPUT_ONLY = {"select": {"url"}, "info": {"url"}, "evaluate": {"url"}}


@dataclass
class Step:
    name: str
    command: str
    options: dict[str, Any]

    def digest(self) -> str:
        blob = json.dumps({"command": self.command, "options": self.options}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def outputs(self) -> list[str]:
        skip = _INPUT_ONLY.get(self.command, set())
        return [str(self.options[k]) for k in OUTPUT_OPTIONS if k in self.options and k not in skip
                and self.options[k] is not None]


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
        raise ParameterError(f"{path}: cannot read the pipeline config ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("steps"), list) or not cfg["steps"]:
        raise ParameterError(f"{path}: expected a mapping with a non-empty list 'steps' "
                             "(see examples/pipeline.yaml)")
    unknown = sorted(set(cfg) - TOP_LEVEL_KEYS)
    if unknown:
        raise ParameterError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; valid: "
                             f"{', '.join(sorted(TOP_LEVEL_KEYS))}")
    from fsdask.cli import SUBCOMMANDS
    steps: list[Step] = []
    for i, raw in enumerate(cfg["steps"], 1):
        if not isinstance(raw, dict):
            raise ParameterError(f"{path}: step {i} must be a mapping like {{select: {{…}}}}")
        raw = dict(raw)
        name = str(raw.pop("name", ""))
        commands = [k for k in raw if k in SUBCOMMANDS]
        if len(commands) != 1 or len(raw) != 1:
            raise ParameterError(f"{path}: step {i} ({name or 'unnamed'}) must name exactly one command "
                                 f"({', '.join(c for c in SUBCOMMANDS if c not in ('run', 'demo'))}) "
                                 f"and its options; found keys {sorted(raw)}")
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
    defaults = {k: cfg[k] for k in ("scheduler", "storage_options", "memory_limit", "history_top_k") if k in cfg}
    top_k = defaults.get("history_top_k", 20)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ParameterError(f"{path}: history_top_k must be a whole number ≥ 1; got {top_k!r}")
    state = cfg.get("state") or os.path.splitext(os.path.basename(path))[0] + ".state.json"
    state_path = os.path.join(os.path.dirname(path), str(state))
    return Pipeline(path, steps, defaults, state_path)


def _argv(step: Step, sub: argparse.ArgumentParser, defaults: dict[str, Any]) -> list[str]:
    """Turn a step's options into the argv of its subcommand (checked by the real parser)."""
    actions = {a.dest: a for a in sub._actions if a.dest not in ("help",)}
    opts = dict(step.options)
    if "scheduler" in actions and "scheduler" not in opts and "scheduler" in defaults:
        opts["scheduler"] = defaults["scheduler"]
    if "memory_limit" in actions and "memory_limit" not in opts and "memory_limit" in defaults:
        opts["memory_limit"] = defaults["memory_limit"]
    if "storage_option" in actions and "storage_options" in defaults:
        merged = dict(defaults["storage_options"] or {})
        merged.update(opts.pop("storage_option", None) or opts.pop("storage_options", None) or {})
        opts["storage_option"] = merged
    elif "storage_options" in opts:
        opts["storage_option"] = opts.pop("storage_options")
    positional, optional = [], []
    for a in sub._actions:
        if not a.option_strings and a.dest in opts:
            positional.append(str(opts.pop(a.dest)))
        elif not a.option_strings and a.dest != "help" and a.required is not False:
            raise ParameterError(f"step {step.name!r} ({step.command}): missing option {a.dest!r}")
    for key, value in opts.items():
        a = actions.get(key.replace("-", "_"))
        if a is None or not a.option_strings:
            valid = sorted(d for d, x in actions.items() if x.option_strings)
            raise ParameterError(f"step {step.name!r} ({step.command}): unknown option {key!r}; "
                                 f"valid: {', '.join(valid)}")
        flag = next((s for s in a.option_strings if s.startswith("--")), a.option_strings[0])
        if isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            if bool(value) == isinstance(a, argparse._StoreTrueAction):
                optional.append(flag)
        elif isinstance(a, argparse._AppendAction):
            items = value.items() if isinstance(value, dict) else [(None, v) for v in (value or [])]
            for k, v in items:
                text = v if isinstance(v, str) else yaml.safe_dump(v, default_flow_style=True).strip()
                text = text.removesuffix("\n...").strip()
                optional += [flag, text if k is None else f"{k}={text}"]
        elif value is not None:
            optional += [flag, str(value)]
    return optional + ["--"] + positional if positional else optional


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


def run_pipeline(config: str | os.PathLike, *, restart: bool = False, out=None,
                 log_json: str | os.PathLike | None = None, defaults: dict | None = None) -> dict[str, str]:
    """Run (or resume) the pipeline in ``config``; return {step name: "ran" | "skipped"}.

    ``log_json``: append JSON-lines events to this file; ``defaults``: override the config's
    ``scheduler`` / ``memory_limit`` (e.g. sized from a batch allocation).  Raises
    :class:`StepFailed` (one-line message naming the step; ``exit_code`` 75 when another run
    holds the lock) when a step fails.
    """
    from fsdask.cli import build_parser
    from fsdask.pipeline.lock import Locked
    from fsdask.pipeline.session import Session
    out = out or sys.stdout
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    night = Session(config, restart=restart, out=out, log_json=log_json, defaults=defaults)
    try:
        night.open()
    except Locked as exc:
        raise StepFailed(str(exc), exit_code=exc.exit_code) from None
    with night, _cwd(os.path.dirname(night.pipe.path)):
        pipe = night.pipe
        argvs = []  # every step's options are checked before anything runs
        for i, step in enumerate(pipe.steps, 1):
            if step.command not in subparsers.choices:
                raise StepFailed(f"step {i} ({step.name}): the command '{step.command}' is not available "
                                 "in this installation")
            argvs.append([step.command, *_argv(step, subparsers.choices[step.command], pipe.defaults)])
        night.preflight()
        for i, (step, argv) in enumerate(zip(pipe.steps, argvs), 1):
            if night.skip(i, step):
                continue
            night.start(i, step, shown=f"fsdask {' '.join(a for a in argv if a != '--')}")
            try:
                args = parser.parse_args(argv)
            except SystemExit:
                raise StepFailed(f"step {i} ({step.name}): invalid options for `fsdask {step.command}` "
                                 "(see the argparse message above)") from None
            try:
                with night.capture():
                    rc = int(args._run(args) or 0)
            except FsdaskError as exc:
                raise StepFailed(f"step {i} ({step.name}) failed: {exc}") from None
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                msg = str(exc).splitlines()[0] if str(exc) else ""
                raise StepFailed(f"step {i} ({step.name}) failed unexpectedly: {type(exc).__name__}: {msg}",
                                 exit_code=1) from exc
            if rc != 0:
                raise StepFailed(f"step {i} ({step.name}): `fsdask {step.command}` exited with status {rc}", rc)
            night.done(i, step)
        night.complete()
    return night.summary
