"""Changes to a queue beside its SQS attributes: its shards (the internal cluster
manager's resizes, an admin's spread onto another cluster, drained shards forgotten), its
Policy's permissions, and its tags."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from chalicelib.clusters.shards import reshaped, split
from chalicelib.domain.exceptions import ConcurrentChangeError
from chalicelib.domain.queues import QueueRecord
from chalicelib.fifo.service import is_fifo
from chalicelib.service import attributes as attrs
from chalicelib.service import permissions
from chalicelib.service.exceptions import InvalidAttributeValueError
from chalicelib.service.queue_records import QueueRecords
from chalicelib.service.tags import check_tag_request, check_tags, check_untag_request


class QueueChanges(QueueRecords):
    """Shards, permissions and tags of a queue."""

    # -- shards (the internal cluster manager) -----------------------------------------
    def set_shard_count(self, queue: QueueRecord, count: int) -> QueueRecord:
        """Scale a queue out or in; shards scaled in drain before they are forgotten (a
        FIFO queue's split and merge hash ranges: `reshaped`)."""
        now = self._clock.now_ms()
        return self._update(queue, lambda q: q.with_changes(
            shards=reshaped(q, count, self._new_shard_cluster(q), now, self._switch_ms),
            modified_ms=now))

    def split(self, queue: QueueRecord, cluster: str) -> QueueRecord:
        """Spread a hot queue onto another cluster: as many new shards there as it has."""
        if is_fifo(queue):
            raise _fixed_shards()
        now = self._clock.now_ms()

        def spread(current: QueueRecord) -> QueueRecord:
            if any(s.cluster == cluster for s in current.active_shards):
                return current
            return current.with_changes(shards=split(current.shards, cluster),
                                        modified_ms=now)

        return self._update(queue, spread)

    def draining_queues(self) -> tuple[QueueRecord, ...]:
        """Active queues with shards still draining (a back-end sweep, never a request)."""
        return tuple(q for q in self._repo.scan_active() if len(q.shards) > q.shard_count)

    def forget_drained(self, queue: QueueRecord) -> QueueRecord:
        """Drop draining shards that are empty and past the grace period."""
        gone = {s.id for s in self._messages.drained_shards(queue)}
        if not gone:
            return queue
        kept = tuple(s for s in queue.shards if s.id not in gone)
        try:
            return self._repo.save(queue.with_changes(shards=kept))
        except ConcurrentChangeError:
            return queue  # changed meanwhile: the next sweep looks again

    def _new_shard_cluster(self, queue: QueueRecord) -> str:
        """New shards join the cluster that holds most of the queue's active shards."""
        clusters = [s.cluster for s in queue.active_shards] or [s.cluster for s in queue.shards]
        return max(set(clusters), key=clusters.count) if clusters else self._place(
            queue.queue_id)

    # -- permissions -----------------------------------------------------------------------
    def add_permission(
        self, queue: QueueRecord, label: str, account_ids: Sequence[str], actions: Sequence[str]
    ) -> None:
        """AddPermission: a statement labelled `label` joins the queue's Policy."""
        permissions.check_label(label)
        permissions.check_grant(account_ids, actions)
        self._edit_policy(queue, lambda q: permissions.with_permission(
            q.attributes.get("Policy", ""), q.arn, label, account_ids, actions))

    def remove_permission(self, queue: QueueRecord, label: str) -> None:
        """RemovePermission: the statement labelled `label` leaves the queue's Policy."""
        self._edit_policy(queue, lambda q: permissions.without_permission(
            q.attributes.get("Policy", ""), q.arn, label))

    def _edit_policy(self, queue: QueueRecord, edit: Callable[[QueueRecord], str]) -> None:
        """Apply a Policy edit to the current record (again after a concurrent write)."""
        now = self._clock.now_ms()

        def edited(current: QueueRecord) -> QueueRecord:
            policy = edit(current)
            changed = {k: v for k, v in current.attributes.items() if k != "Policy"}
            if policy:
                changed["Policy"] = policy
            return current.with_changes(attributes=changed, modified_ms=now)

        self._update(queue, edited)

    # -- tags --------------------------------------------------------------------------------
    def tag(self, queue: QueueRecord, tags: Mapping[str, str]) -> None:
        """TagQueue: add or overwrite tags (at most 50 per queue)."""
        check_tag_request(tags)
        check_tags(tags, queue.name)
        check_tags({**queue.tags, **tags}, queue.name)

        def tagged(current: QueueRecord) -> QueueRecord:
            combined = {**current.tags, **tags}
            check_tags(combined, queue.name)
            return current.with_changes(tags=combined)

        self._update(queue, tagged)

    def untag(self, queue: QueueRecord, keys: Sequence[str]) -> None:
        """UntagQueue: remove tags; unknown keys are ignored."""
        check_untag_request(keys)
        self._update(queue, lambda q: q.with_changes(
            tags={k: v for k, v in q.tags.items() if k not in keys}))


def _fixed_shards() -> InvalidAttributeValueError:
    return InvalidAttributeValueError(
        f"Invalid value for the parameter {attrs.SHARD_COUNT}. Reason: A FIFO queue's shards "
        "split and merge ranges of message groups in place (set its shard count); they are "
        "not spread onto another cluster.")
