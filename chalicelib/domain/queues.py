"""Queue metadata as frozen domain types; PynamoDB models never leave the repository."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import StrEnum

DEFAULT_CLUSTER = "default"


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
class Shard:
    """One partition key of a queue: `<queue id>#<id>` in its cluster's messages table.

    A draining shard takes no new messages; receives still read it until it is empty and
    the internal cluster manager forgets it. A FIFO queue's shard also owns a range of
    the group hash (`chalicelib.fifo.ranges`): the groups whose hash is `rem`
    modulo `mod` (0 and 0: the original layout, a slot of the shard count). A FIFO
    shard made by a split or a merge takes sends from `opens_at_ms`, when its `parents`
    stop taking them, and delivers only once they are empty.
    """

    id: int
    cluster: str = DEFAULT_CLUSTER
    draining_since_ms: int = 0
    rem: int = 0
    mod: int = 0
    base: int = 0  # the shard count the FIFO queue was created with (its dedup slots)
    parents: tuple[int, ...] = ()
    opens_at_ms: int = 0

    @property
    def draining(self) -> bool:
        """True once the shard was scaled in (a FIFO shard: from `draining_since_ms` on,
        which a resharding sets a moment ahead)."""
        return self.draining_since_ms > 0

    def to_json(self) -> dict[str, object]:
        """The shard as the metadata table and the admin view show it."""
        ranged: dict[str, object] = {}
        if self.mod:
            ranged = {"rem": self.rem, "mod": self.mod, "base": self.base}
        if self.parents:
            ranged["parents"] = list(self.parents)
        if self.opens_at_ms:
            ranged["opens_at_ms"] = self.opens_at_ms
        return {"id": self.id, "cluster": self.cluster,
                "state": "draining" if self.draining else "active",
                **({"draining_since_ms": self.draining_since_ms} if self.draining else {}),
                **ranged}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Shard:
        """Parse what `to_json` wrote."""
        parents = data.get("parents", [])
        return cls(int(str(data["id"])), str(data.get("cluster", DEFAULT_CLUSTER)),
                   int(str(data.get("draining_since_ms", 0))),
                   int(str(data.get("rem", 0))), int(str(data.get("mod", 0))),
                   int(str(data.get("base", 0))),
                   tuple(int(str(p)) for p in parents) if isinstance(parents, list) else (),
                   int(str(data.get("opens_at_ms", 0))))


def shards_to_text(shards: tuple[Shard, ...]) -> str:
    """The shard map as stored in the metadata table."""
    return json.dumps([s.to_json() for s in shards], separators=(",", ":"))


def shards_from_text(text: str) -> tuple[Shard, ...]:
    """Parse a stored shard map."""
    return tuple(Shard.from_json(d) for d in json.loads(text))


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
    shards: tuple[Shard, ...] = (Shard(0),)
    status: QueueStatus = QueueStatus.ACTIVE
    deleted_ms: int = 0
    purged_ms: int = 0
    home_region: str = ""
    replicas: tuple[str, ...] = ()
    replication_mode: str = "async"
    epoch: int = 0
    version: int = 0

    @property
    def queue_id(self) -> str:
        """The metadata key, `<account>/<name>`."""
        return queue_id_of(self.account, self.name)

    @property
    def home(self) -> str:
        """The region that serves the queue (its primary); the others hold replicas."""
        return self.home_region or self.region

    @property
    def active_shards(self) -> tuple[Shard, ...]:
        """The shards that take new messages."""
        return tuple(s for s in self.shards if not s.draining)

    @property
    def placed_cluster(self) -> str:
        """The cluster the queue was created on (`DmqCluster`): its first shard's, which
        stays (scale-in drains the highest shards, a split adds shards elsewhere)."""
        return self.shards[0].cluster if self.shards else DEFAULT_CLUSTER

    @property
    def shard_count(self) -> int:
        """How many shards take new messages (the `DmqShardCount` attribute)."""
        return len(self.active_shards)

    def shard(self, shard_id: int) -> Shard | None:
        """The shard with this id, if the queue still has it."""
        for shard in self.shards:
            if shard.id == shard_id:
                return shard
        return None

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


@dataclass(frozen=True)
class ConnectionBudget:
    """How long one metadata call may take, and how many connections its client keeps:
    PynamoDB's connection settings."""

    connect_timeout_s: float = 1.0
    read_timeout_s: float = 2.0
    attempts: int = 2
    pool_connections: int = 10  # PynamoDB's default
