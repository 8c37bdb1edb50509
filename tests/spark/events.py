"""Hand-made lifecycle events (the schema of `glue_jobs.common.schemas.EVENT`)."""

from __future__ import annotations

from typing import Any

from glue_jobs.common.events import SEQ_WIDTH
from glue_jobs.common.schemas import EVENT

SOURCE = "arn:aws:dynamodb:r1:000000000000:table/dmq-messages/stream/1"
TABLE = "dmq-messages"
EPOCH = "e1"
QUEUE = "000000000000/orders"
DAY_MS = 86_400_000


class Events:
    """Builds events with increasing sequence numbers, in one epoch of the store."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self._seq = 0
        self._epoch = EPOCH

    def restart_empty(self, epoch: str) -> Events:
        """The store restarts empty (the memory store): a new epoch, whose stream numbers
        its changes from the start again."""
        self._epoch, self._seq = epoch, 0
        return self

    def add(self, kind: str, message: str, at: int, *, queue: str = QUEUE,
            source: str = SOURCE, region: str = "r1", sent: int | None = None,
            old_rc: int | None = None, new_rc: int | None = None,
            old_visible_at: int | None = None, group: str | None = None,
            group_seq: str | None = None, rseq: str | None = None,
            expires: int | None = None) -> Events:
        self._seq += 1
        sent_ms = at if sent is None else sent
        table = source.split(":table/", 1)[1].split("/", 1)[0]
        self.rows.append((
            self._epoch, source, table, region, str(self._seq).rjust(SEQ_WIDTH, "0"), kind, at,
            queue, f"{queue}#0", message, sent_ms, expires or sent_ms + 4 * DAY_MS,
            old_rc, new_rc, old_visible_at, group, group_seq, rseq,
        ))
        return self

    def lifecycle(self, message: str, sent: int, received: int, deleted: int | None,
                  **kwargs: Any) -> Events:
        """Sent, received once (30 s visibility) and, when given, deleted."""
        self.add("sent", message, sent, **kwargs)
        self.add("received", message, received, sent=sent, old_rc=0, new_rc=1,
                 old_visible_at=sent, **kwargs)
        if deleted is not None:
            self.add("removed", message, deleted, sent=sent, **kwargs)
        return self

    def frame(self, spark: Any) -> Any:
        return spark.createDataFrame(self.rows, EVENT)


def rows(*expected: dict[str, Any]) -> list[Any]:
    """Expected rows for assertDataFrameEqual, column names included."""
    from pyspark.sql import Row

    return [Row(**row) for row in expected]
