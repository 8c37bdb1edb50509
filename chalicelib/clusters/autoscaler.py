"""The shard autoscaler: each check reads the load of the queues that may need it (more
than one shard, or traffic lately) and splits or merges their shards.

It runs where the cluster manager runs: on the local server's timer every
`DMQ_AUTOSCALE_INTERVAL_S`, and on AWS as a scheduled handler (every minute, the least
a schedule allows). The rules are `chalicelib.clusters.autoscale_rules`; the load is what the
stream handler keeps per shard (`chalicelib.clusters.shard_load`); the state between
checks lives in the control table (`chalicelib.clusters.autoscale_states`).

A split or a merge is the same shard change an admin makes (`QueueService.set_shard_count`):
a standard queue's new shards take sends at once, and merged-away shards drain (receives
keep reading them) before they are forgotten. A FIFO queue's shards split and merge
ranges of the group hash: the new shards take sends from a switch a moment ahead, and
deliver once the old ones are drained, so every group keeps its order
(`chalicelib.fifo.ranges`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.clock import Clock
from chalicelib.clusters.autoscale_rules import ScalePolicy, decide, next_due_ms
from chalicelib.clusters.autoscale_states import AutoscaleStates
from chalicelib.clusters.shard_load import ShardLoad, window_start
from chalicelib.clusters.stores import ActiveShards, ClusterStores
from chalicelib.domain.queues import QueueRecord
from chalicelib.service.exceptions import SqsError
from chalicelib.service.queues import QueueService

logger = logging.getLogger("dmq.autoscale")


@dataclass(frozen=True)
class ScaleEvent:
    """One split or merge."""

    queue: QueueRecord
    kind: str  # "split" or "merge"
    before: int
    after: int
    rate: float  # messages per second, the busier way


class Autoscaler:
    """Checks every standard queue homed in a region, and scales those that need it."""

    def __init__(self, queues: QueueService, stores: ClusterStores, states: AutoscaleStates,
                 policy: ScalePolicy, clock: Clock,
                 on_event: Callable[[ScaleEvent], None] | None = None) -> None:
        self._queues = queues
        self._stores = stores
        self._states = states
        self.policy = policy
        self._clock = clock
        self._on_event = on_event
        # When the last check saw a merge falling due (epoch ms): the local timer checks
        # again then, so a quiet queue merges on time, not at the next interval's tick.
        self.next_due_ms: int | None = None

    def check(self, region: str) -> list[ScaleEvent]:
        """One pass: the splits and merges it made. It checks the queues with more than
        one shard and those with an active shard (`active_queues`), not every queue: its
        reads are the catalogue of queues (one GetItem while no queue changed), the
        active shards (one BatchGetItem per cluster), and for the queues it checks one
        BatchGetItem of their states and one of their loads (per hundred of each)."""
        self.next_due_ms = None
        if not self.policy.enabled:
            return []
        moving = self.active_queues()
        queues = [q for q in self._queues.all_queues() if q.home == region
                  and (moving is None or len(q.shards) > 1 or q.queue_id in moving)]
        if not queues:
            return []
        states = self._states.get_many([q.queue_id for q in queues])
        now = self._clock.now_ms()
        loads = self.loads(queues, now)
        events = []
        due: list[int] = []
        for queue in queues:
            state, load = states[queue.queue_id], loads[queue.queue_id]
            low = self.policy.target_rate * self.policy.low_fraction * queue.shard_count
            high = self.policy.target_rate * queue.shard_count
            decision = decide(self.policy, queue.shard_count, load.busiest, state, now,
                              window_start(now, self.policy.window_ms), load.quiet_since_ms(low),
                              load.busy_since_ms(high))
            active = queue.shard_count
            if decision.shards != queue.shard_count:
                event = self._scale(queue, decision.shards, load.busiest)
                if event is not None:
                    events.append(event)
                    active = event.after
            if decision.state != state:
                self._states.put(queue.queue_id, decision.state)
            queue_due = next_due_ms(self.policy, active, decision.state)
            if queue_due is not None:
                due.append(queue_due)
        self.next_due_ms = min(due, default=None)
        return events

    def active_queues(self) -> set[str] | None:
        """The queues with an active shard (holding messages, or written in the last few
        minutes: `ShardCounters.active`), one read per cluster; None when a cluster's
        store cannot tell (every queue is checked then). A queue with one shard and no
        traffic has nothing to split or merge, so a check passes it by."""
        found: set[str] = set()
        for _, store in self._stores.items():
            if not isinstance(store, ActiveShards):
                return None
            found |= {queue_id for queue_id, _ in store.active_shards()}
        return found

    def loads(self, queues: list[QueueRecord], now_ms: int) -> dict[str, ShardLoad]:
        """Each queue's load over the policy's window (draining shards included: their
        deletes are load too), read cluster by cluster for all the queues at once."""
        by_cluster: dict[str, list[tuple[str, int]]] = {}
        for queue in queues:
            for shard in queue.shards:
                by_cluster.setdefault(shard.cluster, []).append((queue.queue_id, shard.id))
        totals = {q.queue_id: ShardLoad() for q in queues}
        for cluster, pairs in by_cluster.items():
            loads = self._stores.of(cluster).loads(pairs, now_ms, self.policy.window_ms)
            for (queue_id, _), load in loads.items():
                totals[queue_id] = totals[queue_id] + load
        return totals

    def pin(self, queue: QueueRecord, pinned: bool) -> None:
        """An admin set the shard count (pinned), or handed it back."""
        self._states.pin(queue.queue_id, pinned)

    def pinned(self, queue: QueueRecord) -> bool:
        """Whether an admin pinned the queue's shard count."""
        return self._states.get(queue.queue_id).pinned

    def mode(self, queue: QueueRecord) -> str:
        """How the queue's shard count is set: 'auto', 'pinned', or 'off' (autoscaling is
        turned off)."""
        if not self.policy.enabled:
            return "off"
        return "pinned" if self.pinned(queue) else "auto"

    def _scale(self, queue: QueueRecord, shards: int, rate: float) -> ScaleEvent | None:
        """Resize the queue; the event, or None when its shards could not go that way (a
        FIFO queue created with an odd count merges its original shards only all at once)."""
        kind = "split" if shards > queue.shard_count else "merge"
        try:
            updated = self._queues.set_shard_count(queue, shards)
        except SqsError as error:  # e.g. a FIFO queue whose old shards still drain
            logger.info("autoscale %s %s waits: %s", kind, queue.queue_id, error)
            return None
        if updated.shard_count == queue.shard_count:
            return None
        event = ScaleEvent(updated, kind, queue.shard_count, updated.shard_count, rate)
        logger.info("autoscale %s %s: %d -> %d shards at %.1f messages/s (target %.1f per "
                    "shard)", kind, queue.queue_id, queue.shard_count, updated.shard_count,
                    rate, self.policy.target_rate)
        if self._on_event is not None:
            self._on_event(event)
        return event
