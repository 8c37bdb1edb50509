"""What differs between a standard and a FIFO queue's name and attributes: one interface
(`QueueRules`), two classes (`StandardRules`, `FifoRules`), so that the queue service
never branches on the queue's type but to pick one (`asked_rules`, `rules_of`)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping

from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo.service import is_fifo
from chalicelib.service import attributes as attrs
from chalicelib.service.exceptions import InvalidAttributeNameError, InvalidParameterValueError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
FIFO_NAME_ERROR = (
    "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
    "underscores, must end with .fifo suffix and be 1 to 80 in length."
)
# A new FIFO queue with high throughput (perMessageGroupId) starts with this many shards.
HIGH_THROUGHPUT_SHARDS = 4


def _check_plain_name(name: str) -> None:
    """1 to 80 alphanumerics, hyphens or underscores."""
    if not _NAME.fullmatch(name):
        raise InvalidParameterValueError(
            "Can only include alphanumeric characters, hyphens, or underscores. "
            "1 to 80 in length"
        )


class QueueRules(ABC):
    """The rules of one kind of queue: its name, the attributes it takes and shows, their
    defaults and how they combine."""

    # A new queue's attributes before the client's; the names GetQueueAttributes accepts;
    # and what `All` expands to.
    defaults: Mapping[str, str]
    readable: frozenset[str]
    everything: frozenset[str]

    @abstractmethod
    def check_name(self, name: str) -> None:
        """Refuse a queue name this kind of queue cannot have."""

    @abstractmethod
    def check_fifo_only(self, name: str, value: str) -> str | None:
        """A FIFO-only attribute's value, normalised; None to leave it out."""

    @abstractmethod
    def check_combination(self, attributes: Mapping[str, str]) -> None:
        """Refuse a queue's attributes that are valid alone but not together."""

    @abstractmethod
    def shard_count(self, attributes: Mapping[str, str]) -> int:
        """A new queue's shards when the client does not name a count."""

    def validate_settable(self, attributes: Mapping[str, str]) -> dict[str, str]:
        """Check names and values of attributes a client sets; return them normalised."""
        normalised: dict[str, str] = {}
        for name, value in attrs.stripped(attributes).items():
            checked = (self.check_fifo_only(name, str(value)) if name in attrs.FIFO_ONLY
                       else attrs.check_settable(name, str(value)))
            if checked is not None:
                normalised[name] = checked
        attrs.check_sse(normalised)
        return normalised

    def with_defaults(self, attributes: Mapping[str, str]) -> dict[str, str]:
        """The attributes of a new queue: the defaults overlaid with what was given."""
        merged = dict(self.defaults)
        merged.update({k: v for k, v in attributes.items() if v != "" or k not in attrs.DEFAULTS})
        return {k: v for k, v in merged.items() if v != ""}

    def validate_readable(self, names: list[str]) -> list[str]:
        """Check names asked of GetQueueAttributes; expand `All`."""
        names = [name.strip() for name in names]
        for name in names:
            if name not in self.readable:
                raise InvalidAttributeNameError(f"Unknown Attribute {name}.")
        if "All" in names:
            return sorted(self.everything)
        return list(dict.fromkeys(names))

    def is_kind_of(self, queue: QueueRecord) -> bool:
        """Whether `queue` is of this kind (a dead-letter queue is of its sources' kind)."""
        return type(rules_of(queue)) is type(self)


class StandardRules(QueueRules):
    """A standard queue: no FIFO attributes (not even FifoQueue=false), one shard to start."""

    defaults = attrs.DEFAULTS
    readable = attrs.READABLE
    everything = frozenset({*attrs.SETTABLE, *attrs.COMPUTED})

    def check_name(self, name: str) -> None:
        """1 to 80 alphanumerics, hyphens or underscores (so never a .fifo suffix)."""
        _check_plain_name(name)

    def check_fifo_only(self, name: str, value: str) -> str | None:
        """Every FIFO attribute is refused as SQS refuses it, FifoQueue=false included
        (SQS answers "Unknown Attribute FifoQueue." to it, at CreateQueue as at
        SetQueueAttributes)."""
        if name in attrs.FIFO_CHOICES:
            raise InvalidAttributeNameError(
                f"You can specify the {name} only when FifoQueue is set to true.")
        raise InvalidAttributeNameError(f"Unknown Attribute {name}.")

    def check_combination(self, attributes: Mapping[str, str]) -> None:
        """A standard queue's attributes combine freely."""

    def shard_count(self, attributes: Mapping[str, str]) -> int:
        """One shard."""
        return 1


class FifoRules(QueueRules):
    """A FIFO queue: a .fifo name, the FIFO attributes, high throughput on more shards."""

    defaults = {**attrs.DEFAULTS, **attrs.FIFO_DEFAULTS}
    readable = attrs.READABLE | attrs.FIFO_ONLY
    everything = frozenset({*attrs.SETTABLE, *attrs.COMPUTED, *attrs.FIFO_ONLY})

    def check_name(self, name: str) -> None:
        """A standard queue's name with the .fifo suffix, which counts toward the 80."""
        if not name.endswith(".fifo"):
            raise InvalidParameterValueError(FIFO_NAME_ERROR)
        _check_plain_name(name[:-5] + "_fifo" if len(name) > 5 else name)

    def check_fifo_only(self, name: str, value: str) -> str | None:
        """The FIFO attribute's value, normalised."""
        return attrs.check_fifo_attribute(name, value)

    def check_combination(self, attributes: Mapping[str, str]) -> None:
        """High throughput (perMessageGroupId) needs DeduplicationScope=messageGroup."""
        attrs.check_fifo_combination(attributes)

    def shard_count(self, attributes: Mapping[str, str]) -> int:
        """High throughput starts on several shards, a queue-wide limit on one."""
        if attributes["FifoThroughputLimit"] == "perMessageGroupId":
            return HIGH_THROUGHPUT_SHARDS
        return 1


STANDARD = StandardRules()
FIFO = FifoRules()


def asked_rules(attributes: Mapping[str, str]) -> QueueRules:
    """The rules of the queue CreateQueue's attributes ask for."""
    return FIFO if attrs.asks_fifo(attributes) else STANDARD


def rules_of(queue: QueueRecord) -> QueueRules:
    """The rules of an existing queue."""
    return FIFO if is_fifo(queue) else STANDARD
