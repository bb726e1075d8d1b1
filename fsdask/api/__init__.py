"""The commands as plain Python functions: the door the CLI and the pipeline both go through.

Each ``fsdask`` subcommand is a function here (``select``, ``evaluate``, ``ingest``…) taking
its options as keyword arguments and the read options as one
:class:`~fsdask.io.options.ReadOptions` (``read=``).  Each declares, in a
:class:`~fsdask.api.spec.Command` at ``func.command``, which parameters name the locations it
writes and the datasets it reads, so a pipeline step and a command line with the same
options do the same thing.  :mod:`fsdask.cli` adapts them to argparse; :mod:`fsdask.pipeline`
runs them from YAML.  This package imports neither.

    >>> from fsdask.api import COMMANDS
    >>> COMMANDS["select"].outputs
    ('output', 'csv')
"""

from __future__ import annotations

from fsdask.api.common import check_count, open_data, parse_kv
from fsdask.api.demo import demo
from fsdask.api.evaluate import evaluate
from fsdask.api.export import export
from fsdask.api.history import history
from fsdask.api.info import info
from fsdask.api.ingest import ingest
from fsdask.api.report import report
from fsdask.api.select import select
from fsdask.api.spec import Command, command
from fsdask.api.verify import verify

#: name → declaration of every command function, in the order ``fsdask --help`` lists them
COMMANDS: dict[str, Command] = {
    f.command.name: f.command
    for f in (ingest, info, select, evaluate, report, export, verify, history, demo)
}

__all__ = [
    "COMMANDS",
    "Command",
    "command",
    "check_count",
    "demo",
    "evaluate",
    "export",
    "history",
    "info",
    "ingest",
    "open_data",
    "parse_kv",
    "report",
    "select",
    "verify",
]
