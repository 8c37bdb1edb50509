"""FIFO rules with no AWS: ids, sequence numbers, sort keys and the group-to-shard hash."""

from __future__ import annotations

import hashlib

import pytest

from chalicelib.fifo import rules as fifo


@pytest.mark.parametrize("value", ["a", "A-9_x", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "x" * 128])
def test_valid_ids(value: str) -> None:
    assert fifo.valid_fifo_id(value)


@pytest.mark.parametrize("value", ["", "x" * 129, "a b", "tab\t", "caf\u00e9", "line\n"])
def test_invalid_ids(value: str) -> None:
    assert not fifo.valid_fifo_id(value)


def test_sequence_numbers_have_20_digits_and_increase() -> None:
    # counters of a shard: from 1, and from a resharded shard's opening in microseconds
    numbers = [fifo.sequence_number(counter) for counter in (1, 2, 10**12, 2 * 10**15)]
    assert all(len(n) == 20 and n.isdigit() for n in numbers)
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)


def test_sequence_numbers_follow_those_of_the_earlier_layout() -> None:
    # a group stored under the earlier numbers (10**19 + counter * 1000 + shard, a
    # resharded shard's counter in microseconds) keeps increasing, in text order too
    earlier = f"{10**19 + (1_900_000_000_000_000 + 10**9) * 1000 + 999:020d}"
    assert fifo.sequence_number(1) > earlier


def test_group_prefixes_never_overlap() -> None:
    # "a" and "a#b" are different groups: no key of one starts with the other's prefix
    key = fifo.message_key("a#b", fifo.sequence_number(1))
    assert not key.startswith(fifo.message_prefix("a"))
    assert key.startswith(fifo.message_prefix("a#b"))
    assert fifo.group_of_key(key) == "a#b"
    assert fifo.group_of_key(fifo.group_key("a#b")) == "a#b"
    assert fifo.is_fifo_message_key(key) and not fifo.is_fifo_message_key("g#a")


def test_shard_slot_is_a_stable_hash() -> None:
    expected = int.from_bytes(hashlib.sha256(b"orders-42").digest()[:8], "big") % 4
    assert fifo.shard_slot("orders-42", 4) == expected
    slots = {fifo.shard_slot(f"g{i}", 4) for i in range(100)}
    assert slots == {0, 1, 2, 3}
    assert fifo.shard_slot("any", 1) == 0


def test_dedup_keys_by_scope_and_generation() -> None:
    assert fifo.dedup_key("queue", "g1", "d", 5) == fifo.dedup_key("queue", "g2", "d", 5)
    assert fifo.dedup_key("messageGroup", "g1", "d", 5) != \
        fifo.dedup_key("messageGroup", "g2", "d", 5)
    assert fifo.dedup_key("queue", "g", "d", 5) != fifo.dedup_key("queue", "g", "d", 6)
    assert fifo.content_dedup_id("body") == hashlib.sha256(b"body").hexdigest()


def test_a_claim_token_carries_its_size_last_number_and_place() -> None:
    token = fifo.claim_token("abc", 2, fifo.sequence_number(7), 3)
    assert fifo.parse_claim_token(token) == (2, fifo.sequence_number(7))
    assert fifo.claim_place(token) == 3
    # a token of the earlier three-part form (a claim made before) still parses
    assert fifo.parse_claim_token("abc.2.") == (2, "") and fifo.claim_place("abc.2.") == 0
    assert fifo.claim_place("") == -1
