"""The shared token buckets of throttling (chalicelib/metadata/throttle_buckets.py) behave
the same on moto, on DynamoDB Local and on the in-memory store: a take is one conditional
UpdateItem, a stale guess costs one more (the failed condition returns the item, nothing
is read), an empty bucket grants nothing, and tokens given back never overfill it."""

from __future__ import annotations

from chalicelib.domain.throttling import limit_of
from chalicelib.metadata.throttle_buckets import BucketStore, Grant
from tests.contract.conftest import Store

NOW = 1_700_000_000_000_000  # microseconds
LIMIT = limit_of(10, 5)  # a token every 100 ms, room for 5
T = LIMIT.interval_us


def _buckets(store: Store) -> tuple[BucketStore, list[str]]:
    calls: list[str] = []
    store.dynamodb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name))
    return BucketStore(store.dynamodb, store.messages.replace("messages", "control")), calls


def test_a_take_is_one_conditional_write(store: Store) -> None:
    buckets, calls = _buckets(store)
    assert buckets.take("queue#a/q", LIMIT, NOW, 3, None) == Grant(3, NOW + 3 * T)
    assert buckets.take("queue#a/q", LIMIT, NOW, 1, NOW + 3 * T) == Grant(1, NOW + 4 * T)
    assert calls == ["UpdateItem", "UpdateItem"]
    assert buckets.tat("queue#a/q") == NOW + 4 * T


def test_a_stale_guess_costs_one_more_write_and_no_read(store: Store) -> None:
    buckets, calls = _buckets(store)
    buckets.take("queue#a/q", LIMIT, NOW, 4, None)
    calls.clear()
    # another process that believes the bucket full gets the one token that is left
    assert buckets.take("queue#a/q", LIMIT, NOW, 3, None) == Grant(1, NOW + 5 * T)
    assert calls == ["UpdateItem", "UpdateItem"]


def test_an_empty_bucket_grants_nothing_until_a_token_is_due(store: Store) -> None:
    buckets, _ = _buckets(store)
    buckets.take("account#a", LIMIT, NOW, 5, None)
    assert buckets.take("account#a", LIMIT, NOW + T - 1, 2, NOW + 5 * T).count == 0
    assert buckets.take("account#a", LIMIT, NOW + T, 2, NOW + 5 * T) == Grant(1, NOW + 6 * T)


def test_tokens_go_back_unless_the_bucket_would_overfill(store: Store) -> None:
    buckets, _ = _buckets(store)
    buckets.take("account#b", LIMIT, NOW, 5, None)
    assert buckets.give_back("account#b", LIMIT, NOW, 2)
    assert buckets.tat("account#b") == NOW + 3 * T
    # 250 ms later the bucket holds 4 again by refill: two more would overfill it
    assert not buckets.give_back("account#b", LIMIT, NOW + 250_000, 2)
    assert buckets.give_back("account#b", LIMIT, NOW + 250_000, 0) is False
    assert buckets.tat("account#b") == NOW + 3 * T
