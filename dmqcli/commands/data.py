"""`dmq export` (a table export of the local server, now) and `dmq audit` (the Spark
audits over what the local server archived)."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from dmqcli.admin_api import without_route
from dmqcli.context import Context
from dmqcli.errors import CliError
from dmqcli.parsing import examples

ON_AWS = ("on AWS, export the messages tables with DynamoDB's ExportTableToPointInTime "
          "(aws dynamodb export-table-to-point-in-time --s3-prefix exports/<table>/<region>)")


def _export(ctx: Context, args: argparse.Namespace) -> None:
    try:
        data = ctx.admin.post("/admin/exports")
    except CliError as exc:
        raise without_route(exc, f"only the local server writes exports; {ON_AWS}") from None
    ctx.output.table(data, ("export folder",), ((f,) for f in data["exports"]),
                     empty="(no tables exported)")


def _audit(ctx: Context, args: argparse.Namespace) -> int:
    if importlib.util.find_spec("pyspark") is None:
        raise CliError("the audits run on Spark, which `make run` does not install: "
                       "`make audit` installs it (requirements-dev.txt) and runs them")
    from dmqlocal import audit  # Spark and the jobs load only for this command

    return audit.run(args)


def register(sub: Any) -> None:
    """Add `export` and `audit`."""
    export = sub.add_parser("export", help="write a table export of every table now "
                                           "(local server; what the audit judges by)",
                            epilog=examples("dmq export", "dmq export --json"))
    export.set_defaults(func=_export)
    from dmqlocal.audit import add_arguments

    audit = sub.add_parser("audit", help="run the Spark audits over the local data folder "
                                         "(no endpoint needed)",
                           epilog=examples("dmq audit", "dmq audit --data-dir /tmp/dmq-data "
                                           "--job usage_report"))
    add_arguments(audit)
    audit.set_defaults(func=_audit)
