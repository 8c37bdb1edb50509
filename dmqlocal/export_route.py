"""`POST /admin/exports`: write the pending incremental exports and a full export of every
table now, served by the local server only (on AWS, DynamoDB's ExportTableToPointInTime
writes the exports).

The answer lists the export folders written, under the data folder's `exports/`; the
audit (`dmq audit`) then judges every message by them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from chalice import Chalice, IAMAuthorizer, Response

PATH = "/admin/exports"
NO_DATA_DIR = ("This server keeps no data folder, so it writes no exports: start it with "
               "DMQ_DATA_DIR set.")

Exporter = Callable[[], list[Path]] | None


class _Target:
    """What the route calls (the latest runner's exporter; one app serves one runner)."""

    export: Exporter = None


def export_now(export: Exporter) -> Response:
    """Run one export, answered in the admin routes' shape."""
    if export is None:
        return Response(body={"code": "InvalidParameterValue", "message": NO_DATA_DIR},
                        status_code=400)
    folders = export()
    return Response(body={"exports": [str(f) for f in folders]}, status_code=200)


def install(app: Chalice, export: Exporter) -> None:
    """Add the route to the app (once; later calls only retarget it)."""
    _Target.export = export
    if "POST" in app.routes.get(PATH, {}):
        return

    def admin_exports() -> Response:
        """Admin (local only): write a full export of every table now."""
        return export_now(_Target.export)

    app.route(PATH, methods=["POST"], authorizer=IAMAuthorizer())(admin_exports)
