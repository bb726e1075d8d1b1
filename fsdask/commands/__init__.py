"""Subcommands of the ``fsdask`` CLI and the option helpers they share.

Each module ``fsdask.commands.NAME`` has ``add_parser(subparsers)``, ``run(args) -> int``
(the CLI side) and a plain Python function ``NAME(...)`` that does the work; ``run`` and
the pipeline (:mod:`fsdask.pipeline`) both call that function, so a pipeline step and a
command line with the same options do the same thing.
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from fsdask.errors import ParameterError

#: the subcommands, in the order ``fsdask --help`` lists them
COMMANDS = (
    "ingest",
    "info",
    "select",
    "evaluate",
    "report",
    "export",
    "verify",
    "run",
    "history",
    "demo",
)


def parse_kv(items: list[str] | None, what: str = "--param") -> dict[str, Any]:
    """``["k=v", …]`` → dict, values parsed as YAML scalars (``3`` → int, ``[1,2]`` → list)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ParameterError(f"{what} {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = yaml.safe_load(v) if v.strip() else None
        except yaml.YAMLError:
            out[k.strip()] = v
    return out


def add_storage_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="fsspec storage option, repeatable (e.g. endpoint_url=http://localhost:9000, "
        "anon=false). Credentials are best given by environment variables; they are "
        "never logged or written into results.",
    )


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--storage-option`` values as a dict; their secrets are registered for redaction."""
    from fsdask.io.secrets import register

    opts = parse_kv(getattr(args, "storage_option", []), "--storage-option")
    register(opts)
    return opts


class _WorkerTimeout(argparse.Action):
    """``--worker-timeout S`` sets ``$FSDASK_WORKER_TIMEOUT``, which fsdask.cluster.scheduler
    reads, so every command that computes honours it without passing it along."""

    def __call__(self, parser, namespace, values, option_string=None):
        import os

        os.environ["FSDASK_WORKER_TIMEOUT"] = str(values)
        setattr(namespace, self.dest, values)


def add_scheduler(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scheduler",
        default="threads",
        help="where to run: threads (default), sync, local, local:N (LocalCluster of N "
        "processes), tcp://host:port (existing scheduler) or a cluster YAML file",
    )
    p.add_argument(
        "--memory-limit", default=None, help="per-worker memory limit for local clusters (e.g. 2GB)"
    )
    p.add_argument(
        "--worker-timeout",
        action=_WorkerTimeout,
        metavar="SECONDS",
        help="give up when a cluster file's batch jobs start no worker within this time "
        "(default: $FSDASK_WORKER_TIMEOUT, the file's worker_timeout, else 300)",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="do not show progress (a bar on a terminal, otherwise a line every "
        "$FSDASK_PROGRESS_INTERVAL seconds, default 10, on stderr)",
    )


def add_data_options(p: argparse.ArgumentParser, *, label: bool = True) -> None:
    """Options of every command that reads a dataset other tools may have written."""
    g = p.add_argument_group("data written by other tools (xarray, zarr-python, AnnData)")
    g.add_argument(
        "--variable",
        help="the matrix to read (default: X, else the only 2-D variable); "
        "AnnData: X, raw or layers/NAME",
    )
    g.add_argument(
        "--sample-dim",
        help="name of the dim holding samples (dims are matched by name, never by position)",
    )
    g.add_argument("--feature-dim", help="name of the dim holding features")
    if label:
        g.add_argument(
            "--label",
            help="label variable along the sample dim; AnnData: obs column "
            "(obs:cell_type). Default: y, label, class, target, cell_type",
        )
        g.add_argument(
            "--drop-unlabelled",
            action="store_true",
            help="leave out the samples whose label is missing (NaN, None or blank) instead "
            "of refusing the data; the count is reported",
        )
    g.add_argument(
        "--rechunk-to",
        metavar="URL",
        help="where to write a rechunked copy when the store's chunking cannot be re-blocked "
        "in memory (default: a temporary directory, removed at exit)",
    )
    g.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="memory one task may use while re-blocking (default: dask config fsdask.memory-budget, 1GiB)",
    )


def data_options(args: argparse.Namespace, *, label: bool = True) -> dict[str, Any]:
    """Keyword arguments of the command functions from :func:`add_data_options`'s options."""
    keys = ("variable", "sample_dim", "feature_dim", "label", "rechunk_to", "memory_budget")
    opts = {k: getattr(args, k, None) for k in keys if label or k != "label"}
    if label:
        opts["drop_unlabelled"] = args.drop_unlabelled
    return opts


def add_overwrite(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the output if it exists and is an fsdask output of the same kind "
        "(never an input, a file or a folder fsdask did not write)",
    )


def check_count(value: Any, name: str, minimum: int = 0) -> int:
    """An integral option ≥ ``minimum`` (``--top``, ``--features``…), or a ParameterError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParameterError(f"{name}={value!r}: expected a whole number ≥ {minimum}")
    return value
