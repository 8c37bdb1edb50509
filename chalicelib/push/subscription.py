"""Push subscriptions: what a subscriber is, and how an invocation's answer is read.

A subscription delivers a queue's messages to a target (an HTTP(S) endpoint, or a
function of the deployment) in batches shaped like Lambda's SQS event, with the
semantics of Lambda's SQS event source mapping. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"


@dataclass(frozen=True)
class Subscription:
    """One subscriber of a queue (the fields of a Lambda event source mapping)."""

    sub_id: str
    queue_id: str
    queue_arn: str
    endpoint: str | None
    function_name: str | None
    batch_size: int
    window_s: int
    report_failures: bool
    max_concurrency: int | None
    enabled: bool
    modified_ms: int

    def to_json(self) -> dict[str, Any]:
        """The subscription as the admin API shows it (event source mapping names)."""
        shown: dict[str, Any] = {
            "UUID": self.sub_id, "QueueId": self.queue_id, "EventSourceArn": self.queue_arn,
            "BatchSize": self.batch_size,
            "MaximumBatchingWindowInSeconds": self.window_s,
            "FunctionResponseTypes": [REPORT_BATCH_ITEM_FAILURES] if self.report_failures
            else [],
            "State": "Enabled" if self.enabled else "Disabled",
            "LastModified": self.modified_ms,
        }
        if self.endpoint is not None:
            shown["Endpoint"] = self.endpoint
        if self.function_name is not None:
            shown["FunctionName"] = self.function_name
        if self.max_concurrency is not None:
            shown["ScalingConfig"] = {"MaximumConcurrency": self.max_concurrency}
        return shown


@dataclass(frozen=True)
class BatchItem:
    """A delivered message as the failure rules see it: its id and FIFO group."""

    message_id: str
    group_id: str | None


@dataclass(frozen=True)
class Invocation:
    """What a target did with a batch: `ok` False when it raised, timed out or answered
    with an HTTP error; otherwise its response (None when it returned nothing)."""

    ok: bool
    response: object = None
    error: str = ""


def reported_failures(response: object, known_ids: set[str]) -> set[str] | None:
    """The message ids a ReportBatchItemFailures response names as failed, or None when
    the response makes the whole batch a failure.

    As Lambda reads it: no response, an empty or null `batchItemFailures` are a complete
    success; a response that is not an object, a failure entry without a usable
    `itemIdentifier` (missing, null, empty, not a string, a bad key name) or naming a
    message that is not in the batch fail the whole batch."""
    if response is None:
        return set()
    if not isinstance(response, dict):
        return None
    failures = response.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return None
    named: set[str] = set()
    for entry in failures:
        if not isinstance(entry, dict):
            return None
        item = entry.get("itemIdentifier")
        if not isinstance(item, str) or not item or item not in known_ids:
            return None
        named.add(item)
    return named


def failed_messages(items: Sequence[BatchItem], invocation: Invocation,
                    report_failures: bool, fifo: bool) -> set[str]:
    """The ids of the batch's messages that are not to be deleted.

    A failed invocation fails them all. With ReportBatchItemFailures the response names
    the failed ones; otherwise a successful invocation succeeds for all. On a FIFO queue
    a group stops at its first failure: the group's later messages in the batch fail
    too, so that none is deleted ahead of one that will be delivered again."""
    every = {item.message_id for item in items}
    if not invocation.ok:
        return every
    failed: set[str] = set()
    if report_failures:
        named = reported_failures(invocation.response, every)
        if named is None:
            return every
        failed = named
    if fifo and failed:
        stopped: set[str | None] = set()
        for item in items:
            if item.group_id in stopped:
                failed.add(item.message_id)
            elif item.message_id in failed:
                stopped.add(item.group_id)
    return failed
