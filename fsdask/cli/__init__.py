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

from fsdask.version import VERSION as __version__

# the rest of fsdask (scikit-learn, dask, xarray behind fsdask.errors, fsdask.io and the
# subcommands) is imported once the command line asks for more than the version

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
    add_quiet(parser, default=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"fsdask.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"fsdask.cli.{name}":
                continue
            raise
        p = mod.add_parser(sub)
        add_quiet(p, default=argparse.SUPPRESS)
        p.set_defaults(_run=mod.run)
    return parser


def add_quiet(p: argparse.ArgumentParser, default) -> None:
    """Add ``-q/--quiet`` to ``p`` (before or after the subcommand; a subcommand's default
    :data:`argparse.SUPPRESS` keeps the top level's value)."""
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="no progress and no informational output (warnings and errors are still shown)",
    )


def _asks_version(argv: list[str]) -> bool:
    """Whether ``fsdask ARGV`` asks for ``--version`` before any subcommand (answered without
    importing the subcommands)."""
    for token in argv:
        if token == "--version":
            return True
        if not token.startswith("-"):
            return False
    return False


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """:func:`warnings.showwarning` of the command line: ``warning: CATEGORY: MESSAGE`` in one
    line on stderr (no source line), redacted."""
    from fsdask.io.secrets import redact

    text = " ".join(str(message).split())
    try:
        print(redact(f"warning: {category.__name__}: {text}"), file=file or sys.stderr)
    except (OSError, ValueError):  # stderr closed: a warning is not worth a crash
        pass


def _install_redaction() -> None:
    from fsdask.io.secrets import RedactingFilter

    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def _configure_logging(verbose: int, quiet: bool = False) -> None:
    """Log to stderr, redacted; ``-v`` raises fsdask's level, ``-vv`` dask's too; ``-q``
    keeps fsdask's warnings and errors only."""
    level = logging.WARNING if quiet else logging.WARNING - 10 * min(verbose, 2)
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
    argv = sys.argv[1:] if argv is None else list(argv)
    if _asks_version(argv):
        print(f"fsdask {__version__}")
        return 0
    import warnings

    from fsdask.errors import FsdaskError
    from fsdask.io.secrets import redact

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    _configure_logging(args.verbose, args.quiet)
    if args.quiet and hasattr(args, "no_progress"):
        args.no_progress = True
    warnings.showwarning = show_warning
    try:
        return int(_call(args) or 0)
    except BrokenPipeError:
        # the reader went away (`fsdask info … | head`): stop quietly, as `cat` does
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except FsdaskError as exc:
        if args.debug:
            _print_traceback(exc)
            return int(getattr(exc, "exit_code", 2))
        _quiet_unraisable(args.verbose)
        print(redact(f"fsdask {args.command}: error: {_one_line(exc)}"), file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        print(f"fsdask {args.command}: interrupted; no result was written", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, where to report it, exit 1
        if args.debug:
            _print_traceback(exc)
            return 1
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


def _call(args: argparse.Namespace) -> int:
    """Run the subcommand; ``--quiet`` sends its informational stdout away (``info`` and
    ``history`` print what was asked for, and ``--json`` the one object asked for)."""
    import contextlib
    import os

    if not args.quiet or args.command in ("info", "history") or getattr(args, "json", False):
        return args._run(args)
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        return args._run(args)


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


def _print_traceback(exc: BaseException) -> None:
    """``--debug``: the traceback of ``exc`` on stderr, credentials redacted like every line."""
    import traceback

    from fsdask.io.secrets import redact

    print(redact("".join(traceback.format_exception(exc))), file=sys.stderr)
