"""Export chains: the newest full export of a table and the incremental exports after it.

DynamoDB writes two kinds of export under an export prefix, each in its own folder
`<prefix>/AWSDynamoDB/<export id>/` with `manifest-summary.json` written last:
- a *full* export (`exportType` FULL_EXPORT, or none in older summaries): every item as
  of `exportTime`;
- an *incremental* export (INCREMENTAL_EXPORT): each item changed between
  `exportFromTime` and `exportToTime`, once, with its `Keys`, its `NewImage` (absent when
  the item was deleted) and its `OldImage`.

What a table holds at the end of a chain is the full export with the incremental exports
applied in order, each changed item taking its newest image (or going, when its newest
line has no `NewImage`). An incremental export that overlaps the full export changes
nothing that is right: every item changed in its window has a line with its state at
the window's end (one that came and went has a line without images), and that state is
the one the item has at the chain's end unless a later export changes it again. So the
chain takes every incremental export that ends after `OVERLAP_MS` before the full
export's time: a change made just before the full export began is then in the chain,
whichever side of the scan it fell on.

Pure Python, no Spark: the local server prunes with the same rule the audits read by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

FULL = "FULL_EXPORT"
INCREMENTAL = "INCREMENTAL_EXPORT"
OVERLAP_MS = 60_000


@dataclass(frozen=True)
class ExportInfo:
    """One complete table export (full or incremental)."""

    table: str
    region: str
    source: str  # the table's stream ARN ("" in DynamoDB's own exports)
    export_ms: int  # a full export's time; an incremental export's exportToTime
    folder: str  # the export's own folder (`<export prefix>/AWSDynamoDB/<export id>`)
    table_arn: str = ""
    epoch: str = ""  # the store's epoch ("" in DynamoDB's own exports)
    kind: str = FULL
    from_ms: int = 0  # an incremental export's exportFromTime

    @property
    def export_id(self) -> str:
        """The last part of the export's folder."""
        return self.folder.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ExportChain:
    """A table's newest full export and the incremental exports to apply after it."""

    full: ExportInfo
    increments: tuple[ExportInfo, ...] = field(default=())

    @property
    def table(self) -> str:
        """The table's name."""
        return self.full.table

    @property
    def region(self) -> str:
        """The table's region."""
        return self.full.region

    @property
    def base_ms(self) -> int:
        """The full export's time: every change before it is in the full export."""
        return self.full.export_ms

    @property
    def end_ms(self) -> int:
        """The time the chain shows the table at: its last export's."""
        return max([self.full.export_ms, *(e.export_ms for e in self.increments)])


def iso_ms(text: str | None) -> int:
    """An export summary's time (ISO 8601, `Z` or an offset) in epoch ms; 0 when absent."""
    if not text:
        return 0
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def export_info(summary: Mapping[str, Any], folder: str) -> ExportInfo:
    """An export as its `manifest-summary.json` describes it.

    DMQ's local exports name their region (`dmqRegion`); DynamoDB's own do not, and the
    region is then the table ARN's (arn:aws:dynamodb:<region>:...).
    """
    table_arn = str(summary.get("tableArn") or "")
    parts = table_arn.split(":")
    region = summary.get("dmqRegion") or (parts[3] if len(parts) > 3 else "")
    kind = str(summary.get("exportType") or FULL)
    if kind == INCREMENTAL:
        at, since = iso_ms(summary.get("exportToTime")), iso_ms(summary.get("exportFromTime"))
    else:
        at, since = iso_ms(summary.get("exportTime")), 0
    return ExportInfo(table_arn.rsplit("table/", 1)[-1], str(region),
                      str(summary.get("dmqStreamArn") or ""), at, folder, table_arn,
                      str(summary.get("dmqEpoch") or ""), kind, since)


def _follows(full: ExportInfo, increment: ExportInfo) -> bool:
    """Whether an incremental export belongs to the chain of a full export: it ends after
    the overlap before the full export, and shows the same lifetime of the store."""
    same_epoch = not (full.epoch and increment.epoch) or full.epoch == increment.epoch
    return same_epoch and increment.export_ms > full.export_ms - OVERLAP_MS


def chains(exports: Iterable[ExportInfo]) -> list[ExportChain]:
    """The chain of each table and region that has a full export, by table and region."""
    by_table: dict[tuple[str, str], list[ExportInfo]] = {}
    for export in exports:
        by_table.setdefault((export.table, export.region), []).append(export)
    found = []
    for key in sorted(by_table):
        fulls = [e for e in by_table[key] if e.kind != INCREMENTAL]
        if not fulls:
            continue
        full = max(fulls, key=lambda e: (e.export_ms, e.export_id))
        increments = sorted((e for e in by_table[key]
                             if e.kind == INCREMENTAL and _follows(full, e)),
                            key=lambda e: (e.export_ms, e.from_ms, e.export_id))
        found.append(ExportChain(full, tuple(increments)))
    return found
