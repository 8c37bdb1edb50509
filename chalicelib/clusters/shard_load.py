"""How busy each queue shard is: messages in and out per second, kept from the stream.

The stream handler that keeps a shard's count (`chalicelib.backend.counters`) adds, in
the same UpdateItem, the messages each batch brought in and took out, to slots of
`SLOT_MS` by the handler's clock: `i<slot>` and `o<slot>` on the shard's count item.
The shard autoscaler reads them: every front end's sends and deletes reach the one
stream, so every Lambda instance and every local server see the same load, at no
request-path cost. Slots older than `KEPT_SLOTS` are removed by the next write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.clusters.autoscale_rules import WINDOW_MAX_MS

SLOT_MS = 5_000
# The longest rate window the autoscaler reads, and the slot still filling: 14 slots of
# each kind, about 350 bytes on the count item.
KEPT_SLOTS = WINDOW_MAX_MS // SLOT_MS + 2
IN, OUT = "i", "o"
SETTLE_MS = 2_000


def slot_name(kind: str, now_ms: int) -> str:
    """The attribute of the slot holding `now_ms`."""
    return f"{kind}{now_ms // SLOT_MS}"


def slot_of(name: str) -> int | None:
    """The slot number of a load attribute's name; None for any other attribute."""
    if len(name) > 1 and name[0] in (IN, OUT) and name[1:].isdigit():
        return int(name[1:])
    return None


def stale_slots(names: Iterable[str], now_ms: int) -> list[str]:
    """The load slots among `names` that no rate window reads any more."""
    oldest = now_ms // SLOT_MS - KEPT_SLOTS
    return sorted(n for n in names if (slot := slot_of(n)) is not None and slot < oldest)


def slot_terms(inserted: int, removed: int, now_ms: int) -> dict[str, int]:
    """The ADD terms of one batch's load."""
    terms = {slot_name(IN, now_ms): inserted, slot_name(OUT, now_ms): removed}
    return {name: n for name, n in terms.items() if n}


@dataclass(frozen=True)
class ShardLoad:
    """Messages per second into and out of a shard over a window, and slot by slot
    (`slots`: (in, out) per second of each, oldest first, from slot `first_slot`)."""

    in_per_s: float = 0.0
    out_per_s: float = 0.0
    slots: tuple[tuple[float, float], ...] = ()
    first_slot: int = 0

    @property
    def busiest(self) -> float:
        """The larger of the two rates: a shard is loaded by its sends or its deletes."""
        return max(self.in_per_s, self.out_per_s)

    def __add__(self, other: ShardLoad) -> ShardLoad:
        slots = self.slots or other.slots
        if self.slots and other.slots:
            slots = tuple((a[0] + b[0], a[1] + b[1])
                          for a, b in zip(self.slots, other.slots, strict=True))
        return ShardLoad(self.in_per_s + other.in_per_s, self.out_per_s + other.out_per_s,
                         slots, self.first_slot or other.first_slot)

    def quiet_since_ms(self, threshold: float) -> int | None:
        """When the trailing run of slots whose busier rate is under `threshold` began
        (None when the newest slot is not under it)."""
        return self._trailing(lambda rate: rate < threshold)

    def busy_since_ms(self, threshold: float) -> int | None:
        """When the trailing run of slots whose busier rate is over `threshold` began
        (None when the newest slot is not over it)."""
        return self._trailing(lambda rate: rate > threshold)

    def _trailing(self, holds: Callable[[float], bool]) -> int | None:
        start = None
        for offset in range(len(self.slots) - 1, -1, -1):
            if not holds(max(self.slots[offset])):
                break
            start = (self.first_slot + offset) * SLOT_MS
        return start


def window_start(now_ms: int, window_ms: int) -> int:
    """When the window `load_of` reads at `now_ms` began (epoch ms)."""
    first, _ = _window(now_ms, window_ms)
    return first * SLOT_MS


def _window(now_ms: int, window_ms: int) -> tuple[int, int]:
    """The slots read: the last whole ones within `window_ms`, of those that ended
    SETTLE_MS ago or more (the handler may still be counting a slot's last records for
    that long: its batching window, and the pump's pace locally). [first, end)"""
    end = (now_ms - SETTLE_MS) // SLOT_MS
    return end - max(1, window_ms // SLOT_MS), end


def load_of(item: Mapping[str, Any] | None, now_ms: int, window_ms: int) -> ShardLoad:
    """The rates of a count item over the window `_window` reads."""
    first, current = _window(now_ms, window_ms)
    per_slot = {IN: [0] * (current - first), OUT: [0] * (current - first)}
    for name, value in (item or {}).items():
        slot = slot_of(name)
        if slot is not None and first <= slot < current:
            per_slot[name[0]][slot - first] += int(value["N"])
    seconds = (current - first) * SLOT_MS / 1000
    slot_s = SLOT_MS / 1000
    return ShardLoad(sum(per_slot[IN]) / seconds, sum(per_slot[OUT]) / seconds,
                     tuple((i / slot_s, o / slot_s)
                           for i, o in zip(per_slot[IN], per_slot[OUT], strict=True)), first)
