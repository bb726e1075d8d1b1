"""The ``fsdask`` command line.

Each subcommand lives in :mod:`fsdask.commands` as a module with ``add_parser(subparsers)``
and ``run(args) -> int``; a module that is absent is simply not offered.  Errors that
fsdask raises on purpose (bad input, unreachable storage, bad parameters) become a
one-line message on stderr and exit status 2; anything else exits 1 (``--debug`` shows the
traceback).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from fsdask import __version__
from fsdask.errors import FsdaskError

SUBCOMMANDS = ("ingest", "info", "select", "evaluate", "report", "export", "run", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fsdask",
        description="Out-of-core, distributed feature selection on chunked Zarr data.",
        epilog="Run `fsdask COMMAND --help` for the options of each command.")
    parser.add_argument("--version", action="version", version=f"fsdask {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"fsdask.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"fsdask.commands.{name}":
                continue
            raise
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    level = logging.WARNING - 10 * min(args.verbose, 2)
    # only fsdask's own logger (and, with -vv, dask's) become verbose: the storage libraries
    # (botocore, s3fs, aiohttp, urllib3, fsspec) log request headers that carry credentials,
    # so they stay at WARNING whatever -v says
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    logging.getLogger("fsdask").setLevel(level)
    for noisy in ("distributed", "dask", "bokeh", "tornado"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose >= 2 else logging.WARNING)
    for secret_bearing in ("botocore", "aiobotocore", "s3fs", "fsspec", "urllib3", "aiohttp", "gcsfs", "adlfs"):
        logging.getLogger(secret_bearing).setLevel(logging.WARNING)
    try:
        return int(args._run(args) or 0)
    except FsdaskError as exc:
        if args.debug:
            raise
        print(f"fsdask {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fsdask {args.command}: interrupted; no result was written", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug or an unexpected failure: one line, non-zero
        if args.debug:
            raise
        msg = str(exc).splitlines()[0] if str(exc) else ""
        print(f"fsdask {args.command}: unexpected error: {type(exc).__name__}: {msg} "
              "(re-run with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
