"""Output: rich tables for people, JSON for scripts (`--json`). Tables show times as ISO
8601 in UTC; JSON keeps the service's values (epoch milliseconds or seconds)."""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

WIDE = 200  # the width tables get when stdout is not a terminal (no folding in pipes)


def console() -> Console:
    """The console for stdout: the terminal's width, or a wide page when redirected."""
    from rich.console import Console  # loaded only to draw (JSON output starts faster)

    return Console(width=None if sys.stdout.isatty() else WIDE, highlight=False,
                   soft_wrap=False)


def _epoch(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.isdigit():
        return float(value)
    return None


def iso_ms(value: Any, scale: float = 1000.0) -> Any:
    """Epoch milliseconds (or seconds with scale=1) as ISO 8601 UTC, e.g.
    2026-11-25T15:27:03.123Z; anything that is no epoch number is returned as it is."""
    epoch = _epoch(value)
    if epoch is None:
        return value
    try:
        moment = datetime.fromtimestamp(epoch / scale, UTC)
    except (OverflowError, OSError, ValueError):
        return value
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_s(value: Any) -> Any:
    """Epoch seconds (SQS's CreatedTimestamp, LastModifiedTimestamp) as ISO 8601 UTC."""
    return iso_ms(value, scale=1.0)


def cell(value: Any) -> str:
    """A value as a table cell: nothing for None, JSON for lists and dicts."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


class Output:
    """Writes one command's result, as JSON or as a table."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def json(self, data: Any) -> None:
        """Print data as indented JSON."""
        print(json.dumps(data, indent=2, sort_keys=True, default=str))

    def table(self, data: Any, columns: Sequence[str], rows: Iterable[Sequence[Any]],
              title: str | None = None, empty: str = "(none)") -> None:
        """JSON when asked; else a table of the rows (or the `empty` line)."""
        if self.as_json:
            self.json(data)
            return
        rows = list(rows)
        if not rows:
            print(empty)
            return
        from rich.table import Table

        table = Table(*columns, title=title, title_justify="left")
        for row in rows:
            table.add_row(*(cell(v) for v in row))
        console().print(table)

    def fields(self, data: dict[str, Any], title: str | None = None,
               times_ms: Collection[str] = ()) -> None:
        """One record: JSON when asked, else a two-column table of its fields (those named
        in `times_ms` shown as times)."""
        rows = ((k, iso_ms(v) if k in times_ms else v) for k, v in sorted(data.items()))
        self.table(data, ("field", "value"), rows, title=title)
