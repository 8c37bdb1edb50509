"""The queue registry: metadata records behind a small repository and a TTL cache."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError
from pynamodb.exceptions import PutError, PynamoDBException, TransactWriteError
from pynamodb.transactions import TransactWrite

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
from chalicelib.dynamo_errors import translate_errors
from chalicelib.metadata import queue_counts
from chalicelib.metadata.catalogue_version import CatalogueVersion
from chalicelib.metadata.models import (
    ACCOUNT_INDEX,
    QueueModel,
    model_for,
    on_shared_models,
    use_client,
)

logger = logging.getLogger("dmq.queues")
# Transactions on an account's queue counter that conflict are tried this many times in
# all, after a random pause of up to this long times the attempt.
COUNTED_ATTEMPTS = 6
COUNTED_PAUSE_S = 0.02
# The catalogue (every active queue, for background passes and the views of all queues)
# is read again when its version item moved, and at least this often whatever it says.
CATALOGUE_KEY = "catalogue"
CATALOGUE_MAX_AGE_S = 600.0
# Where asked (`keep_s`, the local server), a cached record past its time-to-live is still
# served while the catalogue's version has not moved since before it was read (every write
# of a queue record moves it); the version is read for that at most every VERSION_CHECK_S
# (or the time-to-live, when shorter).
VERSION_CHECK_S = 1.0
KEPT_MAX_S = 30.0  # the local server's `keep_s` (below the 60 s a drained shard is kept)


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
    """Reads and writes queue records; a per-container cache serves hot reads: a record
    for `cache_seconds`, and after that, up to `keep_s` (0: not at all), for as long as
    the catalogue's version, read at most once a second for all of them, shows that no
    queue record was written since, so that hundreds of busy queues do not each cost a
    read every few seconds. `cache_seconds` 0 keeps nothing: every read goes to the store.
    (A write whose move of the version failed is logged, and stays unseen by the other
    processes' kept records for up to `keep_s`: Lambda keeps none past their time, since
    a front end's older record must be gone by a resize's switch, `cache_seconds` plus a
    second after it.)

    `client_wrapper`, when given, wraps each of PynamoDB's botocore clients once (the
    lean store client, `Clients.lean_wrapper`)."""

    def __init__(
        self, table: str, region: str, host: str | None, cache_seconds: float = 5.0,
        credentials: tuple[str, str] | None = None, budget: ConnectionBudget | None = None,
        counts_table: str | None = None, client_wrapper: Callable[[Any], Any] | None = None,
        keep_s: float = 0.0,
    ) -> None:
        budget = budget or ConnectionBudget()
        self._model = model_for(table, region, host, credentials, budget)
        self._table = table
        self._cache_seconds = cache_seconds
        # queue id: (when it was read, the record, the catalogue's version before the read)
        # Read and written without a lock (one dict operation each, atomic under the
        # interpreter's lock): a lock taken by every request convoys under load.
        self._cache: dict[str, tuple[float, QueueRecord, int | None]] = {}
        self._lock = threading.Lock()  # for the version's compare-and-set
        self._reading_version = threading.Lock()  # one version read at a time
        self._keep_s = keep_s if cache_seconds > 0 else 0.0
        self._version_check_s = min(VERSION_CHECK_S, cache_seconds)
        # The catalogue's version as last read: (monotonic time, version; None: unknown).
        self._seen_version: tuple[float, int | None] = (float("-inf"), None)
        # The accounts' queue counters (queue_counts.py), in the control table.
        self._counts = (queue_counts.count_model_for(counts_table, region, host, credentials,
                                                     budget) if counts_table else None)
        self._connection = queue_counts.connection_for(region, host, credentials, budget)
        self._counted: set[str] = set()  # accounts whose counter is known to exist
        self._version = CatalogueVersion(self._move_version)
        connections = [self._model._get_connection().connection, self._connection]
        if self._counts is not None:
            connections.append(self._counts._get_connection().connection)
        for connection in connections:
            on_shared_models(connection)
            if client_wrapper is not None:
                use_client(connection, client_wrapper)
        # The last catalogue read: (monotonic time, version it was read at, records).
        self._catalogue: tuple[float, int, tuple[QueueRecord, ...]] | None = None
        self._catalogue_lock = threading.Lock()

    def get(self, queue_id: str, fresh: bool = False) -> QueueRecord | None:
        """The record of a queue, or None. `fresh` bypasses the cache; misses are never cached."""
        now = time.monotonic()
        cached = self._cache.get(queue_id)
        if cached and not fresh and self._still_good(cached, now):
            return cached[1]
        version = self._recent_version(now)
        with _translate():
            try:
                record = _to_record(self._model.get(queue_id))
            except self._model.DoesNotExist:
                # A miss is not cached: a queue created in (or replicated to) this region
                # must be found at once, as ListQueues, which reads the table, finds it.
                self._cache.pop(queue_id, None)
                return None
        self._cache[queue_id] = (now, record, version)
        return record

    def _still_good(self, cached: tuple[float, QueueRecord, int | None], now: float) -> bool:
        """Whether a cached record may be served: within its time-to-live, or no queue
        record was written since before it was read (the catalogue's version)."""
        at, _, version = cached
        age = now - at
        if age < self._cache_seconds:
            return True
        if age >= self._keep_s:
            return False
        current = self._current_version(now)  # also what the record read next is kept under
        return version is not None and current == version

    def _recent_version(self, now: float) -> int | None:
        """The catalogue's version as read within the check interval (None: not read that
        recently, so a record read now is kept only for its time-to-live). A miss does not
        read it: a record that is not cached costs one store request, as before."""
        if self._keep_s <= 0:
            return None
        at, version = self._seen_version
        return version if now - at < self._version_check_s else None

    def _current_version(self, now: float) -> int | None:
        """The catalogue's version, read again when the last read is older than the check
        interval (None: there is no control table). A record read after it is kept under
        it: a version older than the one the record's read would see only voids the entry
        sooner. While another request reads it, None: the record is read again instead
        (no queue of requests behind one read)."""
        at, version = self._seen_version
        if now - at < self._version_check_s:
            return version
        if not self._reading_version.acquire(blocking=False):
            return None
        try:
            version = self._catalogue_version()  # a sick store fails the request here, once
            self._remember_version(now, version)
        finally:
            self._reading_version.release()
        return version

    def _remember_version(self, at: float, version: int | None) -> None:
        with self._lock:
            if at >= self._seen_version[0]:
                self._seen_version = (at, version)

    def known(self, queue_id: str) -> bool:
        """Whether this process has met the queue's record (cached at any age): a hint,
        never an answer."""
        cached = self._cache.get(queue_id)
        return cached is not None and cached[1] is not None

    def save(self, record: QueueRecord, count: int = 0, quota: int = 0) -> QueueRecord:
        """Write a record if nobody changed it since it was read (version check). `count`
        (1: a queue made, -1: one deleted) moves the account's queue counter in the same
        transaction; QueueQuotaReachedError when adding would pass `quota` (0: none). A
        record with no version (a new queue's) is written only where none exists."""
        model = self._to_model(record)
        if count and self._counts is not None:
            self._save_counted(model, record.account, count, quota)
        else:
            with _translate():
                model.save()
        saved = record.with_changes(version=int(model.version))
        self._cache[record.queue_id] = (time.monotonic(), saved, None)
        self._changed_quietly()
        return saved

    def _save_counted(self, model: QueueModel, account: str, count: int, quota: int) -> None:
        """The record and the account's counter in one transaction. Transactions that
        touch the counter at once conflict (DynamoDB cancels all but one): those are tried
        again, a few times, after a short random pause."""
        counts = self._counts
        assert counts is not None
        self._start_count(account)
        condition = counts.n < quota if count > 0 and quota > 0 else None
        for attempt in range(COUNTED_ATTEMPTS):
            try:
                with TransactWrite(connection=self._connection) as transaction:
                    transaction.save(model)
                    transaction.update(counts(queue_counts.key_of(account)),
                                       actions=[counts.n.add(count)], condition=condition)
                return
            except TransactWriteError as exc:
                reasons = [r.code if r else None for r in (exc.cancellation_reasons or [])]
                if reasons and reasons[0] == "ConditionalCheckFailed":  # before the quota:
                    raise ConcurrentChangeError(str(exc)) from exc  # it exists: no new one
                if len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
                    raise queue_counts.QueueQuotaReachedError(account) from exc
                if "TransactionConflict" not in reasons or attempt + 1 == COUNTED_ATTEMPTS:
                    raise _store_error(exc) from exc
            except PynamoDBException as exc:
                raise _store_error(exc) from exc
            time.sleep(random.uniform(0, COUNTED_PAUSE_S * (attempt + 1)))

    def _start_count(self, account: str) -> None:
        """Make sure the account's counter exists: one read per account and process; a
        missing one starts from the account's active queues (the account index, once)."""
        counts = self._counts
        if counts is None or account in self._counted:
            return
        with _translate():
            try:
                counts.get(queue_counts.key_of(account), consistent_read=True)
            except counts.DoesNotExist:
                active = self._model.account_index.count(
                    account, filter_condition=self._model.status == QueueStatus.ACTIVE.value)
                try:
                    counts(queue_counts.key_of(account), n=active).save(
                        condition=counts.key.does_not_exist())
                except PutError as exc:  # started meanwhile by another process
                    if _code(exc) != "ConditionalCheckFailedException":
                        raise
        self._counted.add(account)

    def queue_count(self, account: str) -> int | None:
        """The account's queue counter (None before it was started)."""
        if self._counts is None:
            return None
        with _translate():
            try:
                return int(self._counts.get(queue_counts.key_of(account),
                                            consistent_read=True).n)
            except self._counts.DoesNotExist:
                return None

    def adopt(self, record: QueueRecord) -> QueueRecord:
        """Overwrite the local record with another region's (a rejoining old home)."""
        model = self._to_model(record)
        with _translate():
            model.save(add_version_condition=False)
        saved = record.with_changes(version=int(model.version))
        self._cache[record.queue_id] = (time.monotonic(), saved, None)
        self._changed_quietly()
        return saved

    def changed(self) -> None:
        """A queue record was written (here, or by replication): move the catalogue's
        version, so every process reads the catalogue again at its next use (writers at
        the same time share one move: `catalogue_version`)."""
        if self._counts is None:
            with self._catalogue_lock:
                self._catalogue = None
            return
        self._version.moved()

    def _move_version(self) -> None:
        counts = self._counts
        assert counts is not None
        with _translate():
            counts(CATALOGUE_KEY).update(actions=[counts.n.add(1)])

    def _changed_quietly(self) -> None:
        """`changed`, after a write that succeeded: a failure is logged, not raised (the
        catalogue is read again within CATALOGUE_MAX_AGE_S anyway)."""
        try:
            self.changed()
        except StoreError:
            logger.warning("the catalogue version could not be moved", exc_info=True)

    def _catalogue_version(self) -> int | None:
        """The catalogue's version (None without a control table: always read again)."""
        if self._counts is None:
            return None
        with _translate():
            try:
                return int(self._counts.get(CATALOGUE_KEY, consistent_read=True).n)
            except self._counts.DoesNotExist:
                return 0

    def catalogue(self) -> tuple[QueueRecord, ...]:
        """Every active queue of every account, by queue id: the last scan while the
        catalogue's version item has not moved (one GetItem) and it is younger than
        CATALOGUE_MAX_AGE_S, else a scan. The version is read before the scan, so a write
        the scan may have missed moves it past what the scan is kept under."""
        with self._catalogue_lock:
            began = time.monotonic()
            version = self._catalogue_version()
            self._remember_version(began, version)
            now = time.monotonic()
            kept = self._catalogue
            if (kept is not None and version is not None and kept[1] == version
                    and now - kept[0] < CATALOGUE_MAX_AGE_S):
                return kept[2]
            records = tuple(sorted(self._scan(), key=lambda r: r.queue_id))
            if version is not None:
                self._catalogue = (now, version, records)
            return records

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

    def _account_queues(self, account: str) -> Iterator[QueueModel]:
        """An account's active queues, by name."""
        with _translate():
            yield from self._model.account_index.query(
                account, filter_condition=self._model.status == QueueStatus.ACTIVE.value)

    def list_names(
        self, account: str, prefix: str, limit: int, after_name: str | None
    ) -> tuple[list[str], str | None]:
        """The names of an account's active queues that start with `prefix`, by name, up
        to `limit`, and the name to go on after (None: no more). Only the names are read
        back, not whole records: a page of 1,000 is one small answer to parse."""
        names: list[str] = []
        query: dict[str, Any] = {
            "TableName": self._table, "IndexName": ACCOUNT_INDEX,
            "KeyConditionExpression": "account = :account"
                                      + (" AND begins_with(#name, :prefix)" if prefix else ""),
            "FilterExpression": "#status = :active", "ProjectionExpression": "#name",
            "ExpressionAttributeNames": {"#name": "name", "#status": "status"},
            "ExpressionAttributeValues": {
                ":account": {"S": account}, ":active": {"S": QueueStatus.ACTIVE.value},
                **({":prefix": {"S": prefix}} if prefix else {})},
        }
        if after_name:
            query["ExclusiveStartKey"] = {"queue_id": {"S": f"{account}/{after_name}"},
                                          "account": {"S": account}, "name": {"S": after_name}}
        client: Any = self._connection.client  # PynamoDB's botocore client, its budget
        while len(names) <= limit:
            # The store's own query: names only, no model made per queue (making a
            # thousand PynamoDB models took half of a ListQueues).
            with translate_errors():  # read no more than the page needs
                page = client.query(**query, Limit=limit + 1 - len(names))
            names += [str(item["name"]["S"]) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if len(names) > limit:
            return names[:limit], names[limit - 1]
        return names, None

    def all_active(self, account: str) -> list[QueueRecord]:
        """Every active queue of an account (for reverse lookups such as DLQ sources)."""
        return [_to_record(m) for m in self._account_queues(account)]

    def scan_active(self) -> list[QueueRecord]:
        """Every active queue of every account (back-end sweeps and the views of every
        queue, never a request): the catalogue."""
        return list(self.catalogue())

    def _scan(self) -> list[QueueRecord]:
        """Every active queue of every account, read from the table (a Scan)."""
        with _translate():
            return [
                _to_record(m)
                for m in self._model.scan(self._model.status == QueueStatus.ACTIVE.value)
            ]
