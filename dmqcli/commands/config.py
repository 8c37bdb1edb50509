"""`dmq config`: where `dmq` would send requests and how it would sign them, with where
each came from. It sends no request."""

from __future__ import annotations

import argparse
from typing import Any

from dmqcli.context import Context
from dmqcli.credentials import looked_in
from dmqcli.discovery import ENV, FILE, FLAG
from dmqcli.errors import CliError
from dmqcli.parsing import examples

SOURCES = {FLAG: "--endpoint", ENV: "DMQ_ENDPOINT", FILE: "the local server's server.json"}


def describe(ctx: Context) -> dict[str, Any]:
    """The endpoint, its source, the local server's record, the region and credentials."""
    target = ctx.target
    server = target.server
    data: dict[str, Any] = {
        "endpoint": target.url,
        "endpoint_source": SOURCES.get(target.source, "the default"),
        "server_file": str(server.path) if server else None,
        "server_pid": server.pid if server else None,
        "auth": target.auth,
        "ca": target.ca,
        "region": ctx.region,
    }
    try:
        signer = ctx.signer
    except CliError:
        data.update(access_key=None, credentials=f"none found ({looked_in(ctx.botocore_session)})")
    else:
        data.update(access_key=signer.shown_key, credentials=signer.found_in)
    return data


def _config(ctx: Context, args: argparse.Namespace) -> None:
    ctx.output.fields(describe(ctx), title="dmq config (no request sent)")


def register(sub: Any) -> None:
    """Add `config`."""
    config = sub.add_parser(
        "config", help="where dmq connects and how it signs (no request is sent)",
        epilog=examples("dmq config", "DMQ_DATA_DIR=/tmp/dmq-data dmq config --json"))
    config.set_defaults(func=_config)
