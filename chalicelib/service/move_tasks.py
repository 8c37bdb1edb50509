"""Message move tasks (dead-letter redrive): StartMessageMoveTask, ListMessageMoveTasks,
CancelMessageMoveTask, and the back-end work that moves the messages.

The task lives in the control table (`metadata.move_tasks`); the scheduled handler calls
`advance`, which runs every running task a bounded step at a time. A step reads at most
what the task's rate allows from the head of each source shard, and moves those messages
in transactions that also count them on the task (`backend.dynamo_moves`), so a crash at
any point loses and duplicates nothing, and the next step resumes from what is stored.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from chalicelib.backend.dynamo_moves import Move
from chalicelib.clock import Clock
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.exceptions import StoreError
from chalicelib.domain.messages import Message, new_message_id
from chalicelib.domain.move_tasks import (
    BURST_MS,
    MAX_RATE,
    MAX_RESULTS,
    MIN_RATE,
    MIN_RESULTS,
    MoveTask,
    MoveTaskStatus,
    decode_handle,
    redriven,
)
from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.metadata.move_tasks import MoveTaskRepository, SourceBusyError
from chalicelib.service.exceptions import (
    InvalidParameterValueError,
    ResourceNotFoundError,
    UnsupportedOperationError,
)
from chalicelib.service.messages import MessageService
from chalicelib.service.moves_apart import ApartMoves
from chalicelib.service.queues import QueueService

logger = logging.getLogger("dmq.move_tasks")
# The FailureReason SQS gives a task whose destination queue no longer exists.
NO_QUEUE = "AWS.SimpleQueueService.NonExistentQueue"
# The most messages one step reads from one shard in one go (one Query, one BatchGetItem;
# they then move in transactions of 25).
PAGE = 100
# Pause between passes over the running tasks when `advance` runs for a while.
PASS_PAUSE_S = 0.2
_BUSY = ("There is already a task running. Only one active task is allowed for a source "
         "queue arn at a given time.")


def _missing(parameter: str) -> ResourceNotFoundError:
    return ResourceNotFoundError(
        f"The resource that you specified for the {parameter} parameter doesn't exist.")


class MoveTaskService:
    """The three move-task actions and the back-end steps that run the tasks."""

    def __init__(
        self, queues: QueueService, messages: MessageService, stores: ClusterStores,
        repo: MoveTaskRepository, clock: Clock, sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._queues = queues
        self._messages = messages
        self._stores = stores
        self._apart = ApartMoves(stores)
        self._repo = repo
        self._clock = clock
        self._sleep = sleep
        self._monotonic = monotonic
        self.running_seen = 0  # how many tasks the last pass of `advance` found running

    # -- actions -------------------------------------------------------------------------
    def start(
        self, source_arn: str, destination_arn: str | None, max_per_second: int | None,
    ) -> MoveTask:
        """StartMessageMoveTask: check as SQS does, then record a running task."""
        if max_per_second is not None and not MIN_RATE <= max_per_second <= MAX_RATE:
            raise InvalidParameterValueError(
                "Value for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: You must "
                f"enter a number that's between {MIN_RATE} and {MAX_RATE}.")
        source = self._queues.by_arn(source_arn)
        if source is None:
            raise _missing("SourceArn")
        if not self._queues.dead_letter_sources(source):
            raise InvalidParameterValueError(
                "Source queue must be configured as a Dead Letter Queue.")
        destination_arn = destination_arn or None
        if destination_arn:
            destination = self._queues.by_arn(destination_arn)
            if destination is None:
                raise _missing("DestinationArn")
            destination_arn = destination.arn
            if destination.queue_id == source.queue_id:
                raise InvalidParameterValueError(
                    "Source queue arn and destination queue arn cannot be the same.")
            if destination.name.endswith(".fifo") != source.name.endswith(".fifo"):
                raise InvalidParameterValueError(
                    "The source queue and destination queue must be of the same queue type.")
        source_arn = source.arn  # tasks are kept under the queue's own ARN
        if self._repo.active(source_arn) is not None:
            raise InvalidParameterValueError(_BUSY)
        now = self._clock.now_ms()
        task = MoveTask(
            task_id=str(uuid.uuid4()), source_arn=source_arn,
            destination_arn=destination_arn, max_per_second=max_per_second,
            status=MoveTaskStatus.RUNNING, started_ms=now,
            to_move=self._messages.counts(source, fresh=True).visible, paced_ms=now - BURST_MS,
        )
        try:
            self._repo.start(task)
        except SourceBusyError as exc:
            raise InvalidParameterValueError(_BUSY) from exc
        self.running_seen = max(self.running_seen, 1)  # a local scheduler runs the pass soon
        return task

    def list(self, source_arn: str, max_results: int | None) -> list[MoveTask]:
        """ListMessageMoveTasks: the source's newest tasks, newest first (1 by default)."""
        if max_results is not None and not MIN_RESULTS <= max_results <= MAX_RESULTS:
            raise InvalidParameterValueError(
                "Value for parameter MaxResults is invalid. Reason: You must enter a number "
                f"that's between {MIN_RESULTS} and {MAX_RESULTS}.")
        source = self._queues.by_arn(source_arn)
        if source is None:
            raise _missing("SourceArn")
        return self._repo.recent(source.arn, max_results or MIN_RESULTS)

    def cancel(self, handle: str) -> MoveTask:
        """CancelMessageMoveTask: a running task becomes CANCELLING (the back end then ends
        it as CANCELLED); the task as it stands, with the messages moved so far."""
        decoded = decode_handle(handle)
        if decoded is None:
            raise InvalidParameterValueError("Value for parameter TaskHandle is invalid.")
        task_id, source_arn = decoded
        source = self._queues.by_arn(source_arn)
        if source is None:
            raise _missing("SourceArn")
        task = self._repo.get(task_id)
        if task is None or task.source_arn != source.arn:
            raise ResourceNotFoundError("Task does not exist.")
        if task.status is MoveTaskStatus.CANCELLING:
            return task
        cancelled = self._repo.cancel(task_id)
        if cancelled is None:  # it ended (completed, failed or cancelled) meanwhile or before
            raise UnsupportedOperationError(
                "Only a task with the status RUNNING can be cancelled.")
        return cancelled

    # -- back end ------------------------------------------------------------------------
    def advance(self, run_s: float = 0.0) -> int:
        """Run every running task a step per pass, for `run_s` seconds at most (one pass
        when 0) or until none is left; return how many messages moved. A task whose step
        fails on a store error is left for the next pass: its moves are transactional."""
        deadline = self._monotonic() + run_s
        moved = 0
        while True:
            tasks = self._repo.running()
            self.running_seen = len(tasks)
            for task in tasks:
                try:
                    moved += self.step(task)
                except StoreError as exc:
                    logger.warning("move task %s: step failed (%r); it goes on next time",
                                   task.task_id, exc)
            if not tasks or self._monotonic() + PASS_PAUSE_S >= deadline:
                return moved
            self._sleep(PASS_PAUSE_S)

    def step(self, task: MoveTask) -> int:
        """One bounded step of one task; the number of messages it moved."""
        if task.status is MoveTaskStatus.CANCELLING:
            self._repo.finish(task, MoveTaskStatus.CANCELLED)
            return 0
        source = self._queues.by_arn(task.source_arn)
        destination = self._queues.by_arn(task.destination_arn) if task.destination_arn else None
        if source is None or (task.destination_arn and destination is None):
            self._repo.finish(task, MoveTaskStatus.FAILED, NO_QUEUE)
            return 0
        now = self._clock.now_ms()
        allowance = task.allowance(now)
        if allowance <= 0:
            return 0
        moved, found = 0, False
        for shard in source.shards:
            while moved < allowance:  # page by page, while the shard gives messages
                result = self._step_shard(task, source, shard, destination, allowance, moved,
                                          now)
                if result is None:
                    return moved
                found = found or result[1]
                moved += result[0]
                if not result[0]:
                    break
        if not found:
            self._repo.finish(task, MoveTaskStatus.COMPLETED)
        return moved

    def _step_shard(
        self, task: MoveTask, source: QueueRecord, shard: Shard,
        destination: QueueRecord | None, allowance: int, moved_before: int, now: int,
    ) -> tuple[int, bool] | None:
        """Move what the allowance leaves from the head of one shard: (moved, whether any
        visible message was there), or None when the task stopped (cancelled or failed)."""
        store = self._stores.of(shard.cluster)
        page = store.find_candidates(source.queue_id, shard.id, now,
                                     min(allowance - moved_before, PAGE), None)
        expired = [c.message_id for c in page.candidates if c.expires_ms <= now]
        if expired:
            store.delete_expired(source.queue_id, shard.id, expired)
        live = [c.message_id for c in page.candidates if c.expires_ms > now]
        if not live:
            return 0, bool(expired)
        messages = [m for m in store.read_messages(source.queue_id, shard.id, live)
                    if m.visible_at <= now and not m.is_expired(now)]
        moves: list[Move] = []
        for message in messages:
            target = destination or self._original_source(message)
            if target is None:
                if not moves:
                    self._repo.finish(task, MoveTaskStatus.FAILED, NO_QUEUE)
                    return None
                break
            moves.append(self._move_to(source, message, target, shard, now))

        def progress(done: int, n: int) -> dict[str, Any]:
            spent = moved_before + done + n
            return self._repo.progress_op(task, n, task.paced_after(spent, now))

        if self._apart.needed(shard.cluster, moves):  # no transaction spans the stores
            outcome = self._apart.move(
                shard.cluster, source.queue_id, shard.id,
                {c.message_id: c for c in page.candidates}, moves,
                lambda n: self._repo.add_progress(task, n, task.paced_after(moved_before + n,
                                                                            now)), now)
        else:
            outcome = store.move_many(source.queue_id, shard.id, moves, progress)
        if outcome.stopped:
            return None
        return outcome.moved, True

    def _original_source(self, message: Message) -> QueueRecord | None:
        arn = message.dead_letter_source_arn
        return self._queues.by_arn(arn) if arn else None

    def _move_to(self, source: QueueRecord, message: Message, target: QueueRecord,
                 shard: Shard, now: int) -> Move:
        """The move of one message into a shard of `target`, on the source's cluster when
        the target has a shard there. It gets a new id, so an encrypted message is opened
        and sealed again for the target (its ciphertext is bound to its id and queue)."""
        same = [s for s in target.active_shards if s.cluster == shard.cluster]
        placed = random.choice(same or list(target.active_shards))
        retention_ms = target.attribute_int("MessageRetentionPeriod") * 1000
        return Move(
            seen=message, target_table=self._stores.of(placed.cluster).table,
            target_queue_id=target.queue_id, target_shard=placed.id,
            message=self._seal(target, redriven(
                self._open(source, message), new_message_id(now), now, retention_ms)),
        )

    def _open(self, queue: QueueRecord, message: Message) -> Message:
        cipher = self._messages.cipher
        return cipher.open(queue, message) if cipher else message

    def _seal(self, queue: QueueRecord, message: Message) -> Message:
        cipher = self._messages.cipher
        return cipher.seal(queue, message) if cipher else message
