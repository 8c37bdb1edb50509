"""How many messages are in flight or delayed, kept per minute from the messages stream.

A message is hidden (in flight once received, delayed before that) while its
`visible_at` is in the future; it turns visible again when that time passes, with no
write and so with no stream record. The count of hidden messages therefore cannot be a
plain counter. It is kept as *minute buckets* on the shard's count item:

- `f<minute>`: messages in flight whose `visible_at` falls in that minute (epoch minutes);
- `d<minute>`: messages not yet received (delayed) whose `visible_at` falls in it.

Each stream record moves its item out of the bucket of its old image and into the bucket
of its new one (a FIFO group item weighs what it holds in flight, or one delayed
message). At a time `now`, the hidden messages are the buckets after `now`'s minute,
plus those of the rest of `now`'s own minute, which a count reads from the visibility
index: at most one minute of the shard's messages, whatever its backlog.

Buckets before the handler's previous minute are never read again, so changes to them
are dropped and the buckets themselves removed (`stale`). The item holds at most one
bucket of each kind for each minute of the longest visibility timeout (12 h) and delay.

Each bucket of the current minute says only that *some* message weighs in it: every
message sent in that minute does, although it turns visible the moment it is sent. So
that a count does not read the index for nothing, the handler also keeps *second hints*:

- `s<minute>`: a number set of the seconds of that minute at which an image the handler
  saw was still hidden (its `visible_at` after the handler's clock) turns visible. An
  image hidden beyond the next minute adds only the minute's last second, so a set holds
  at most 60 numbers for the two nearest minutes and one for every later one.

A hint is only ever added to (a message turning visible earlier leaves its second), so
it can send a count to the index for nothing, never keep it away from a hidden message:
a message hidden at a count's time `now` was hidden when its record was counted, so its
second, at or after `now`'s, is in the set. Hints are whole from when the handler first
kept them on the shard (`ssince`): at once for a shard whose buckets began with them,
`HORIZON_MS` later for one whose buckets an earlier version began.

Tracking starts when a handler of this version first counts a shard (`hsince`). A shard
first counted by it (`hnew`, and no counts of the request-path versions) is whole from the
start; a shard counted before may hold hidden messages no bucket knows, so its counts read
the whole hidden range of the index until `HORIZON_MS` after `hsince`, when every such
message has turned visible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.domain.lanes import LANE_BASE
from chalicelib.fifo import rules as fifo
from chalicelib.regions.replica import is_tombstone

BUCKET_MS = 60_000
# The longest visibility timeout (12 h) and delay (15 min), and two minutes of clock skew.
HORIZON_MS = (12 * 3600 + 15 * 60 + 2 * 60) * 1000
KEPT_MINUTES = 1  # changes to buckets older than the handler's previous minute are dropped
IN_FLIGHT, DELAYED = "f", "d"
HINT = "s"  # second hints: s<minute>, a number set of seconds (0 to 59)
LAST_SECOND = BUCKET_MS // 1000 - 1
_NOT_HIDDEN = (fifo.MESSAGE_PREFIX, fifo.DEDUP_PREFIX, fifo.SEQUENCE_KEY)


def bucket(kind: str, visible_at: int) -> str:
    """The attribute name of the bucket holding `visible_at`."""
    return f"{kind}{visible_at // BUCKET_MS}"


def minute_of(name: str) -> int | None:
    """The minute of a bucket's attribute name; None for any other attribute."""
    if len(name) > 1 and name[0] in (IN_FLIGHT, DELAYED) and name[1:].isdigit():
        return int(name[1:])
    return None


def hidden_of(image: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """The bucket an item image weighs in and its weight; None if it is not a message or
    a FIFO group item with a place in the main lane of the visibility index."""
    if not image or is_tombstone(image) or "visible_at" not in image or "sk" not in image:
        return None
    sk = str(image["sk"].get("S", ""))
    visible_at = int(image["visible_at"]["N"])
    if sk.startswith(_NOT_HIDDEN) or visible_at >= LANE_BASE:
        return None  # bookkeeping, or a fair queue's noisy lane (which waits visible)
    held = int(image.get("rc", {}).get("N", "0"))
    if held <= 0:
        return bucket(DELAYED, visible_at), 1
    weight = held if sk.startswith(fifo.GROUP_PREFIX) else 1
    return bucket(IN_FLIGHT, visible_at), weight


def hint_of(name: str) -> int | None:
    """The minute of a second hint's attribute name; None for any other attribute."""
    if len(name) > 1 and name[0] == HINT and name[1:].isdigit():
        return int(name[1:])
    return None


def attribute_minute(name: str) -> int | None:
    """The minute of a bucket's or a second hint's attribute name; None for any other."""
    minute = minute_of(name)
    return minute if minute is not None else hint_of(name)


def hidden_seconds(new: Mapping[str, Any] | None, now_ms: int) -> dict[str, frozenset[int]]:
    """The second hint a record's new image adds at `now_ms`: its `visible_at`'s second
    when it is still hidden then (the minute's last second when that is past the next
    minute); nothing for an image that is visible already or weighs in no bucket."""
    if hidden_of(new) is None:
        return {}
    assert new is not None  # hidden_of says so
    visible_at = int(new["visible_at"]["N"])
    if visible_at <= now_ms:
        return {}
    minute = visible_at // BUCKET_MS
    near = minute <= now_ms // BUCKET_MS + 1
    second = (visible_at % BUCKET_MS) // 1000 if near else LAST_SECOND
    return {f"{HINT}{minute}": frozenset({second})}


def bucket_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None,
                   ) -> dict[str, int]:
    """What one record changes in the buckets (nothing when the bucket stays the same)."""
    changes: dict[str, int] = {}
    for place, sign in ((hidden_of(old), -1), (hidden_of(new), 1)):
        if place is not None:
            changes[place[0]] = changes.get(place[0], 0) + sign * place[1]
    return {name: n for name, n in changes.items() if n}


def kept(changes: Mapping[str, int], now_ms: int) -> dict[str, int]:
    """The changes to buckets a count can still read (from the previous minute on)."""
    oldest = now_ms // BUCKET_MS - KEPT_MINUTES
    return {name: n for name, n in changes.items() if n and (minute_of(name) or 0) >= oldest}


def stale(names: Iterable[str], now_ms: int) -> list[str]:
    """The buckets and second hints among `names` that no count reads any more."""
    oldest = now_ms // BUCKET_MS - KEPT_MINUTES
    return sorted(n for n in names
                  if (minute := attribute_minute(n)) is not None and minute < oldest)


@dataclass(frozen=True)
class ShardCount:
    """A shard's count item as read: its messages, its buckets, and from when they are
    whole (None: not yet known to be); its second hints, and from when those are."""

    total: int
    buckets: Mapping[str, int]
    whole_from: int | None
    hints: Mapping[int, frozenset[int]] = field(default_factory=dict)  # minute: seconds
    hints_from: int | None = None

    @classmethod
    def of(cls, item: Mapping[str, Any] | None, total: int, legacy: bool) -> ShardCount:
        """From the stream-kept count item (None: no record of the shard was counted yet)
        and the shard's total; `legacy`: request-path versions counted the shard too."""
        if item is None:
            return cls(total, {}, None if legacy else 0)
        buckets = {name: int(value["N"]) for name, value in item.items()
                   if minute_of(name) is not None}
        if "hsince" not in item:
            return cls(total, buckets, None)
        since = int(item["hsince"]["N"])
        whole_from = 0 if "hnew" in item and not legacy else since + HORIZON_MS
        if "ssince" not in item:
            return cls(total, buckets, whole_from)
        hints = {minute: frozenset(int(n) for n in value.get("NS", ()))
                 for name, value in item.items() if (minute := hint_of(name)) is not None}
        hinted = int(item["ssince"]["N"])
        hints_from = whole_from if hinted <= since else max(whole_from, hinted + HORIZON_MS)
        return cls(total, buckets, whole_from, hints, hints_from)

    def hides_later_this_minute(self, now_ms: int) -> bool:
        """Whether some message may be hidden after `now` and turn visible before its
        minute ends (so a count must read the index for the rest of the minute): its
        buckets are not whole, or a bucket of the minute holds messages and, where the
        second hints are whole, one of them is at or after `now`'s second."""
        if self.whole_from is None or now_ms < self.whole_from:
            return True
        minute = now_ms // BUCKET_MS
        if not any(self.buckets.get(f"{kind}{minute}", 0) > 0 for kind in (IN_FLIGHT, DELAYED)):
            return False
        if self.hints_from is None or now_ms < self.hints_from:
            return True
        second = (now_ms % BUCKET_MS) // 1000
        return any(s >= second for s in self.hints.get(minute, ()))

    def hidden(self, now_ms: int) -> tuple[int, int, int]:
        """(in flight, delayed) held by the buckets after `now`'s minute, and where the
        index must be read up to (exclusive) for the rest: the end of `now`'s minute, or
        the whole main lane while the buckets are not whole."""
        if self.whole_from is None or now_ms < self.whole_from:
            return 0, 0, LANE_BASE
        minute = now_ms // BUCKET_MS
        counted = {IN_FLIGHT: 0, DELAYED: 0}
        for name, n in self.buckets.items():
            if (found := minute_of(name)) is not None and found > minute:
                counted[name[0]] += n
        return max(0, counted[IN_FLIGHT]), max(0, counted[DELAYED]), (minute + 1) * BUCKET_MS
