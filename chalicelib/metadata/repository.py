"""The queue registry: metadata records behind a small repository and a TTL cache."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError
from pynamodb.exceptions import PutError, PynamoDBException

from chalicelib.domain.exceptions import (
    ConcurrentChangeError,
    StoreError,
    StoreThrottledError,
    StoreUnavailableError,
)
from chalicelib.domain.queues import (
    ConnectionBudget,
    QueueRecord,
    QueueStatus,
    Shard,
    shards_from_text,
    shards_to_text,
)
from chalicelib.metadata.models import QueueModel, model_for


@contextmanager
def _translate() -> Iterator[None]:
    try:
        yield
    except PutError as exc:
        if _code(exc) == "ConditionalCheckFailedException":
            raise ConcurrentChangeError(str(exc)) from exc
        raise _store_error(exc) from exc
    except PynamoDBException as exc:
        raise _store_error(exc) from exc


def _code(exc: PynamoDBException) -> str:
    """The DynamoDB error code behind a PynamoDB error ("" for a connection failure, whose
    cause has no response: PynamoDB's own `cause_response_code` fails on those)."""
    response = getattr(exc.cause, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def _store_error(exc: PynamoDBException) -> StoreError:
    if isinstance(exc.cause, BotoCoreError):  # a timeout or a refused connection
        return StoreUnavailableError(str(exc))
    code = _code(exc)
    if "Throttl" in code or code == "ProvisionedThroughputExceededException":
        return StoreThrottledError(str(exc))
    return StoreError(str(exc))


def _to_record(model: QueueModel) -> QueueRecord:
    return QueueRecord(
        account=model.account,
        name=model.name,
        region=model.region,
        attributes={k: str(v) for k, v in model.attributes.as_dict().items()},
        tags={k: str(v) for k, v in model.tags.as_dict().items()},
        created_ms=int(model.created_ms),
        modified_ms=int(model.modified_ms),
        shards=(shards_from_text(model.shard_map) if model.shard_map
                else tuple(Shard(i) for i in range(int(model.shard_count)))),
        status=QueueStatus(model.status),
        deleted_ms=int(model.deleted_ms),
        purged_ms=int(model.purged_ms),
        home_region=model.home_region or "",
        replicas=tuple(r for r in (model.replicas or "").split(",") if r),
        replication_mode=model.replication_mode or "async",
        epoch=int(model.epoch or 0),
        version=int(model.version or 0),
    )


class QueueRepository:
    """Reads and writes queue records; a per-container cache serves hot reads."""

    def __init__(
        self, table: str, region: str, host: str | None, cache_seconds: float = 5.0,
        credentials: tuple[str, str] | None = None, budget: ConnectionBudget | None = None,
    ) -> None:
        self._model = model_for(table, region, host, credentials, budget or ConnectionBudget())
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, QueueRecord | None]] = {}
        self._lock = threading.Lock()

    def get(self, queue_id: str, fresh: bool = False) -> QueueRecord | None:
        """The record of a queue, or None. `fresh` bypasses the cache; misses are never cached."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(queue_id)
        if cached and not fresh and now - cached[0] < self._cache_seconds:
            return cached[1]
        with _translate():
            try:
                record = _to_record(self._model.get(queue_id))
            except self._model.DoesNotExist:
                # A miss is not cached: a queue created in (or replicated to) this region
                # must be found at once, as ListQueues, which reads the table, finds it.
                with self._lock:
                    self._cache.pop(queue_id, None)
                return None
        with self._lock:
            self._cache[queue_id] = (now, record)
        return record

    def save(self, record: QueueRecord) -> QueueRecord:
        """Write a record if nobody changed it since it was read (version check)."""
        model = self._to_model(record)
        with _translate():
            model.save()
        saved = record.with_changes(version=int(model.version))
        with self._lock:
            self._cache[record.queue_id] = (time.monotonic(), saved)
        return saved

    def adopt(self, record: QueueRecord) -> QueueRecord:
        """Overwrite the local record with another region's (a rejoining old home)."""
        model = self._to_model(record)
        with _translate():
            model.save(add_version_condition=False)
        saved = record.with_changes(version=int(model.version))
        with self._lock:
            self._cache[record.queue_id] = (time.monotonic(), saved)
        return saved

    def _to_model(self, record: QueueRecord) -> QueueModel:
        model = self._model(
            record.queue_id,
            account=record.account,
            name=record.name,
            region=record.region,
            attributes=dict(record.attributes),
            tags=dict(record.tags),
            created_ms=record.created_ms,
            modified_ms=record.modified_ms,
            shard_count=record.shard_count,
            shard_map=shards_to_text(record.shards),
            status=record.status.value,
            deleted_ms=record.deleted_ms,
            purged_ms=record.purged_ms,
            home_region=record.home,
            replicas=",".join(record.replicas) or None,
            replication_mode=record.replication_mode,
            epoch=record.epoch,
        )
        if record.version:
            model.version = record.version
        return model

    def list_active(
        self, account: str, prefix: str, limit: int, after_name: str | None
    ) -> tuple[list[QueueRecord], str | None]:
        """Active queues of an account whose names start with `prefix`, by name."""
        found: list[QueueRecord] = []
        start: dict[str, Any] | None = (
            {"queue_id": {"S": f"{account}/{after_name}"}, "account": {"S": account},
             "name": {"S": after_name}}
            if after_name else None
        )
        condition = self._model.name.startswith(prefix) if prefix else None
        with _translate():
            results = self._model.account_index.query(
                account, range_key_condition=condition, last_evaluated_key=start,
                filter_condition=self._model.status == QueueStatus.ACTIVE.value,
            )
            for model in results:
                found.append(_to_record(model))
                if len(found) > limit:
                    break
        if len(found) > limit:
            return found[:limit], found[limit - 1].name
        return found, None

    def all_active(self, account: str) -> list[QueueRecord]:
        """Every active queue of an account (for reverse lookups such as DLQ sources)."""
        records, _ = self.list_active(account, "", 1_000_000, None)
        return records

    def scan_active(self) -> list[QueueRecord]:
        """Every active queue of every account (back-end sweeps only, never a request)."""
        with _translate():
            return [
                _to_record(m)
                for m in self._model.scan(self._model.status == QueueStatus.ACTIVE.value)
            ]
