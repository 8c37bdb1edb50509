"""Queue metadata as frozen domain types; PynamoDB models never leave the repository."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import StrEnum


class QueueStatus(StrEnum):
    """Lifecycle of a queue record."""

    ACTIVE = "ACTIVE"
    DELETED = "DELETED"


@dataclass(frozen=True)
class RedrivePolicy:
    """Where a message goes after too many receives."""

    dead_letter_target_arn: str
    max_receive_count: int

    def to_json(self) -> str:
        """Serialise as SQS returns it."""
        return json.dumps(
            {
                "deadLetterTargetArn": self.dead_letter_target_arn,
                "maxReceiveCount": self.max_receive_count,
            },
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class QueueRecord:
    """One queue, as the metadata table holds it."""

    account: str
    name: str
    region: str
    attributes: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    created_ms: int = 0
    modified_ms: int = 0
    shard_count: int = 1
    cluster: str = "default"
    status: QueueStatus = QueueStatus.ACTIVE
    deleted_ms: int = 0
    purged_ms: int = 0
    version: int = 0

    @property
    def queue_id(self) -> str:
        """The metadata key, `<account>/<name>`."""
        return queue_id_of(self.account, self.name)

    @property
    def arn(self) -> str:
        """The queue's ARN."""
        return queue_arn(self.region, self.account, self.name)

    def attribute_int(self, name: str) -> int:
        """A numeric attribute (always present: defaults are filled at creation)."""
        return int(self.attributes[name])

    @property
    def redrive_policy(self) -> RedrivePolicy | None:
        """The parsed RedrivePolicy, if the queue has one."""
        raw = self.attributes.get("RedrivePolicy")
        if not raw:
            return None
        data = json.loads(raw)
        return RedrivePolicy(str(data["deadLetterTargetArn"]), int(data["maxReceiveCount"]))

    def with_changes(self, **changes: object) -> QueueRecord:
        """A copy with some fields replaced."""
        return replace(self, **changes)  # type: ignore[arg-type]


def queue_id_of(account: str, name: str) -> str:
    """The queue id for an account and a queue name."""
    return f"{account}/{name}"


def queue_arn(region: str, account: str, name: str) -> str:
    """`arn:aws:sqs:<region>:<account>:<name>`."""
    return f"arn:aws:sqs:{region}:{account}:{name}"


def parse_queue_arn(arn: str) -> tuple[str, str, str] | None:
    """Split `arn:aws:sqs:<region>:<account>:<name>`; None if it is not a queue ARN."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not parts[5]:
        return None
    return parts[3], parts[4], parts[5]
