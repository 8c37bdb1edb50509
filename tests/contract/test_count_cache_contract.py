"""Count items kept in memory where the process follows every change to them (the local
server, `chalicelib.backend.count_cache`): a read of a shard that counted nothing since
its last read makes no store request, and every change, whichever server's counter wrote
it, makes the next read go to the store again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from chalicelib.backend.count_cache import CountItemCache
from chalicelib.backend.counters import ShardCounters
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.domain.messages import Message, MessageRef
from dmqlocal.folders import FolderBodyStore
from tests.contract.conftest import Store, stream_counter

Q = "000000000000/cached"


class _Counted:
    """The store's DynamoDB client, counting the reads of count items."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.reads = 0

    def batch_get_item(self, **kwargs: Any) -> Any:
        self.reads += 1
        return self._client.batch_get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _message(message_id: str) -> Message:
    now = int(time.time() * 1000)
    return Message(message_id, f"body {message_id}", "md5", sent_ms=now, visible_at=now - 1,
                   expires_ms=now + 10**9)


def test_a_followed_count_is_read_from_the_store_only_after_it_changed(
    store: Store, tmp_path: Path
) -> None:
    control = store.messages.replace("dmq-messages-", "dmq-control-")
    client = _Counted(store.dynamodb)
    followed = [True]
    cache = CountItemCache(lambda: followed[0])
    here = ShardCounters(client, control, cache=cache)  # type: ignore[arg-type]
    elsewhere = ShardCounters(store.dynamodb, control)  # another server's counter
    messages = DynamoMessageStore(store.dynamodb, store.messages,
                                  FolderBodyStore(str(tmp_path)), 350_000, elsewhere)
    count_here, count_elsewhere = stream_counter(store, here), stream_counter(store, elsewhere)
    # GIVEN 5 messages in shard 0, counted in here
    assert not messages.put_messages(Q, [(0, _message(f"m{i}")) for i in range(5)])
    count_here()
    # WHEN the count is read three times THEN the store is read once
    before = client.reads
    assert [here.total(store.messages, Q, 0) for _ in range(3)] == [5, 5, 5]
    assert client.reads - before == 1
    # AND a shard with no count item yet is kept as absent: read once (with its older
    # slots, which are read once per process)
    assert [here.total(store.messages, Q, 7) for _ in range(2)] == [0, 0]
    assert client.reads - before == 2
    # WHEN another server's counter counts 2 deletes first, and this one follows them
    messages.delete_claimed([MessageRef(Q, 0, "m0", ""), MessageRef(Q, 0, "m1", "")],
                            any_claim=True)
    count_elsewhere()
    count_here()  # finds them counted already: its write fails on `seq`, yet marks a change
    # THEN the next read goes to the store and shows them, and the one after does not
    assert here.total(store.messages, Q, 0) == 3
    assert client.reads - before == 3
    assert here.total(store.messages, Q, 0) == 3
    assert client.reads - before == 3
    # AND a process that no longer follows the stream reads the store every time
    followed[0] = False
    assert [here.total(store.messages, Q, 0) for _ in range(2)] == [3, 3]
    assert client.reads - before == 5


def test_a_change_during_a_read_voids_what_the_read_found() -> None:
    cache = CountItemCache(lambda: True)
    began = cache.begin()
    assert began is not None
    cache.changed("k")  # a count written while the read was on its way
    cache.put(began, "k", [{"n": {"N": "1"}}])
    assert cache.get("k") is None
    # WHEN read again after the change THEN it is kept
    again = cache.begin()
    assert again is not None
    cache.put(again, "k", [{"n": {"N": "2"}}])
    assert cache.get("k") == [{"n": {"N": "2"}}]
    # AND a later change voids it
    cache.changed("k")
    assert cache.get("k") is None


def test_a_full_cache_forgets_changes_without_keeping_an_older_read() -> None:
    cache = CountItemCache(lambda: True, limit=2)
    began = cache.begin()
    assert began is not None
    cache.changed("a")
    cache.changed("b")
    cache.changed("c")  # over the limit: what was changed is forgotten, the floor raised
    cache.put(began, "a", [])  # a read that began before the forgetting is not kept
    assert cache.get("a") is None
    later = cache.begin()
    assert later is not None
    cache.put(later, "a", [])
    assert cache.get("a") == []
