"""The internal cluster manager's region work: heartbeats, promotion and rejoining.

Each region writes a heartbeat into every reachable region's control table. A replica
region whose copy of a queue's home heartbeat is older than the failover time promotes
itself by a conditional (versioned) write of the queue record: of two managers racing,
exactly one wins. Only the first live replica in the queue's list tries. The promoted
record then replicates to the other regions like any metadata change.

An old home that comes back finds, in a peer's copy, a record with a higher epoch: it
adopts it (and so forwards the queue's requests to the new home from then on), and on a
later pass, once the new home's stream backlog has reached it, it replaces its copy of
the queue's messages with the new home's, after writing to the new home any message the
new home never received. It never takes the queue back by itself.

The rules, together:
- Only a strictly newer epoch wins: a region adopts a peer's record only when its epoch
  is higher than its own copy's; equal epochs change nothing.
- A heartbeat is evidence only while this region watched: a region that was away (marked
  down, or its own control table or queue scan failed) missed what peers wrote into its
  table meanwhile, so its copies of their heartbeats are stale. Its watch starts again
  on the first pass after it is back, and it promotes nothing until it has watched for
  the failover time.
- A returning old home is therefore a replica like any other: it takes a queue back only
  if the new home then stays silent for the failover time and it is the first live
  replica.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from chalicelib.backend.items import partition_key
from chalicelib.clock import Clock
from chalicelib.domain.exceptions import ConcurrentChangeError, StoreError
from chalicelib.domain.queues import QueueRecord, QueueStatus
from chalicelib.regions.backends import BackendOf
from chalicelib.regions.reachability import RegionHealth
from chalicelib.regions.resync import resync_partition
from chalicelib.settings import Settings

logger = logging.getLogger("dmq.failover")
RESYNC_SETTLE_MS = 2_000


@dataclass
class TickReport:
    """What one manager pass in a region did."""

    promoted: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    resynced: list[str] = field(default_factory=list)
    recovered: int = 0


class FailoverManager:
    """Heartbeats, promotion and rejoining for one region."""

    def __init__(
        self, region: str, settings: Settings, backend_of: BackendOf, health: RegionHealth,
        clock: Clock,
    ) -> None:
        self.region = region
        self._settings = settings
        self._backend_of = backend_of
        self._health = health
        self._clock = clock
        self._adopted_at: dict[str, int] = {}
        self._up_since: int | None = None  # when this region's current watch began
        self._returns_seen = health.returns(region)
        # Passes can overlap (a scheduled pass that outlasts its interval, or one started
        # by hand): they run one at a time, so two never resync or forget the same queue.
        self._passing = threading.Lock()

    @property
    def _after_ms(self) -> int:
        return int(self._settings.failover_after_s * 1000)

    def tick(self) -> TickReport:
        """One scheduled pass: beat, then promote or rejoin where needed."""
        with self._passing:
            return self._tick()

    def _tick(self) -> TickReport:
        report = TickReport()
        returns = self._health.returns(self.region)
        if not self._health.up(self.region) or returns != self._returns_seen:
            # Away since the last pass, however briefly: the watch starts again.
            self._returns_seen = returns
            self._up_since = None
        if not self._health.up(self.region):
            return report
        if self._up_since is None:
            self._up_since = self._clock.now_ms()
        try:
            self._manage(report)
        except StoreError:
            self._up_since = None  # blind meanwhile: peers' heartbeats may not have landed
            raise
        return report

    def _manage(self, report: TickReport) -> None:
        if not self.heartbeat():
            self._up_since = self._clock.now_ms()
        for queue in self._backend_of(self.region).repo.scan_active():
            if queue.home == self.region:
                self._check_rejoin(queue, report)
            elif (self.region in queue.replicas and self._home_silent(queue)
                  and self.promote(queue)):
                report.promoted.append(queue.queue_id)
        resynced = self.resync_due()
        report.resynced, report.recovered = resynced.resynced, resynced.recovered

    def heartbeat(self) -> bool:
        """Write this region's heartbeat into every reachable region's control table;
        False when its own table could not be written."""
        now = self._clock.now_ms()
        own = True
        for region in self._settings.all_regions:
            if self._health.up(region):
                try:
                    self._backend_of(region).control.beat(self.region, now)
                except StoreError:
                    own = own and region != self.region
                    logger.warning("heartbeat of %s could not reach %s", self.region, region)
        return own

    def _silent(self, region: str) -> bool:
        last = self._backend_of(self.region).control.last_beat(region)
        return last is None or self._clock.now_ms() - last >= self._after_ms

    def _home_silent(self, queue: QueueRecord) -> bool:
        """The home missed its heartbeats for the failover time, as watched by this region
        for at least that long (a region just back may hold stale heartbeats of others),
        and this region is the first live replica."""
        watched = self._up_since is not None and (
            self._clock.now_ms() - self._up_since >= self._after_ms)
        if not watched or not self._silent(queue.home):
            return False
        live = [r for r in queue.replicas if r == self.region or not self._silent(r)]
        return bool(live) and live[0] == self.region

    def promote(self, queue: QueueRecord) -> bool:
        """Make this region the queue's home; False when another manager won the race."""
        repo = self._backend_of(self.region).repo
        promoted = queue.with_changes(
            home_region=self.region,
            replicas=(*(r for r in queue.replicas if r != self.region), queue.home),
            epoch=queue.epoch + 1,
        )
        try:
            repo.save(promoted)
        except ConcurrentChangeError:
            return False
        logger.warning("promoted %s: home %s -> %s (epoch %d)", queue.queue_id, queue.home,
                       self.region, promoted.epoch)
        return True

    def _newer_elsewhere(self, queue: QueueRecord) -> QueueRecord | None:
        newest: QueueRecord | None = None
        for region in queue.replicas:
            if not self._health.up(region):
                continue
            try:
                peer = self._backend_of(region).repo.get(queue.queue_id, fresh=True)
            except StoreError:
                continue
            if peer is not None and peer.epoch > queue.epoch and (
                    newest is None or peer.epoch > newest.epoch):
                newest = peer
        return newest

    def _check_rejoin(self, queue: QueueRecord, report: TickReport) -> None:
        if queue.replicas:
            newer = self._newer_elsewhere(queue)
            if newer is not None and newer.status is QueueStatus.ACTIVE:
                self._backend_of(self.region).repo.adopt(newer)
                self._adopted_at[queue.queue_id] = self._clock.now_ms()
                report.adopted.append(queue.queue_id)

    def resync_due(self) -> TickReport:
        """Resync queues adopted at least RESYNC_SETTLE_MS ago (their backlog has arrived)."""
        report = TickReport()
        now = self._clock.now_ms()
        for queue_id, adopted in list(self._adopted_at.items()):
            if now - adopted < RESYNC_SETTLE_MS:
                continue
            queue = self._backend_of(self.region).repo.get(queue_id, fresh=True)
            if queue is not None and queue.home != self.region:
                try:
                    report.recovered += self.resync(queue)
                except StoreError as exc:  # stays pending: the next tick runs it again
                    logger.warning("resync of %s did not finish: %s", queue_id, exc)
                    continue
                report.resynced.append(queue_id)
            self._adopted_at.pop(queue_id, None)
        return report

    def resync(self, queue: QueueRecord) -> int:
        """Replace this region's copy of the queue's messages with the home's; return how
        many messages only this region held (they were written to the home first)."""
        home = self._backend_of(queue.home)
        local = self._backend_of(self.region)
        recovered = 0
        for shard in queue.shards:
            table = self._settings.cluster_table(shard.cluster)
            result = resync_partition(home.clients.cluster_dynamodb(shard.cluster),
                                      local.clients.cluster_dynamodb(shard.cluster), table,
                                      partition_key(queue.queue_id, shard.id))
            recovered += result.recovered
        if recovered:
            logger.warning("rejoin of %s recovered %d messages into %s", queue.queue_id,
                           recovered, queue.home)
        return recovered

    def pending_resyncs(self) -> Sequence[str]:
        """Queues adopted and waiting for their resync."""
        return list(self._adopted_at)
