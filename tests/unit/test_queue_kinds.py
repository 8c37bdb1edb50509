"""The rules of a standard and of a FIFO queue: names, attributes, defaults and shards."""

from __future__ import annotations

import pytest

from chalicelib.domain.queues import QueueRecord
from chalicelib.service import attributes as attrs
from chalicelib.service.exceptions import (
    InvalidAttributeNameError,
    InvalidAttributeValueError,
    InvalidParameterValueError,
)
from chalicelib.service.queue_kinds import (
    FIFO,
    FIFO_NAME_ERROR,
    HIGH_THROUGHPUT_SHARDS,
    STANDARD,
    FifoRules,
    StandardRules,
    asked_rules,
    rules_of,
)


def _record(name: str, **attributes: str) -> QueueRecord:
    return QueueRecord("111122223333", name, "us-east-1", dict(attributes))


def test_the_rules_are_picked_from_create_attributes_and_from_a_record() -> None:
    assert isinstance(asked_rules({" FifoQueue": "TRUE"}), FifoRules)
    assert isinstance(asked_rules({"FifoQueue": "false"}), StandardRules)
    assert isinstance(asked_rules({}), StandardRules)
    assert rules_of(_record("q.fifo", FifoQueue="true")) is FIFO
    assert rules_of(_record("q")) is STANDARD


def test_names() -> None:
    STANDARD.check_name("a" * 80)
    FIFO.check_name("a" * 75 + ".fifo")
    with pytest.raises(InvalidParameterValueError, match="1 to 80 in length"):
        STANDARD.check_name("q.fifo")
    with pytest.raises(InvalidParameterValueError, match="1 to 80 in length"):
        FIFO.check_name("a" * 76 + ".fifo")
    with pytest.raises(InvalidParameterValueError) as caught:
        FIFO.check_name("q")
    assert caught.value.message == FIFO_NAME_ERROR


def test_fifo_attributes_are_settable_on_fifo_queues_only() -> None:
    with pytest.raises(InvalidAttributeNameError, match="Unknown Attribute FifoQueue"):
        STANDARD.validate_settable({"FifoQueue": "False"})
    with pytest.raises(InvalidAttributeNameError, match="only when FifoQueue is set"):
        STANDARD.validate_settable({"DeduplicationScope": "queue"})
    with pytest.raises(InvalidAttributeNameError, match="Unknown Attribute"):
        STANDARD.validate_settable({"ContentBasedDeduplication": "true"})
    assert FIFO.validate_settable({"ContentBasedDeduplication": "TRUE"}) == {
        "ContentBasedDeduplication": "true"}
    with pytest.raises(InvalidAttributeValueError, match="Modifying queue type"):
        FIFO.validate_settable({"FifoQueue": "false"})


def test_defaults_readable_names_and_all() -> None:
    assert "FifoQueue" not in STANDARD.with_defaults({})
    assert FIFO.with_defaults({})["FifoThroughputLimit"] == "perQueue"
    assert "FifoQueue" not in STANDARD.validate_readable(["All"])
    assert "FifoQueue" in FIFO.validate_readable(["All"])
    assert attrs.SHARD_COUNT not in FIFO.validate_readable(["All"])
    with pytest.raises(InvalidAttributeNameError):
        STANDARD.validate_readable(["FifoQueue"])
    assert FIFO.validate_readable([" FifoQueue", "FifoQueue"]) == ["FifoQueue"]


def test_combination_and_shard_count() -> None:
    high = FIFO.with_defaults({"FifoThroughputLimit": "perMessageGroupId"})
    with pytest.raises(InvalidAttributeValueError, match="perMessageGroupId only when"):
        FIFO.check_combination(high)
    STANDARD.check_combination(high)
    assert FIFO.shard_count({**high, "DeduplicationScope": "messageGroup"}) == \
        HIGH_THROUGHPUT_SHARDS
    assert FIFO.shard_count(FIFO.with_defaults({})) == 1
    assert STANDARD.shard_count(STANDARD.with_defaults({})) == 1


def test_a_dead_letter_queue_is_of_its_sources_kind() -> None:
    assert FIFO.is_kind_of(_record("d.fifo", FifoQueue="true"))
    assert not FIFO.is_kind_of(_record("d"))
    assert STANDARD.is_kind_of(_record("d"))
