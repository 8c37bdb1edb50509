"""Queue records as the queue service reads and writes them: lookups, and changes that
are applied again to a fresh read when another writer got there first."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence

from chalicelib.clock import Clock
from chalicelib.clusters.manager import Placement, default_only
from chalicelib.clusters.shards import SWITCH_MS
from chalicelib.domain.exceptions import ConcurrentChangeError
from chalicelib.domain.queues import QueueRecord, QueueStatus, parse_queue_arn, queue_id_of
from chalicelib.metadata.repository import QueueRepository
from chalicelib.service.exceptions import QueueDoesNotExistError, ServiceUnavailableError
from chalicelib.service.messages import MessageService
from chalicelib.service.purges import PurgeService

# A metadata write that loses its version check is applied again to a fresh read, this
# many times in all, with a short random pause between tries so racing writers spread out.
WRITE_ATTEMPTS = 8
WRITE_PAUSE_S = 0.01

logger = logging.getLogger("dmq.service")


class QueueRecords:
    """Lookups and guarded changes of queue records (the queue service's base)."""

    def __init__(
        self, repo: QueueRepository, messages: MessageService, clock: Clock,
        place: Placement = default_only,
        regions: Sequence[str] = (), max_queues: int = 0, switch_ms: int = SWITCH_MS,
    ) -> None:
        # A FIFO resharding's switch is this far ahead: longer than a front end keeps an
        # older copy of the queue record (`fifo.ranges`).
        self._switch_ms = switch_ms
        self._regions = tuple(regions)
        self._max_queues = max_queues  # per account and region (0: no quota)
        self._repo = repo
        self._messages = messages
        self._clock = clock
        self._place = place
        # Removes purged and deleted queues' messages in the background (None: the
        # requests remove them, as a test's service built without one does).
        self.purges: PurgeService | None = None

    # -- lookup ------------------------------------------------------------------------
    def get(self, account: str, name: str) -> QueueRecord:
        """The active queue, or QueueDoesNotExist."""
        return self.active(self._repo.get(queue_id_of(account, name)))

    @staticmethod
    def active(record: QueueRecord | None) -> QueueRecord:
        """The record if it is of an active queue, or QueueDoesNotExist."""
        if record is None or record.status is not QueueStatus.ACTIVE:
            raise QueueDoesNotExistError()
        return record

    def find(self, queue_id: str, fresh: bool = False) -> QueueRecord | None:
        """The record of a queue in this region, whatever its status, or None."""
        return self._repo.get(queue_id, fresh=fresh)

    def by_arn(self, arn: str) -> QueueRecord | None:
        """The active queue with this ARN, or None."""
        parts = parse_queue_arn(arn)
        if parts is None:
            return None
        record = self._repo.get(queue_id_of(parts[1], parts[2]))
        if record is None or record.status is not QueueStatus.ACTIVE:
            return None
        return record

    def _update(
        self, queue: QueueRecord, change: Callable[[QueueRecord], QueueRecord], count: int = 0,
    ) -> QueueRecord:
        """Save `change(queue)`; when another writer got there first, apply the change
        again to a fresh read (QueueDoesNotExist once the queue is gone), a bounded number
        of times, then ask the client to retry (503, which the SDKs retry)."""
        current = queue
        for attempt in range(WRITE_ATTEMPTS):
            changed = change(current)
            if changed is current:
                return current
            try:
                return self._repo.save(changed, count=count)
            except ConcurrentChangeError:
                if attempt + 1 < WRITE_ATTEMPTS:
                    time.sleep(random.uniform(0, WRITE_PAUSE_S * (attempt + 1)))
            fresh = self._repo.get(queue.queue_id, fresh=True)
            if fresh is None or fresh.status is not QueueStatus.ACTIVE:
                raise QueueDoesNotExistError()
            current = fresh
        raise contended(queue.queue_id)


def contended(queue_id: str) -> ServiceUnavailableError:
    """The 503 of a record that kept changing under every write (the SDKs retry it)."""
    logger.warning("metadata of %s kept changing under %d writes", queue_id, WRITE_ATTEMPTS)
    return ServiceUnavailableError(
        "The queue was changed by other requests at the same time; retry the request.")
