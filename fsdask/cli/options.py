"""The argparse options several subcommands share, and how they become the api's values.

:func:`add_data_options` and :func:`read_options` turn the read options of the command line
into one :class:`~fsdask.io.options.ReadOptions`; :func:`storage_options` turns
``--storage-option KEY=VALUE`` into a mapping whose secrets are registered for redaction.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from typing import Any

from fsdask.api import parse_kv
from fsdask.io.options import NAN_POLICIES, ReadOptions


def add_storage_options(p: argparse.ArgumentParser) -> None:
    """Add ``--storage-option KEY=VALUE`` (repeatable) to ``p``."""
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


class WorkerTimeout(argparse.Action):
    """``--worker-timeout S`` sets ``$FSDASK_WORKER_TIMEOUT``, which fsdask.cluster.scheduler
    reads, so every command that computes honours it without passing it along."""

    def __call__(self, parser, namespace, values, option_string=None):
        import os

        os.environ["FSDASK_WORKER_TIMEOUT"] = str(values)
        setattr(namespace, self.dest, values)


def add_scheduler(p: argparse.ArgumentParser) -> None:
    """Add ``--scheduler``, ``--memory-limit``, ``--worker-timeout`` and ``--no-progress`` to ``p``."""
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
        action=WorkerTimeout,
        metavar="SECONDS",
        help="give up when a cluster file's batch jobs start no worker within this time "
        "(default: $FSDASK_WORKER_TIMEOUT, the file's worker_timeout, else 300)",
    )
    add_progress(p)


def add_progress(p: argparse.ArgumentParser) -> None:
    """Add ``--no-progress`` to ``p`` (a command that computes shows its progress by default)."""
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="do not show progress (a bar on a terminal, otherwise a line every "
        "$FSDASK_PROGRESS_INTERVAL seconds, default 10, on stderr)",
    )


def add_data_options(p: argparse.ArgumentParser, *, label: bool = True) -> None:
    """Add the read options of a command that reads a dataset other tools may have written.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    label : bool
        Also add ``--label`` and ``--drop-unlabelled`` (ingest declares its own).
    """
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
    g.add_argument(
        "--nan-policy",
        choices=list(NAN_POLICIES),
        default="error",
        help="NaN/Inf values: refuse with a count (default), replace by 0 or by the feature's "
        "mean, or drop the feature; applied as the data are read (the source is never rewritten)",
    )


def read_options(args: argparse.Namespace) -> ReadOptions:
    """The read options of a parsed command line as one value.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options of a command that called :func:`add_data_options` (and, for ingest,
        declared ``--label`` and ``--drop-unlabelled`` itself).

    Returns
    -------
    ReadOptions
        The options given; those the command does not offer keep their defaults.
    """
    fields = [f.name for f in dataclasses.fields(ReadOptions)]
    return ReadOptions.of(**{k: getattr(args, k) for k in fields if hasattr(args, k)})


def add_overwrite(p: argparse.ArgumentParser) -> None:
    """Add ``--overwrite`` to ``p``."""
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the output if it exists and is an fsdask output of the same kind "
        "(never an input, a file or a folder fsdask did not write)",
    )


def add_json(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--json`` to ``p``: print ``what`` as one JSON object on stdout."""
    p.add_argument(
        "--json",
        action="store_true",
        help=f"print one JSON object ({what}) on stdout and nothing else; progress and "
        "messages go to stderr",
    )


@contextlib.contextmanager
def json_stdout(enabled: bool):
    """The stream a command prints its answer to; with ``enabled`` (``--json``) anything else
    printed to stdout meanwhile (a library's note, a progress line) goes to stderr, so stdout
    holds the one JSON object only.

    Parameters
    ----------
    enabled : bool
        Whether ``--json`` was given.

    Yields
    ------
    file
        The real stdout.
    """
    out = sys.stdout
    if not enabled:
        yield out
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield out
