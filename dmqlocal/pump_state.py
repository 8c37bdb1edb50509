"""What the stream pump keeps per stream, shard and handler, and how a handler is given
its records: in order, in batches of its own size, and again after a backoff when it fails
(at least once, as Lambda's event source mapping)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from chalicelib.regions.reachability import RegionDownError
from dmqlocal.checkpoints import ShardCheckpoint
from dmqlocal.handlers import StreamBinding
from dmqlocal.shards import ShardInfo, ShardReader
from dmqlocal.stream_records import LambdaContext, Record, sequence_number

logger = logging.getLogger("dmq.pump")


@dataclass
class Consumer:
    """One handler's view of one shard: what it took, and what it has yet to take."""

    handled: str | None  # the checkpoint: the last record it took without failing
    queued: str | None  # the last record put in `pending`
    pending: list[Record] = field(default_factory=list)
    retry_at: float = 0.0
    delay_s: float = 0.0
    failing: bool = False  # its last hand-over failed: its records wait for a retry
    waiting_since: float = 0.0  # when its oldest pending record was queued

    def take(self, records: list[Record]) -> None:
        """Queue the records (Lambda's shape) it has not had yet, in order."""
        after = int(self.queued) if self.queued is not None else -1
        fresh = [r for r in records if int(sequence_number(r)) > after]
        if fresh:
            if not self.pending:
                self.waiting_since = time.monotonic()
            self.pending.extend(fresh)
            self.queued = sequence_number(fresh[-1])

    def hand_over(self, binding: StreamBinding, now: float, flush: bool, region: str,
                  backoff_s: tuple[float, float]) -> int:
        """Give the handler its pending records in batches; keep what it fails on, for a
        retry after a backoff that doubles within `backoff_s` (least, most). `flush`: hand
        over records still inside the binding's batching window."""
        if now < self.retry_at:
            return 0
        if (binding.window_s and not flush and len(self.pending) < binding.batch_size
                and now < self.waiting_since + binding.window_s):
            return 0  # as Lambda: wait for a full batch, or the window's end
        handled = 0
        pending = self.pending
        while pending:
            batch = pending[:binding.batch_size]
            try:
                binding.handler({"Records": batch}, LambdaContext())
            except RegionDownError as exc:
                logger.debug("stream records of %s wait: %s", region, exc)
                self.failing = False  # it waits for its region, not for a retry
                break  # no backoff: the region's health is known in process
            except Exception:
                self.failing = True
                self.delay_s = min(max(self.delay_s * 2, backoff_s[0]), backoff_s[1])
                self.retry_at = now + self.delay_s
                logger.exception("stream handler %s failed; its batch is retried in %.1f s",
                                 getattr(binding.handler, "__name__", binding.table),
                                 self.delay_s)
                break
            del pending[:len(batch)]
            handled += len(batch)
            self.handled = sequence_number(batch[-1])
            self.delay_s = 0.0
            self.failing = False
        return handled


@dataclass
class Shard:
    """A shard being read, and its handlers' views of it."""

    reader: ShardReader
    consumers: dict[int, Consumer]


@dataclass
class Stream:
    """A bound table's stream: its shards, in the order they are read."""

    arn: str
    saved: dict[str, ShardCheckpoint]
    refresh_at: float = 0.0
    order: list[ShardInfo] = field(default_factory=list)
    shards: dict[str, Shard] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # shards read to their end


def resume_point(shard: Shard) -> str | None:
    """The lowest checkpoint of the shard's handlers; None if one has none (horizon)."""
    handled = [c.handled for c in shard.consumers.values()]
    if not handled or any(h is None for h in handled):
        return None
    return min((h for h in handled if h is not None), key=int)


def handler_names(bindings: list[StreamBinding]) -> list[str]:
    """A name per binding, stable across restarts and unique within its table."""
    names: list[str] = []
    for binding in bindings:
        name = str(getattr(binding.handler, "__name__", "handler"))
        taken = sum(1 for b, n in zip(bindings, names, strict=False)
                    if b.table == binding.table and n.split("#")[0] == name)
        names.append(f"{name}#{taken}" if taken else name)
    return names
