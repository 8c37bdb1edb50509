"""Queue operations: create, look up, list, delete, attributes, tags and DLQ sources."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence

from chalicelib.clusters.manager import NoSuchClusterError
from chalicelib.clusters.shards import reshaped, resize
from chalicelib.domain.exceptions import ConcurrentChangeError
from chalicelib.domain.purges import PurgeKind
from chalicelib.domain.queues import (
    QueueRecord,
    QueueStatus,
    queue_arn,
    queue_id_of,
    shards_to_text,
)
from chalicelib.metadata.queue_counts import QueueQuotaReachedError
from chalicelib.service import attributes as attrs
from chalicelib.service.exceptions import (
    InvalidAttributeValueError,
    InvalidParameterValueError,
    OverLimitError,
    PurgeQueueInProgressError,
    QueueDeletedRecentlyError,
    QueueNameExistsError,
)
from chalicelib.service.queue_changes import QueueChanges
from chalicelib.service.queue_kinds import QueueRules, asked_rules, rules_of
from chalicelib.service.queue_records import contended
from chalicelib.service.tags import check_tags

DELETE_COOLDOWN_MS = 60_000
PURGE_COOLDOWN_MS = 60_000

logger = logging.getLogger("dmq.service")


class QueueService(QueueChanges):
    """Queue-level operations over the metadata repository."""

    # -- create and delete ---------------------------------------------------------------
    def create(
        self, account: str, region: str, name: str, attributes: Mapping[str, str],
        tags: Mapping[str, str],
    ) -> QueueRecord:
        """CreateQueue: idempotent for equal attributes, QueueNameExists otherwise. A new
        name costs one write and no read: the write is refused where a record is there,
        and then the record is read. A name this process has met, or one asked with a
        RedrivePolicy (a queue that exists is answered without judging its dead-letter
        queue again), is read first."""
        rules = asked_rules(attributes)
        rules.check_name(name)
        given = rules.validate_settable(attributes)
        check_tags(tags, name)
        now = self._clock.now_ms()
        queue_id = queue_id_of(account, name)
        existing = (self._repo.get(queue_id, fresh=True)
                    if "RedrivePolicy" in given or self._repo.known(queue_id) else None)
        for _ in range(2):  # once more over a deleted record found by the first write
            if existing is not None:
                reuse = self._reuse_existing(existing, given, now)
                if reuse is not None:
                    return reuse
            record = self._new_record(account, region, name, (given, tags), rules, now,
                                      existing)
            try:
                return self._save_new(record)
            except ConcurrentChangeError:
                existing = self._repo.get(queue_id, fresh=True)
            if existing is None:
                break
        if existing is not None:
            reused = self._reuse_existing(existing, given, now)
            if reused is not None:
                return reused
        # Another request changed the name's record (a delete long ago, recreated or
        # deleted again); the client's retry sees the new record.
        raise contended(queue_id)

    def _new_record(self, account: str, region: str, name: str,
                    asked: tuple[Mapping[str, str], Mapping[str, str]], rules: QueueRules,
                    now: int, existing: QueueRecord | None) -> QueueRecord:
        """The record of a queue made now with `asked` (its attributes and tags), over
        `existing` (a deleted queue's) if any."""
        given, tags = asked
        self._check_redrive(account, queue_arn(region, account, name), given, rules)
        sqs_given, count = _split_extensions(given)
        initial = attrs.with_sse(rules.with_defaults(sqs_given), sqs_given)
        rules.check_combination(initial)
        shards = resize((), count or rules.shard_count(initial),
                        self._placement(queue_id_of(account, name), given), now)
        record = QueueRecord(
            account=account, name=name, region=region,
            attributes=initial, tags=dict(tags),
            created_ms=now, modified_ms=now,
            shards=shards,
            home_region=region,
            version=existing.version if existing is not None else 0,
            # Messages of a deleted queue of this name may still be being removed: they
            # stay purged for the new queue.
            purged_ms=existing.purged_ms if existing is not None else 0,
        )
        return self._with_replication(record, given)

    def _save_new(self, record: QueueRecord) -> QueueRecord:
        try:
            return self._repo.save(record, count=1, quota=self._max_queues)
        except QueueQuotaReachedError:
            raise OverLimitError(
                f"You have reached the limit of {self._max_queues} queues for account "
                f"{record.account} in {record.region}; delete queues you no longer use."
            ) from None

    def _reuse_existing(
        self, existing: QueueRecord, given: Mapping[str, str], now: int
    ) -> QueueRecord | None:
        if existing.status is QueueStatus.DELETED:
            if now - existing.deleted_ms < DELETE_COOLDOWN_MS:
                raise QueueDeletedRecentlyError(
                    "You must wait 60 seconds after deleting a queue before you can create "
                    "another with the same name."
                )
            return None
        sqs_given, _ = _split_extensions(given)
        current = {attrs.SHARD_COUNT: str(existing.shard_count),
                   attrs.REPLICA_REGIONS: ",".join(existing.replicas),
                   attrs.REPLICATION_MODE: existing.replication_mode,
                   attrs.CLUSTER: existing.placed_cluster}
        for key in attrs.EXTENSIONS_SETTABLE & set(given):
            if given[key] != current[key]:
                raise QueueNameExistsError(
                    "A queue already exists with the same name and a different value for "
                    f"attribute {key}"
                )
        for key, value in rules_of(existing).with_defaults(sqs_given).items():
            if key in given and existing.attributes.get(key, "") != value:
                raise QueueNameExistsError(
                    f"A queue already exists with the same name and a different value for "
                    f"attribute {key}"
                )
        return existing

    def delete(self, queue: QueueRecord) -> None:
        """DeleteQueue: the record is marked deleted (and purged: a queue made again with
        the name never sees these messages); the messages are removed in the background
        (`service.purges`), or here when no purge service is wired."""
        now = self._clock.now_ms()
        if self.purges is not None:
            self.purges.record(queue, now, PurgeKind.DELETE,
                               self._messages.stored_counts(queue, fresh=True))
        deleted = self._update(queue, lambda q: q.with_changes(
            status=QueueStatus.DELETED, deleted_ms=now, purged_ms=now, modified_ms=now),
            count=-1)
        if self.purges is None:
            self._messages.purge(deleted)

    def purge(self, queue: QueueRecord) -> None:
        """PurgeQueue: at most once every 60 seconds. The answer comes once the record is
        marked (`purged_ms`): from then on receives treat every message sent before it as
        gone, and the background removes them (`service.purges`), whatever the backlog."""
        now = self._clock.now_ms()

        def purged(current: QueueRecord) -> QueueRecord:
            if now - current.purged_ms < PURGE_COOLDOWN_MS:
                raise PurgeQueueInProgressError(
                    f"Only one PurgeQueue operation on {current.name} is allowed every 60 "
                    "seconds."
                )
            return current.with_changes(purged_ms=now)

        if self.purges is None:
            self._messages.purge(self._update(queue, purged))
            return
        purged(queue)  # refused before anything is recorded, when the record says so
        self.purges.record(queue, now, PurgeKind.PURGE,
                           self._messages.stored_counts(queue, fresh=True))
        self._update(queue, purged)
        self._past(now)

    def _past(self, now: int) -> None:
        """Answer once the clock passed `now` (a millisecond at most): a message sent by
        then is purged, one sent after the answer is not (a few tries: a test's frozen
        clock never moves)."""
        for _ in range(3):
            if self._clock.now_ms() > now:
                return
            time.sleep(0.0005)

    # -- list ------------------------------------------------------------------------------
    def all_queues(self) -> list[QueueRecord]:
        """Every active queue of every account (the admin view)."""
        return sorted(self._repo.scan_active(), key=lambda r: r.queue_id)

    def dead_letter_sources(self, queue: QueueRecord) -> list[QueueRecord]:
        """ListDeadLetterSourceQueues: queues whose RedrivePolicy targets this queue."""
        return [
            r for r in self._repo.all_active(queue.account)
            if r.redrive_policy and r.redrive_policy.dead_letter_target_arn == queue.arn
        ]

    # Kept after every method annotated with `list[...]`: from here on the name is this method.
    def list(
        self, account: str, prefix: str, max_results: int | None, after: str | None
    ) -> tuple[list[str], str | None]:
        """ListQueues: the names of up to 1,000, or pages of `max_results` with the name to
        go on after."""
        if max_results is not None and not 1 <= max_results <= 1000:
            raise InvalidParameterValueError(
                f"Value {max_results} for parameter MaxResults is invalid. Reason: MaxResults "
                "must be an integer between 1 and 1000."
            )
        names, last = self._repo.list_names(account, prefix, max_results or 1000, after)
        return names, last if max_results is not None else None

    # -- attributes ----------------------------------------------------------------------
    def get_attributes(self, queue: QueueRecord, names: Sequence[str]) -> dict[str, str]:
        """GetQueueAttributes; the message counts are read only when asked for."""
        wanted = rules_of(queue).validate_readable(list(names))
        values = dict(queue.attributes)
        if not values.get("KmsMasterKeyId"):  # SQS shows the reuse period with a key only
            values.pop("KmsDataKeyReusePeriodSeconds", None)
        values.update(
            CreatedTimestamp=str(queue.created_ms // 1000),
            LastModifiedTimestamp=str(queue.modified_ms // 1000),
            QueueArn=queue.arn,
        )
        values[attrs.SHARD_COUNT] = str(queue.shard_count)
        values["DmqShards"] = shards_to_text(queue.shards)
        values["DmqHomeRegion"] = queue.home
        values[attrs.CLUSTER] = queue.placed_cluster
        values[attrs.REPLICA_REGIONS] = ",".join(queue.replicas)
        values[attrs.REPLICATION_MODE] = queue.replication_mode
        if any(n.startswith("ApproximateNumber") for n in wanted):
            counts = self._messages.counts(queue, fresh=True)
            values.update(
                ApproximateNumberOfMessages=str(counts.visible),
                ApproximateNumberOfMessagesNotVisible=str(counts.in_flight),
                ApproximateNumberOfMessagesDelayed=str(counts.delayed),
            )
        return {n: values[n] for n in wanted if n in values}

    def set_attributes(self, queue: QueueRecord, attributes: Mapping[str, str]) -> None:
        """SetQueueAttributes; an empty RedrivePolicy or Policy removes it."""
        rules = rules_of(queue)
        given = rules.validate_settable(attributes)
        attrs.check_cluster_kept(given, queue.placed_cluster)
        self._check_redrive(queue.account, queue.arn, given, rules)
        sqs_given, count = _split_extensions(given)
        now = self._clock.now_ms()

        def changed(current: QueueRecord) -> QueueRecord:
            merged = attrs.with_sse({**current.attributes, **sqs_given}, sqs_given)
            rules.check_combination(merged)
            shards = current.shards
            if count is not None and count != current.shard_count:
                shards = reshaped(current, count, self._new_shard_cluster(current), now,
                                  self._switch_ms)
            return self._with_replication(current.with_changes(
                attributes={k: v for k, v in merged.items() if v != ""},
                modified_ms=now, shards=shards), given)

        self._update(queue, changed)

    def _with_replication(self, record: QueueRecord, given: Mapping[str, str]) -> QueueRecord:
        """Apply DmqReplicaRegions and DmqReplicationMode; replicas must be other regions
        of this deployment."""
        raw = given.get(attrs.REPLICA_REGIONS)
        if raw is not None:
            replicas = tuple(r for r in raw.split(",") if r)
            unknown = [r for r in replicas if r not in self._regions or r == record.home]
            if unknown:
                raise InvalidAttributeValueError(
                    f"Invalid value for the parameter {attrs.REPLICA_REGIONS}. Reason: "
                    f"{unknown[0]} is not another region of this deployment "
                    f"({', '.join(r for r in self._regions if r != record.home) or 'none'})."
                )
            record = record.with_changes(replicas=replicas)
        mode = given.get(attrs.REPLICATION_MODE)
        if mode is not None:
            record = record.with_changes(replication_mode=mode)
        return record

    def _placement(self, queue_id: str, given: Mapping[str, str]) -> str:
        """A new queue's cluster: the one DmqCluster names (if configured), else the ring's."""
        try:
            return self._place(queue_id, given.get(attrs.CLUSTER))
        except NoSuchClusterError as exc:
            raise InvalidAttributeValueError(
                f"Invalid value for the parameter {attrs.CLUSTER}. Reason: {exc}") from None

    def _check_redrive(self, account: str, source_arn: str, given: Mapping[str, str],
                       rules: QueueRules) -> None:
        """A RedrivePolicy must name a live queue of the account, of the source's type
        (FIFO or standard), that accepts this source."""
        raw = given.get("RedrivePolicy")
        if not raw:
            return
        target_arn = json.loads(raw)["deadLetterTargetArn"]
        target = self.by_arn(target_arn)
        reason = None
        if target is None:
            reason = "Dead letter target does not exist."
        elif target.account != account:
            reason = "Dead letter target must be in the same account."
        elif not rules.is_kind_of(target):
            reason = "Dead-letter queue must be same type of queue as the source.."
        if reason is None and target is not None:
            reason = _allow_policy_refusal(target, source_arn)
        if reason:
            raise InvalidParameterValueError(
                f"Value {raw} for parameter RedrivePolicy is invalid. Reason: {reason}"
            )



def _split_extensions(given: Mapping[str, str]) -> tuple[dict[str, str], int | None]:
    """SQS attributes (stored as given) apart from DMQ's shard count (kept in the shard map)."""
    sqs_given = {k: v for k, v in given.items() if k not in attrs.EXTENSIONS_SETTABLE}
    count = given.get(attrs.SHARD_COUNT)
    return sqs_given, int(count) if count is not None else None


def _allow_policy_refusal(target: QueueRecord, source_arn: str) -> str | None:
    """Why the target's RedriveAllowPolicy refuses this source queue, or None."""
    raw = target.attributes.get("RedriveAllowPolicy")
    if not raw:
        return None
    policy = json.loads(raw)
    permission = policy.get("redrivePermission")
    if permission == "denyAll":
        return "The dead letter target's RedriveAllowPolicy denies all source queues."
    if permission == "byQueue" and source_arn not in policy.get("sourceQueueArns", []):
        return "The dead letter target's RedriveAllowPolicy does not allow this source queue."
    return None
