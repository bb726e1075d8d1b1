"""Subcommands of the ``fsdask`` CLI and the option helpers they share."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from fsdask.errors import ParameterError


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
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE", default=[],
                   help="fsspec storage option, repeatable (e.g. endpoint_url=http://localhost:9000, "
                        "anon=false). Credentials are best given by environment variables; they are "
                        "never logged or written into results.")


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    opts = parse_kv(getattr(args, "storage_option", []), "--storage-option")
    # s3fs expects endpoint_url inside client_kwargs on older versions; both work on current ones
    return opts


def add_scheduler(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", default="threads",
                   help="where to run: threads (default), sync, local, local:N (LocalCluster of N "
                        "processes), tcp://host:port (existing scheduler) or a cluster YAML file")
    p.add_argument("--memory-limit", default=None, help="per-worker memory limit for local clusters (e.g. 2GB)")
    p.add_argument("--worker-timeout", type=float, default=None, metavar="SECONDS",
                   help="give up when a cluster file's batch jobs start no worker within this time "
                        "(default: the file's worker_timeout, else 300)")
    p.add_argument("--no-progress", action="store_true",
                   help="do not show progress (a bar on a terminal, otherwise a line every "
                        "$FSDASK_PROGRESS_INTERVAL seconds, default 10, on stderr)")
