"""The count items a process has read, kept for as long as it follows every change to them.

A shard's count item changes only when a stream handler counts records in
(`ShardCounters.apply_records`) or the retention sweep releases the shard. On the local
server one pump per region reads every record of the region's streams and counts them in
itself, so while it follows them it sees every change of every count item, its own or
another server's over the same store (whose write it then repeats, which fails on `seq`
and still marks the change). A GetQueueAttributes, a metrics rendering or the console's
list costs no store request for the shards that counted nothing since their last read.
The ordering that keeps it exact is `chalicelib.followed_cache`'s; where nothing follows
the streams (Lambda, or a pump that is behind), `begin` answers None and every read goes
to the store.
"""

from __future__ import annotations

from typing import Any

from chalicelib.followed_cache import LIMIT, FollowedCache

Item = dict[str, Any]
__all__ = ["LIMIT", "CountItemCache", "Item"]


class CountItemCache(FollowedCache[list[Item]]):
    """Count items by key (an empty list: the store held none)."""
