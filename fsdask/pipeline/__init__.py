"""Config-driven batch runs: ``fsdask run config.yaml``.

A pipeline is an ordered list of steps, each one an ``fsdask`` subcommand (``ingest``,
``select``, ``evaluate``, ``report``, ``verify``, ``info``) with the same options as on the
command line (``param`` / ``storage_option`` as mappings, flags as true/false), written as
YAML; each step calls the command's Python function (:mod:`fsdask.api`)::

    scheduler: local:2                # default --scheduler of every step that takes one
    storage_options: {}               # default --storage-option (credentials: use env vars)
    state: pipeline.state.json        # where completed steps are recorded (default: next to the config)
    history_top_k: 20                 # how many top features each run records in the history
    fingerprint: stat                 # default of every step: stat (size, mtime) or content
    steps:
      - name: ingest
        ingest: {source: data.npz, url: data.zarr, overwrite: true}
      - name: ttest
        fingerprint: content          # digest every byte of this step's inputs each run
        select: {url: data.zarr, method: ttest, param: {n_features_to_select: 50},
                 output: ttest.zarr, csv: ttest.csv}

Relative paths are relative to the directory of the config file (steps run there).

* Every step is checked before any step runs (:mod:`fsdask.pipeline.validate`): its keys
  (a typo is refused with the closest valid key), its method and parameter values (the
  estimator is built and its constraints checked, nothing fitted), outputs that collide
  with another output or feed the same or an earlier step, inputs that nothing makes, and
  that the state, history, lock and ``--log-json`` files can be written.
* Every step's output is written atomically by the command itself (a store is renamed
  into place or marked complete last; CSV tables are renamed into place), so a crash
  never leaves an output that looks finished.
* After each step succeeds it is recorded in the state file (a hash of its options, the
  fingerprints of its inputs — :mod:`fsdask.pipeline.fingerprint`: by default a plain file's
  size and mtime stand for its content, ``fingerprint: content`` reads it —, the fsdask
  version), written atomically.  A re-run skips a
  step only when all of these match and its outputs exist; otherwise it and every later
  step run.  Each step prints ``skipped`` or ``runs (why: input X changed, options
  changed, …)``.  ``--restart`` ignores the state (see :mod:`fsdask.pipeline.session`).
* A ``select`` step with ``checkpoint_every: 5`` (iterations, or ``60s``) checkpoints its fit
  next to its output (:mod:`fsdask.checkpoint`); when a run is killed mid-fit, the next run
  continues that fit from the checkpoint (``--restart`` ignores it).
* One run per state file: a second concurrent run exits 75 (:mod:`fsdask.pipeline.lock`).
* ``--log-json FILE`` appends machine-readable events (:mod:`fsdask.pipeline.logjson`);
  each run appends per step to ``STATE.history.jsonl`` (:mod:`fsdask.api.runs`).
* Icechunk repositories (``icechunk://…``, :mod:`fsdask.io.icechunk`): an input's
  fingerprint is its snapshot id; all of a run's Icechunk outputs are committed together at
  the end, one commit per branch, or none if a step fails; a conflicting commit of another
  writer stops the run (exit 2).  ``--as-of SNAPSHOT|TAG`` reads every Icechunk input that
  the pipeline does not write at that version (repeat a past night).
* Each run appends OpenLineage-shaped START/COMPLETE/FAIL events to
  ``STATE.lineage.jsonl`` (:mod:`fsdask.pipeline.lineage`).
* Exit status: 0 ok, 1 unexpected error (a bug), 2 bad input / parameters / storage /
  config, 75 another run holds the lock (try later), 130 interrupted (Ctrl-C, SIGTERM).
  A failing step stops the run with a one-line reason naming the step.
* A step that runs again replaces its own earlier output (``overwrite`` defaults to true in
  a pipeline; the overwrite rule still holds: only an fsdask output of the same kind, never
  an input).  Secret storage options are shown as ``***`` in everything the run prints or
  records.

This package is the door of batch runs: :mod:`~fsdask.pipeline.config` reads and checks the
file, :mod:`~fsdask.pipeline.validate` checks every step before any runs,
:mod:`~fsdask.pipeline.state` records what is done, :mod:`~fsdask.pipeline.session`
runs the steps (lock, skip decisions, logs, history).  It calls :mod:`fsdask.api`, never
the command line.
"""

from __future__ import annotations

from fsdask.errors import StepFailed, StepInvalid
from fsdask.pipeline.config import Pipeline, Step, load_config, step_kwargs
from fsdask.pipeline.session import Session, exit_code, run_pipeline

__all__ = [
    "Pipeline",
    "Session",
    "Step",
    "StepFailed",
    "StepInvalid",
    "exit_code",
    "load_config",
    "run_pipeline",
    "step_kwargs",
]
