"""Request deduplication for standard queues (docs/request-dedup.md).

An SDK sends the same `amz-sdk-invocation-id` with every retry of one call. When a
SendMessage or SendMessageBatch to a standard queue carries one, the first request claims
a record of it (a conditional put), sends, and stores its response in the record; a retry
within the window finds the record and gets that response back instead of sending again.

The order is claim, send, record:
- a crash or failure before the send leaves a pending claim that the failed request
  releases, or whose lease runs out: the retry then sends (nothing was acknowledged);
- a crash after the send but before the record leaves a pending claim: a retry within the
  lease is told to retry (503), and one after the lease sends again. That duplicate, a
  crash in the few milliseconds between two writes followed by a retry, is the window that
  remains; standard queues deliver at least once, so it breaks no promise.

FIFO queues have their own deduplication (MessageDeduplicationId) and are left alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from chalicelib.backend.request_records import (
    DONE,
    Claim,
    RequestKey,
    RequestRecord,
    RequestRecords,
)
from chalicelib.clock import Clock
from chalicelib.domain.exceptions import StoreError, StoreUnavailableError
from chalicelib.domain.queues import QueueRecord
from chalicelib.service.exceptions import ServiceUnavailableError
from chalicelib.service.fifo import is_fifo

WINDOW_MS = 5 * 60 * 1000  # a retry within 5 minutes of the first request is answered
# A pending claim is held this long: longer than any request can run (Lambda's timeout is
# 30 s), so a claim is taken over only from a request that is gone.
LEASE_MS = 60_000
WAIT_S = 2.0  # how long a retry waits for a first attempt still under way
POLL_S = 0.1
Response = dict[str, Any]
logger = logging.getLogger(__name__)


def fingerprint(action: str, params: Mapping[str, Any]) -> str:
    """A digest of a request's action and parameters: a retry has the same one."""
    text = json.dumps([action, params], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RequestDedup:
    """Serves a send request once per invocation id and queue, within the window."""

    def __init__(self, records: RequestRecords, clock: Clock,
                 sleep: Callable[[float], None] = time.sleep, window_ms: int = WINDOW_MS,
                 lease_ms: int = LEASE_MS, wait_s: float = WAIT_S) -> None:
        self._records = records
        self._clock = clock
        self._sleep = sleep
        self._window_ms = window_ms
        self._lease_ms = lease_ms
        self._wait_s = wait_s

    def once(self, queue: QueueRecord, caller: str, action: str, invocation_id: str | None,
             params: Mapping[str, Any], send: Callable[[], Response]) -> Response:
        """`send()`'s response; for a retry of a request already served, that request's."""
        if not invocation_id or is_fifo(queue):
            return send()
        key = RequestKey(caller, queue.queue_id, action, invocation_id)
        digest = fingerprint(action, params)
        token = uuid.uuid4().hex
        try:
            claim = self._records.claim(key, token, digest, self._clock.now_ms(),
                                        self._lease_ms, self._window_ms)
        except StoreUnavailableError:
            # The store did not answer within its budget: the send would wait as long
            # again. Nothing is sent; the 503 this becomes is retried by the SDK. (Should
            # the claim have landed before the timeout, a retry waits out its lease.)
            raise
        except StoreError:
            # Refused (throttled, say), the claim may or may not have been written. Send
            # anyway: completing under this token still finds the claim if it was written.
            logger.warning("request record for %s not written; sending without it", action)
            claim = Claim(True)
        if claim.claimed:
            return self._serve(key, token, send)
        if claim.existing is not None and claim.existing.fingerprint != digest:
            return send()  # the same id with other parameters: not a retry
        return self._first_response(key, claim.existing)

    def _serve(self, key: RequestKey, token: str, send: Callable[[], Response]) -> Response:
        """Send, then record the response; a failed send releases the claim."""
        try:
            response = send()
        except Exception:
            with suppress(StoreError):  # a claim left behind ends with its lease
                self._records.release(key, token)
            raise
        try:
            self._records.complete(key, token, response)
        except StoreError:
            # The messages are stored: the client gets its answer. A retry (only if this
            # answer is lost too) meets the pending claim; see the module docstring.
            logger.warning("request record for %s not completed", key.action)
        return response

    def _first_response(self, key: RequestKey, record: RequestRecord | None) -> Response:
        """The recorded response, waiting a little for a first attempt still under way."""
        deadline = time.monotonic() + self._wait_s
        while record is not None and record.state != DONE and time.monotonic() < deadline:
            self._sleep(POLL_S)
            record = self._records.read(key)
        if record is None or record.state != DONE or record.response is None:
            raise ServiceUnavailableError(
                "An earlier attempt of this request is still being served (the same "
                "amz-sdk-invocation-id); retry the request.")
        return record.response
