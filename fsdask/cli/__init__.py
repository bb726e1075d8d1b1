"""The ``fsdask`` command line: argparse adapters over :mod:`fsdask.api` and :mod:`fsdask.pipeline`.

Each subcommand is a module ``fsdask.cli.NAME`` with ``add_parser(subparsers)`` and
``run(args) -> int``, which turns the parsed options into one call of the command's function
(:mod:`fsdask.api`; ``run``: :func:`fsdask.pipeline.run_pipeline`); a module that is absent is
simply not offered.  Errors that
fsdask raises on purpose (bad input, unreachable storage, bad parameters) become a
one-line message on stderr and exit status 2; anything else is a bug: exit 1, with where to
report it (``--debug`` shows the traceback).  Every line printed on error, and every log
line, passes through :func:`fsdask.io.secrets.redact`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from fsdask.errors import FsdaskError
from fsdask.io.secrets import RedactingFilter, redact
from fsdask.version import VERSION as __version__

#: the subcommands, in the order ``fsdask --help`` lists them
SUBCOMMANDS = (
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
BUG_REPORT = (
    "this is a bug in fsdask; please report it with the command line and the output of "
    "the same command with --debug (README.md, section Safety)"
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``fsdask`` and of every subcommand this installation offers."""
    parser = argparse.ArgumentParser(
        prog="fsdask",
        description="Out-of-core, distributed feature selection on chunked Zarr data.",
        epilog="Run `fsdask COMMAND --help` for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"fsdask {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"fsdask.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"fsdask.cli.{name}":
                continue
            raise
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return parser


def _install_redaction() -> None:
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def _configure_logging(verbose: int) -> None:
    """Log to stderr, redacted; ``-v`` raises fsdask's level, ``-vv`` dask's too."""
    level = logging.WARNING - 10 * min(verbose, 2)
    # only fsdask's own logger (and, with -vv, dask's) become verbose: the storage libraries
    # (botocore, s3fs, aiohttp, urllib3, fsspec) log request headers that carry credentials,
    # so they stay at WARNING whatever -v says
    logging.basicConfig(
        level=logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    _install_redaction()
    logging.getLogger("fsdask").setLevel(level)
    for noisy in ("distributed", "dask", "bokeh", "tornado"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
    for secret_bearing in (
        "botocore",
        "aiobotocore",
        "s3fs",
        "fsspec",
        "urllib3",
        "aiohttp",
        "gcsfs",
        "adlfs",
    ):
        logging.getLogger(secret_bearing).setLevel(logging.WARNING)
    # a storage call that fails raises in fsdask's code, which reports it in one line; the
    # event loop's "exception never retrieved" notes about the cancelled retries are noise
    logging.getLogger("asyncio").setLevel(logging.DEBUG if verbose >= 2 else logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    """Run ``fsdask ARGV``; return the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 done; 2 bad input, parameters, storage or config (one line on stderr); 1 a bug;
        75 another pipeline run holds the lock; 130 interrupted.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    _configure_logging(args.verbose)
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:
        # the reader went away (`fsdask info … | head`): stop quietly, as `cat` does
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except FsdaskError as exc:
        if args.debug:
            raise
        _quiet_unraisable(args.verbose)
        print(redact(f"fsdask {args.command}: error: {_one_line(exc)}"), file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        print(f"fsdask {args.command}: interrupted; no result was written", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, where to report it, exit 1
        if args.debug:
            raise
        if type(exc).__name__ == "KilledWorker" and type(exc).__module__.startswith("distributed"):
            # the workers died, not fsdask (a cluster not watched by fsdask.cluster.scheduler)
            print(
                redact(
                    f"fsdask {args.command}: error: the Dask workers running one task all died "
                    f"({_one_line(exc)[:200]}); check the workers' memory limit and their logs"
                ),
                file=sys.stderr,
            )
            return 2
        print(
            redact(
                f"fsdask {args.command}: unexpected error: {type(exc).__name__}: {_one_line(exc)} — "
                f"{BUG_REPORT}"
            ),
            file=sys.stderr,
        )
        return 1


def _quiet_unraisable(verbose: int) -> None:
    """Keep the one-line error the last line: the storage library's abandoned requests
    (coroutines closed at interpreter exit, in another context) would print "Exception
    ignored" tracebacks below it, and the cluster's shutdown its log lines.  ``-vv`` still
    shows them."""
    if verbose < 2:
        sys.unraisablehook = lambda u: logging.getLogger("fsdask").debug(
            "ignored at exit: %r", u.exc_value
        )
        if "distributed" in sys.modules:
            # a cluster may still be shutting down: a nanny thread reaping a dead worker logs
            # ("process … exit status was already read") after the error line otherwise
            from fsdask.cluster import quiet_distributed

            quiet_distributed(logging.CRITICAL)


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    return " ".join(text.split()) if text else ""
