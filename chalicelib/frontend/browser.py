"""A person who opens DMQ's address in a browser is sent to the web console.

`GET /` with no query is not an SQS request: SQS answers it with a 404
`UnknownOperationException`, and so does DMQ for an SDK or curl. A browser (it asks for
`text/html` first) gets a redirect to the console instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

CONSOLE = "console"  # relative: under a deployed stage it stays under the stage's path


def console_redirect(method: str, headers: Mapping[str, str],
                     query: Sequence[tuple[str, str]]) -> dict[str, str | list[str]] | None:
    """The redirect's headers for a browser's bare `GET /`; None for anything else."""
    if method != "GET" or query:
        return None
    accept = next((v for k, v in headers.items() if k.lower() == "accept"), "")
    first = accept.split(",", 1)[0].split(";", 1)[0].strip().lower()
    if first != "text/html":
        return None
    return {"Location": CONSOLE, "Content-Type": "text/html; charset=utf-8",
            "Cache-Control": "no-store"}
