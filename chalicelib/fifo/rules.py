"""FIFO queue rules that need no AWS: id validation, sequence numbers, keys and group placement.

The messages table holds, in each shard's partition (`<queue id>#<shard>`):
- one *group item* per message group that has messages, sort key `g#<group>`. It is the
  only item of the group in the visibility index: its `visible_at` is when the group can
  next be served (its head's visible time, or the end of the current hold);
- the group's messages, sort key `f#<group> <sequence number>`: a space never occurs in a
  group id, so a `begins_with("f#<group> ")` query reads exactly one group, in order;
- the shard's sequence counter, sort key `s#`;
- with DeduplicationScope=messageGroup, the dedup items `d#<created>#<group> <dedup id>`.
With DeduplicationScope=queue the dedup items live in `<queue id>#dedup`. Receive-attempt
records live in `<queue id>#attempt`. Message ids are UUIDs, which never hold `#`.
"""

from __future__ import annotations

import hashlib
import re

MAX_ID_LENGTH = 128
DEDUP_WINDOW_MS = 5 * 60 * 1000
ATTEMPT_WINDOW_MS = 5 * 60 * 1000
# 20 decimal digits: the base plus the shard's counter. The base is above every number
# of the earlier layout (10**19 + counter * 1000 + shard id, under 1.2 * 10**19), so the
# groups stored then keep increasing.
SEQUENCE_BASE = 18 * 10**18
# Alphanumerics and ASCII punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~).
_FIFO_ID = re.compile(r"[A-Za-z0-9!-/:-@\[-`{-~]{1,128}")

GROUP_PREFIX = "g#"
MESSAGE_PREFIX = "f#"
DEDUP_PREFIX = "d#"
SEQUENCE_KEY = "s#"
NEVER_MS = 2**53 - 1  # a group item never expires: its messages do


def valid_fifo_id(value: str) -> bool:
    """1 to 128 alphanumeric or punctuation characters."""
    return _FIFO_ID.fullmatch(value) is not None


def sequence_number(counter: int) -> str:
    """A 20-digit SequenceNumber from a shard's counter value, as SQS gives: it increases
    within a group (whose messages live in one shard, or in a resharded shard counting on
    from its parent's numbers) and carries no other identifier."""
    return f"{SEQUENCE_BASE + counter:020d}"


def dedup_stale_before(now_ms: int, purged_ms: int) -> int:
    """A dedup item whose expiry (its send plus the 5-minute window) is at or before this
    is no longer live: expired, or sent by the queue's last purge (`purged_ms`), which
    clears the deduplication history as SQS's PurgeQueue does."""
    return max(now_ms, purged_ms + DEDUP_WINDOW_MS)


def content_dedup_id(body: str) -> str:
    """ContentBasedDeduplication: the SHA-256 of the body, hex encoded."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def group_key(group: str) -> str:
    """Sort key of a group item."""
    return f"{GROUP_PREFIX}{group}"


def message_prefix(group: str) -> str:
    """The sort-key prefix of every message of a group."""
    return f"{MESSAGE_PREFIX}{group} "


def message_key(group: str, sequence: str) -> str:
    """Sort key of a FIFO message: its group, then its sequence number."""
    return f"{message_prefix(group)}{sequence}"


def group_of_key(sort_key: str) -> str:
    """The group a FIFO message's or group item's sort key names."""
    if sort_key.startswith(GROUP_PREFIX):
        return sort_key[len(GROUP_PREFIX):]
    return sort_key[len(MESSAGE_PREFIX):].rsplit(" ", 1)[0]


def is_fifo_message_key(sort_key: str) -> bool:
    """True for the sort key of a FIFO message item."""
    return sort_key.startswith(MESSAGE_PREFIX)


def dedup_key(scope: str, group: str, dedup_id: str, generation: int = 0) -> str:
    """Sort key of a dedup item: per queue, or per group with DeduplicationScope=messageGroup.
    `generation` (the queue's creation time) keeps a queue deleted and created again from
    deduplicating against its predecessor."""
    if scope == "messageGroup":
        return f"{DEDUP_PREFIX}{generation}#{group} {dedup_id}"
    return f"{DEDUP_PREFIX}{generation}#{dedup_id}"


def claim_token(random_part: str, size: int, last: str, place: int = 0) -> str:
    """A FIFO claim token: random, then how many messages the claim took and, when it took
    every message the group had, the last one's sequence number (so that deleting exactly
    those can release or remove the group in the same transaction), then the group's place
    among the groups its receive claimed (`claim_place`)."""
    return f"{random_part}.{size}.{last}.{place}"


def parse_claim_token(token: str) -> tuple[int, str]:
    """(size, last) of a FIFO claim token; (0, "") for any other token."""
    parts = token.split(".")
    if len(parts) not in (3, 4) or not parts[1].isdigit():
        return 0, ""
    return int(parts[1]), parts[2]


def claim_place(token: str) -> int:
    """A group's place among the groups one receive claimed, from its claim token: the
    groups a receive held turn visible at the same time, and are served again in the
    order it took them, behind the groups that were waiting (SQS's observed order). -1
    for a group under no claim (or a token of the earlier three-part form: 0)."""
    if not token:
        return -1
    parts = token.split(".")
    return int(parts[3]) if len(parts) == 4 and parts[3].isdigit() else 0


def group_hash(group: str) -> int:
    """A group's stable 64-bit hash (never Python's `hash`, which changes between
    processes): what places the group in a shard."""
    digest = hashlib.sha256(group.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def shard_slot(group: str, shard_count: int) -> int:
    """Which of `shard_count` shards a group lives in, in a queue's original layout."""
    return group_hash(group) % shard_count
