"""Fair queues: on a standard queue, MessageGroupId names a tenant, and a noisy tenant's
backlog waits behind the other tenants' messages.

Each front-end process watches the tenants of the queues it sends to: a decayed count
of each tenant's recent sends (a half-life of `HALF_LIFE_MS`). A tenant is *noisy* when
it sends a disproportionate share of a queue's messages: more than `NOISY_SHARE` of
them, more than `FAIR_FACTOR` times an even share among the queue's active tenants,
and at least `NOISY_MIN` messages within about a half-life. A queue needs at least two
active tenants for one of them to be noisy (a lone tenant delays nobody). Messages
without a MessageGroupId each count as a tenant of their own, so they are never noisy.

A noisy tenant's new messages go to the noisy lane of their shard (see
`chalicelib.domain.lanes`); a receive serves the main lane first and the noisy lane
with what is left of its batch. That is work-conserving (when only the noisy lane holds
messages, receives drain it at full speed) and costs no read that grows with the
backlog: the noisy lane is one more bounded query, made only by a receive that the main
lane left short, and only on a queue that this process has seen tenants in (or, at
most every `LANE_PROBE_MS`, to find a lane another process filled).

A tenant stays noisy for `STICKY_MS` after it last qualified, so that its messages do
not alternate between lanes while its share hovers at the threshold. Each process
judges on the sends it serves; with front ends that share the load evenly, every
process sees about the same shares, so the judgement holds approximately across them.

`DMQ_FAIR_QUEUES=off` turns the noisy lane off for new messages (receives still drain
what it holds); MessageGroupId is accepted and returned either way.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from chalicelib import observability
from chalicelib.domain.lanes import in_noisy_lane, lane_slot, to_noisy_lane
from chalicelib.domain.messages import Message
from chalicelib.service.exceptions import InvalidParameterValueError

HALF_LIFE_MS = 3_000
NOISY_SHARE = 0.10
FAIR_FACTOR = 1.5
NOISY_MIN = 10.0
STICKY_MS = 10_000
# A tenant that sent nothing for this long is forgotten (SQS: 5 minutes of silence).
TENANT_MEMORY_MS = 300_000
LANE_PROBE_MS = 30_000
MAX_TENANTS = 1_000
# Below this decayed weight a tenant no longer counts as active.
ACTIVE_WEIGHT = 1.0
_GROUP_ID = re.compile(r"^[!-~]{1,128}\Z")


def check_group_id(value: str | None) -> None:
    """1 to 128 alphanumeric or punctuation characters, as SQS requires of MessageGroupId."""
    if value is not None and not _GROUP_ID.match(value):
        raise InvalidParameterValueError(
            f"Value {value} for parameter MessageGroupId is invalid. Reason: MessageGroupId "
            "can only include alphanumeric and punctuation characters. 1 to 128 in length."
        )


@dataclass
class _Decayed:
    """A count that halves every HALF_LIFE_MS."""

    weight: float = 0.0
    at_ms: int = 0

    def value(self, now_ms: int) -> float:
        elapsed = max(0, now_ms - self.at_ms)
        return self.weight * 0.5 ** (elapsed / HALF_LIFE_MS)

    def add(self, amount: float, now_ms: int) -> None:
        self.weight = self.value(now_ms) + amount
        self.at_ms = max(self.at_ms, now_ms)


@dataclass
class _Tenants:
    """What one process knows of one queue's tenants."""

    sends: dict[str, _Decayed] = field(default_factory=dict)
    total: _Decayed = field(default_factory=_Decayed)
    ungrouped: _Decayed = field(default_factory=_Decayed)
    noisy_until: dict[str, int] = field(default_factory=dict)
    seen_ms: int = 0  # the last time a message with a group id was sent or received


class Fairness:
    """Tenant shares of the queues this process serves, and the lane each send goes to."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._queues: dict[str, _Tenants] = {}
        self._probed: dict[str, int] = {}
        self._lock = threading.Lock()

    def place(self, queue_id: str, groups: Sequence[str | None], now_ms: int) -> list[bool]:
        """Record sends of these tenants (None: no group id); True where the message goes to
        the noisy lane."""
        with self._lock:
            tenants = self._queues.setdefault(queue_id, _Tenants())
            for group in groups:
                tenants.total.add(1.0, now_ms)
                if group is None:
                    tenants.ungrouped.add(1.0, now_ms)
                    continue
                tenants.seen_ms = now_ms
                tenants.sends.setdefault(group, _Decayed()).add(1.0, now_ms)
            self._forget(tenants, now_ms)
            if not self.enabled:
                return [False] * len(groups)
            verdict: dict[str, bool] = {}
            return [group is not None and verdict.setdefault(
                group, self._noisy(tenants, group, now_ms)) for group in groups]

    def steer(
        self, queue_id: str, placed: Sequence[tuple[int, Message]], now_ms: int
    ) -> list[tuple[int, Message]]:
        """The messages as they are to be stored: a noisy tenant's go to the noisy lane.

        FIFO queues (their names end in `.fifo`) keep their own group rules: never steered.
        """
        if queue_id.endswith(".fifo"):
            return list(placed)
        noisy = self.place(queue_id, [m.group_id for _, m in placed], now_ms)
        if any(noisy):
            observability.add_count("NoisyLaneMessages", sum(noisy))
        return [
            (shard, m.with_changes(visible_at=to_noisy_lane(m.visible_at)) if to_lane else m)
            for (shard, m), to_lane in zip(placed, noisy, strict=True)
        ]

    def saw_received(self, queue_id: str, groups: Sequence[str | None], now_ms: int) -> None:
        """A receive here returned messages of these tenants: the queue has tenants."""
        if any(g is not None for g in groups):
            with self._lock:
                self._queues.setdefault(queue_id, _Tenants()).seen_ms = now_ms

    def reads_lanes(self, queue_id: str, now_ms: int) -> bool:
        """Whether a short receive should read the noisy lanes too.

        Yes on a queue this process has seen tenants in lately; otherwise once every
        LANE_PROBE_MS (the first time LANE_PROBE_MS after this process first asked), to
        find a lane that another process filled.
        """
        with self._lock:
            tenants = self._queues.get(queue_id)
            if tenants is not None and now_ms - tenants.seen_ms < TENANT_MEMORY_MS:
                return True
            if now_ms - self._probed.setdefault(queue_id, now_ms) >= LANE_PROBE_MS:
                self._probed[queue_id] = now_ms
                return True
            return False

    def noisy_groups(self, queue_id: str, now_ms: int) -> list[str]:
        """The tenants this process judges noisy right now."""
        with self._lock:
            tenants = self._queues.get(queue_id)
            if tenants is None:
                return []
            return sorted(g for g, until in tenants.noisy_until.items() if until > now_ms)

    def _noisy(self, tenants: _Tenants, group: str, now_ms: int) -> bool:
        total = tenants.total.value(now_ms)
        weight = tenants.sends[group].value(now_ms)
        active = sum(1 for d in tenants.sends.values() if d.value(now_ms) >= ACTIVE_WEIGHT)
        if tenants.ungrouped.value(now_ms) >= ACTIVE_WEIGHT:
            active += 1
        share = weight / total if total > 0 else 0.0
        if (active >= 2 and weight >= NOISY_MIN
                and share > max(NOISY_SHARE, FAIR_FACTOR / active)):
            tenants.noisy_until[group] = now_ms + STICKY_MS
            return True
        return tenants.noisy_until.get(group, 0) > now_ms

    def _forget(self, tenants: _Tenants, now_ms: int) -> None:
        """Drop silent tenants, and the smallest ones past MAX_TENANTS."""
        silent = [g for g, d in tenants.sends.items() if now_ms - d.at_ms >= TENANT_MEMORY_MS]
        for group in silent:
            del tenants.sends[group]
            tenants.noisy_until.pop(group, None)
        if len(tenants.sends) > MAX_TENANTS:
            ranked = sorted(tenants.sends, key=lambda g: tenants.sends[g].value(now_ms))
            for group in ranked[: len(tenants.sends) - MAX_TENANTS]:
                del tenants.sends[group]
                tenants.noisy_until.pop(group, None)


def slot_of(shard: int, message: Message) -> int:
    """The bookkeeping key of the lane a stored message waits in."""
    return lane_slot(shard) if in_noisy_lane(message.visible_at) else shard
