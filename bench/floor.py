"""The store's floor: what DynamoDB Local alone does with the item operations of DMQ's
message lifecycle, with nothing of DMQ in between.

The tables are DMQ's own (`infra/dmq.template.json`: the visibility index, the stream),
on a DynamoDB Local started as `make run` starts it. The requests are those DMQ makes for
a message sent, received and deleted in batches of ten (its DynamoDB counts per message
in the same lifecycle: 0.1 of each): producers write a batch in one transaction of
conditional puts; a consumer queries the visibility index for ten, claims them in one
transaction, reads the won items back with one consistent BatchGetItem, and deletes them
in one transaction; and, as DMQ's stream reader does (the counts, the audit archive and
the exports come from the stream), a reader takes the table's stream records with
GetRecords in a pass every 0.2 s. Each consumer
has a partition of its own, fed by the producers in turn: DMQ's receives share what one
read found (its frontier) instead of racing for the same candidates, so the floor has no
contention DMQ does not have. That is the lower bound of DMQ's lifecycle on this store.
The lifecycle's calls go through the client DMQ's own store calls use (the lean client of
`chalicelib/dynamo_client.py`, from `chalicelib.aws.Clients`), so the floor's client
costs no more CPU than DMQ's. The CPU time of DynamoDB Local and of this process's
clients is read from /proc, so the figures per message do not depend on what else the
machine runs.

Then the store calls behind one SendMessage, ReceiveMessage and DeleteMessage, one at a
time, through boto3 as an SDK makes them (as DMQ's own single calls are timed, through
boto3's SQS client): the least each of those can take on this store, before any HTTP,
parsing or logic.
`store_round_trips` times the single item calls alone (PutItem, a Query of one on the
visibility index, DeleteItem), and `lifecycle_rate` the lifecycle, on a store someone
else started (`bench/request_cost.py` sets them beside DMQ on the same store).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.servers import stop_like_ctrl_c
from bench.timing import Latency, Recorder
from chalicelib.aws import Clients
from chalicelib.settings import Settings
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY, DynamoDBLocal
from infra import provision

MESSAGES, CONTROL, INDEX = "floor-messages", "floor-control", "visible-index"
PK = "floor/q#0"  # the single calls' partition; the lifecycle's are floor/q#1, #2, ...
BATCH = 10
SEND, RECEIVE, DELETE = "SendMessage", "ReceiveMessage", "DeleteMessage"
PUT_ITEM, QUERY, DELETE_ITEM = "PutItem", "Query", "DeleteItem"
CLAIM = "UpdateItem (claim)"


@dataclass(frozen=True)
class FloorResult:
    """DynamoDB Local alone: lifecycle throughput, CPU per message, single-call latency."""

    messages: int
    seconds: float
    messages_per_s: float
    store_cpu_ms_per_message: float
    client_cpu_ms_per_message: float
    send: Latency  # a conditional PutItem
    receive: Latency  # Query of one, then the claim's UpdateItem
    delete: Latency  # a conditional DeleteItem


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Store:
    """boto3 calls on DMQ's tables, shaped as DMQ's store makes them."""

    def __init__(self, endpoint: str, lean: bool = False) -> None:
        """boto3's client, or (`lean`) the one DMQ's store calls go through."""
        if lean:
            self.db: Any = Clients(replace(Settings(), dynamodb_endpoint=endpoint,
                                           store_credentials=(ACCESS_KEY, SECRET_KEY),
                                           store_attempts=1)).dynamodb
            return
        self.db = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                               aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                               config=Config(retries={"max_attempts": 1},
                                             max_pool_connections=4))

    @staticmethod
    def _item(now_ms: int, pk: str = PK) -> dict[str, Any]:
        return {"pk": {"S": pk}, "sk": {"S": str(uuid.uuid4())},
                "visible_at": {"N": str(now_ms)}, "sent_ms": {"N": str(now_ms)},
                "expires_ms": {"N": str(now_ms + 345_600_000)},
                "expires_at": {"N": str(now_ms // 1000 + 345_600)}, "rc": {"N": "0"},
                "body": {"S": "x" * 256}, "body_md5": {"S": "0" * 32}}

    def put_one(self) -> None:
        self.db.put_item(TableName=MESSAGES, Item=self._item(int(time.time() * 1000)))

    def delete_one(self, item: dict[str, Any]) -> None:
        self.db.delete_item(TableName=MESSAGES, Key={"pk": item["pk"], "sk": item["sk"]})

    def send(self, count: int, pk: str = PK) -> None:
        """As a deduplicated send: one conditional PutItem, or one transaction of
        conditional Puts for a batch (the counts are the stream's, off the path)."""
        now = int(time.time() * 1000)
        if count == 1:
            self.db.put_item(TableName=MESSAGES, Item=self._item(now, pk),
                             ConditionExpression="attribute_not_exists(sk)")
        else:
            self.db.transact_write_items(TransactItems=[
                {"Put": {"TableName": MESSAGES, "Item": self._item(now, pk),
                         "ConditionExpression": "attribute_not_exists(sk)"}}
                for _ in range(count)])

    def candidates(self, limit: int, pk: str = PK) -> list[dict[str, Any]]:
        now = int(time.time() * 1000)
        return list(self.db.query(
            TableName=MESSAGES, IndexName=INDEX, Limit=limit,
            KeyConditionExpression="pk = :pk AND visible_at <= :now",
            ExpressionAttributeValues={":pk": {"S": pk}, ":now": {"N": str(now)}})["Items"])

    def read_back(self, found: list[dict[str, Any]]) -> None:
        """As DMQ reads what it claimed: one consistent BatchGetItem of the won items."""
        self.db.batch_get_item(RequestItems={MESSAGES: {
            "Keys": [{"pk": i["pk"], "sk": i["sk"]} for i in found], "ConsistentRead": True}})

    @staticmethod
    def _claim(item: dict[str, Any]) -> dict[str, Any]:
        later = int(time.time() * 1000) + 30_000
        return {"TableName": MESSAGES, "Key": {"pk": item["pk"], "sk": item["sk"]},
                "ConditionExpression": "visible_at = :seen",
                "UpdateExpression": "SET visible_at = :later, claim = :claim ADD rc :one",
                "ExpressionAttributeValues": {
                    ":seen": item["visible_at"], ":later": {"N": str(later)},
                    ":claim": {"S": uuid.uuid4().hex}, ":one": {"N": "1"}}}

    def claim_one(self, item: dict[str, Any]) -> None:
        self.db.update_item(**self._claim(item), ReturnValues="ALL_NEW")

    def claim_many(self, found: list[dict[str, Any]]) -> bool:
        try:
            self.db.transact_write_items(TransactItems=[{"Update": self._claim(i)}
                                                        for i in found])
        except self.db.exceptions.TransactionCanceledException:
            return False  # another consumer won one of them: query again
        return True  # the index projects the messages: the query read them already

    def delete(self, found: list[dict[str, Any]]) -> None:
        """As DMQ deletes: one conditional DeleteItem, or one transaction for several."""
        deletes = [{"TableName": MESSAGES, "Key": {"pk": i["pk"], "sk": i["sk"]},
                    "ConditionExpression": "attribute_exists(sk)"} for i in found]
        if len(deletes) == 1:
            self.db.delete_item(**deletes[0])
        else:
            self.db.transact_write_items(TransactItems=[{"Delete": d} for d in deletes])


class _StreamReader:
    """GetRecords over the messages table's stream shards, a pass every PASS_S (back to
    back while a pass finds a full page), from the oldest record on (as DMQ's pump, which
    reads the warm-up's records before the measured lifecycle); what DMQ's stream pump
    asks of the store while a lifecycle runs."""

    PASS_S, PAGE = 0.2, 1000

    def __init__(self, endpoint: str) -> None:
        self._db = _Store(endpoint).db
        self._streams: Any = boto3.client(
            "dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            config=Config(retries={"max_attempts": 1}))
        self._arn = self._db.describe_table(TableName=MESSAGES)["Table"]["LatestStreamArn"]
        self._iterators: dict[str, str] = {}
        self.records = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="floor-stream-reader")

    def _open_shards(self) -> None:
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        for shard in shards:
            if shard["ShardId"] not in self._iterators and \
                    "EndingSequenceNumber" not in shard["SequenceNumberRange"]:
                self._iterators[shard["ShardId"]] = self._streams.get_shard_iterator(
                    StreamArn=self._arn, ShardId=shard["ShardId"],
                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

    def _pass(self) -> bool:
        """One GetRecords per open shard; whether a page came back full."""
        full = False
        for shard, iterator in list(self._iterators.items()):
            try:
                page = self._streams.get_records(ShardIterator=iterator, Limit=self.PAGE)
            except self._streams.exceptions.TrimmedDataAccessException:
                # As DMQ's pump: DynamoDB Local trims a shard's records; go on from its
                # oldest record.
                self._iterators[shard] = self._streams.get_shard_iterator(
                    StreamArn=self._arn, ShardId=shard,
                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
                continue
            self.records += len(page["Records"])
            full = full or len(page["Records"]) >= self.PAGE
            if page.get("NextShardIterator"):
                self._iterators[shard] = page["NextShardIterator"]
            else:
                del self._iterators[shard]
                self._open_shards()
        return full

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            if not self._pass():
                self._stop.wait(max(0.0, began + self.PASS_S - time.monotonic()))

    def __enter__(self) -> _StreamReader:
        self._open_shards()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _partition(consumer: int) -> str:
    return f"floor/q#{consumer + 1}"


def _lifecycle(endpoint: str, messages: int, producers: int, consumers: int,
               timeout_s: float) -> int:
    """Send, claim and delete `messages` in batches of ten; return the messages deleted."""
    deleted, lock, stop = [0], threading.Lock(), threading.Event()

    def produce(first: int, batches: int) -> None:
        store = _Store(endpoint, lean=True)
        for n in range(batches):
            store.send(BATCH, _partition((first + n) % consumers))

    def consume(mine: int) -> None:
        store, pk = _Store(endpoint, lean=True), _partition(mine)
        while not stop.is_set():
            found = store.candidates(BATCH, pk)
            if not found:
                time.sleep(0.005)
            elif store.claim_many(found):
                store.read_back(found)
                store.delete(found)
                with lock:
                    deleted[0] += len(found)

    threads = [threading.Thread(target=produce, args=(p, messages // BATCH // producers))
               for p in range(producers)]
    threads += [threading.Thread(target=consume, args=(c,)) for c in range(consumers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    target = messages // BATCH // producers * producers * BATCH
    while deleted[0] < target and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    return deleted[0]


def _single_calls(endpoint: str, calls: int) -> Recorder:
    store, recorder = _Store(endpoint, lean=True), Recorder()
    for _ in range(calls):
        with recorder.timed(SEND):
            store.send(1)
        started = time.perf_counter()
        found = store.candidates(1)
        if found:
            store.claim_one(found[0])
        recorder.add(RECEIVE, time.perf_counter() - started)
        if found:
            with recorder.timed(DELETE):
                store.delete(found)
    return recorder


def provision_tables(endpoint: str) -> None:
    """Create the floor's tables (DMQ's, under names of their own) on a running store."""
    provision.create_all(_Store(endpoint).db, None, {
        "MessagesTableName": MESSAGES, "ControlTableName": CONTROL,
        "QueuesTableName": "floor-queues", "BodiesBucketName": "unused"})


def store_round_trips(endpoint: str, rounds: int, recorder: Recorder) -> None:
    """Rounds of PutItem, a Query of one on the visibility index, the claim's conditional
    UpdateItem and DeleteItem of what it found, each timed alone into `recorder` (under
    PUT_ITEM, QUERY, CLAIM, DELETE_ITEM)."""
    store = _Store(endpoint, lean=True)  # the client DMQ's own store calls go through
    for _ in range(rounds):
        with recorder.timed(PUT_ITEM):
            store.put_one()
        with recorder.timed(QUERY):
            found = store.candidates(1)
        if found:
            with recorder.timed(CLAIM):
                store.claim_one(found[0])
            with recorder.timed(DELETE_ITEM):
                store.delete_one(found[0])


def lifecycle_rate(endpoint: str, messages: int = 4000, producers: int = 4,
                   consumers: int = 4, timeout_s: float = 300.0) -> tuple[int, float]:
    """The floor's lifecycle on a running store with the floor's tables, after a warm-up
    of half as many messages: (messages deleted, seconds)."""
    with _StreamReader(endpoint):
        _lifecycle(endpoint, messages // 2, producers, consumers, timeout_s)
        started = time.perf_counter()
        done = _lifecycle(endpoint, messages, producers, consumers, timeout_s)
        return done, time.perf_counter() - started


def measure_floor(messages: int = 4000, producers: int = 4, consumers: int = 4,
                  single_calls: int = 300, timeout_s: float = 300.0) -> FloorResult:
    """Start a DynamoDB Local of its own with DMQ's tables, warm it up, then measure."""
    with tempfile.TemporaryDirectory(prefix="dmq-bench-floor-") as folder:
        store = DynamoDBLocal(Path(folder) / "dynamodb")
        stop_like_ctrl_c()
        endpoint = store.start()
        try:
            provision_tables(endpoint)
            pid = store.pid
            assert pid is not None
            with _StreamReader(endpoint):
                _lifecycle(endpoint, messages // 2, producers, consumers, timeout_s)  # warm-up
                _single_calls(endpoint, single_calls // 3)
                store_cpu, client_cpu = _cpu_s(pid), time.process_time()
                started = time.perf_counter()
                done = _lifecycle(endpoint, messages, producers, consumers, timeout_s)
                seconds = time.perf_counter() - started
                store_cpu = _cpu_s(pid) - store_cpu
                client_cpu = time.process_time() - client_cpu
            recorder = _single_calls(endpoint, single_calls)
        finally:
            store.stop()
    per = max(done, 1)
    return FloorResult(
        messages=done, seconds=round(seconds, 1), messages_per_s=round(done / seconds, 1),
        store_cpu_ms_per_message=round(store_cpu * 1000 / per, 2),
        client_cpu_ms_per_message=round(client_cpu * 1000 / per, 2),
        send=recorder.summary(SEND), receive=recorder.summary(RECEIVE),
        delete=recorder.summary(DELETE))


if __name__ == "__main__":
    print(measure_floor())
