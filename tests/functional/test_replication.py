"""GIVEN a queue whose home is us-east-1 with a replica in eu-west-1
WHEN messages flow, stream records replay, and the home region fails and comes back
THEN the replica matches the home, sync mode loses nothing, and exactly one promotion wins."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from app import app, runtime
from chalicelib import observability
from chalicelib.aws import Clients
from chalicelib.clock import SystemClock
from chalicelib.domain.exceptions import StoreUnavailableError
from chalicelib.regions import failover as failover_module
from chalicelib.regions.failover import RESYNC_SETTLE_MS, FailoverManager
from chalicelib.regions.replica import ReplicaApplier, live_item
from chalicelib.settings import Settings
from dmqlocal.handlers import stream_bindings
from dmqlocal.pump import StreamPump, to_lambda_record
from infra import provision
from tests.clocks import FakeClock
from tests.conftest import sqs_client
from tests.functional.test_faults import Faults
from tests.functional.test_observability import assert_valid_emf, json_lines

HOME, REPLICA = "us-east-1", "eu-west-1"
ACCOUNT = "000000000000"
MESSAGES = "dmq-messages"


@pytest.fixture
def settings() -> Settings:
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                    regions=(HOME, REPLICA), hosted_regions=(HOME, REPLICA),
                    failover_after_s=3.0)


@pytest.fixture
def clock() -> FakeClock:
    """Fake time that starts now, so replication lag against stream times is meaningful."""
    return FakeClock(int(time.time() * 1000))


@pytest.fixture
def regions(aws: Clients, settings: Settings) -> dict[str, Clients]:
    """Both regions' tables (moto keeps regions apart)."""
    replica = Clients(settings, REPLICA)
    provision.create_all(replica.dynamodb, replica.s3, region=REPLICA)
    return {HOME: aws, REPLICA: replica}


@pytest.fixture
def pumps(regions: dict[str, Clients], dmq: Client) -> dict[str, StreamPump]:
    """A stream pump per region, run by hand."""
    return {r: StreamPump(c.dynamodb, c.streams, stream_bindings(app), r,
                          health=runtime.health) for r, c in regions.items()}


def _pump(pumps: dict[str, StreamPump]) -> None:
    for _ in range(50):
        if not sum(p.poll_once() for p in pumps.values()):
            return


@pytest.fixture
def home(dmq: Client, regions: dict[str, Clients]) -> Any:
    return sqs_client(dmq, HOME)


@pytest.fixture
def away(dmq: Client, regions: dict[str, Clients]) -> Any:
    return sqs_client(dmq, REPLICA)


def _items(clients: Clients) -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for item in clients.dynamodb.scan(TableName=MESSAGES)["Items"]:
        live = live_item(item)
        if live is not None:
            found[(item["pk"]["S"], item["sk"]["S"])] = live
    return found


def _send(sqs: Any, url: str, count: int, tag: str = "m") -> set[str]:
    ids: set[str] = set()
    for start in range(0, count, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"{tag}-{start + i}"}
            for i in range(min(10, count - start))])
        assert not result.get("Failed")
        ids |= {e["MessageId"] for e in result["Successful"]}
    return ids


def _drain(sqs: Any, url: str) -> list[str]:
    got: list[str] = []
    for _ in range(200):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return got
        got += [m["MessageId"] for m in messages]
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
    return got


def _replicated_queue(home: Any, name: str, mode: str = "async") -> str:
    return str(home.create_queue(QueueName=name, Attributes={
        "DmqReplicaRegions": REPLICA, "DmqReplicationMode": mode})["QueueUrl"])


def _fail_over(clock: FakeClock, settings: Settings) -> list[str]:
    """Kill the home region, let its heartbeats age, and run the replica's manager."""
    runtime.failover(HOME).tick()
    runtime.failover(REPLICA).tick()
    runtime.health.mark(HOME, up=False)
    clock.advance(settings.failover_after_s + 1)
    return runtime.failover(REPLICA).tick().promoted


# -- attributes ----------------------------------------------------------------------------------


def test_replication_attributes_are_validated_and_read_back(home: Any) -> None:
    url = _replicated_queue(home, "attrs", "sync")
    got = home.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "DmqHomeRegion", "DmqReplicaRegions", "DmqReplicationMode"])["Attributes"]
    assert got == {"DmqHomeRegion": HOME, "DmqReplicaRegions": REPLICA,
                   "DmqReplicationMode": "sync"}
    for attributes in ({"DmqReplicaRegions": "mars-north-1"},
                       {"DmqReplicaRegions": HOME},
                       {"DmqReplicaRegions": "not a region"},
                       {"DmqReplicationMode": "eventually"}):
        with pytest.raises(ClientError) as info:
            home.create_queue(QueueName="bad", Attributes=attributes)
        assert info.value.response["Error"]["Code"] == "InvalidAttributeValue", attributes


# -- async replication ---------------------------------------------------------------------------


def test_async_replication_copies_every_acknowledged_message(
    home: Any, away: Any, pumps: dict[str, StreamPump], regions: dict[str, Clients],
) -> None:
    runtime.configure(runtime.settings, SystemClock())  # lag against real stream times
    url = _replicated_queue(home, "orders")
    acked = _send(home, url, 120)
    first = home.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    home.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    _pump(pumps)
    home_items, replica_items = _items(regions[HOME]), _items(regions[REPLICA])
    assert replica_items == home_items
    assert {sk for (_, sk) in replica_items} == acked - {first[0]["MessageId"]}
    lag = runtime.lag.summary()[REPLICA]
    print(f"\nreplication lag to {REPLICA}: p50 {lag['p50_ms']:.0f} ms, "
          f"p99 {lag['p99_ms']:.0f} ms over {lag['count']:.0f} changes")
    assert lag["count"] >= 120
    # the queue record itself replicated: the replica region knows the queue and its home
    attrs = away.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqHomeRegion"])
    assert attrs["Attributes"]["DmqHomeRegion"] == HOME


def test_a_request_to_the_replica_region_is_forwarded_to_the_home(
    home: Any, away: Any, pumps: dict[str, StreamPump],
) -> None:
    url = _replicated_queue(home, "fwd")
    _pump(pumps)
    acked = _send(away, url, 30, "via-replica")
    received = _drain(away, url)
    assert sorted(received) == sorted(acked)
    assert home.receive_message(QueueUrl=url).get("Messages") is None


def test_a_replica_region_finds_a_new_queue_as_soon_as_its_record_arrives(
    home: Any, away: Any, pumps: dict[str, StreamPump], settings: Settings, clock: FakeClock,
) -> None:
    # GIVEN metadata cached for a while, as in a deployment
    runtime.configure(replace(settings, metadata_cache_seconds=30.0), clock)
    url = _replicated_queue(home, "fresh")
    # WHEN a client asks the replica region before the record has reached it
    with pytest.raises(ClientError) as info:
        away.get_queue_url(QueueName="fresh")
    assert info.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    _pump(pumps)
    # THEN once the record has arrived, the miss is not remembered: the replica region
    # answers as its ListQueues does, with a URL naming the replica region
    away_url = url.replace(f"/{ACCOUNT}/", f"/queue/{REPLICA}/{ACCOUNT}/")
    assert away.list_queues()["QueueUrls"] == [away_url]
    assert away.get_queue_url(QueueName="fresh")["QueueUrl"] == away_url
    for either in (url, away_url):
        assert away.get_queue_attributes(QueueUrl=either, AttributeNames=["DmqHomeRegion"])[
            "Attributes"]["DmqHomeRegion"] == HOME


def test_duplicate_and_reordered_stream_records_leave_the_replica_identical(
    home: Any, pumps: dict[str, StreamPump], regions: dict[str, Clients],
) -> None:
    url = _replicated_queue(home, "replay")
    _send(home, url, 40)
    for message in home.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"][:6]:
        home.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    home.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)
    _pump(pumps)
    records = _stream_records(regions[HOME])
    assert {r["eventName"] for r in records} == {"INSERT", "MODIFY", "REMOVE"}
    applier = ReplicaApplier(regions[REPLICA].dynamodb, lambda: 0)
    for seed in (1, 2, 3):
        shuffled = list(records) + list(records[: len(records) // 2])
        random.Random(seed).shuffle(shuffled)
        for start in range(0, len(shuffled), 7):
            applier.apply(MESSAGES, shuffled[start:start + 7])
        assert _items(regions[REPLICA]) == _items(regions[HOME]), f"seed {seed}"
    reverse = ReplicaApplier(regions[REPLICA].dynamodb, lambda: 0).apply(
        MESSAGES, list(reversed(records)))
    assert reverse.applied == 0 and reverse.skipped > 0


def _stream_records(clients: Clients) -> list[dict[str, Any]]:
    arn = clients.dynamodb.describe_table(TableName=MESSAGES)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in clients.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = clients.streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
        for _ in range(100):
            page = clients.streams.get_records(ShardIterator=iterator, Limit=1000)
            records += [to_lambda_record(dict(r), arn, HOME) for r in page["Records"]]
            if not page["Records"]:
                break
            iterator = page["NextShardIterator"]
    return records


# -- sync replication faults ----------------------------------------------------------------------


def test_a_replica_write_failing_after_the_home_write_still_acknowledges(
    dmq: Client, pumps: dict[str, StreamPump], regions: dict[str, Clients],
) -> None:
    # GIVEN a sync-mode queue, a client that does not retry, and a replica region that is
    # up but whose writes fail (after the home has written)
    home = sqs_client(dmq, HOME, Config(retries={"total_max_attempts": 1}))
    url = _replicated_queue(home, "sync-faulty", "sync")
    _pump(pumps)
    faults = Faults(runtime.backend(REPLICA).stores.of("default")._db)
    faults.add("PutItem", lambda call, request: "internal")
    try:
        # WHEN a message and a batch of five are sent
        one = home.send_message(QueueUrl=url, MessageBody="single")["MessageId"]
        batch = home.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"e{i}", "MessageBody": f"batched {i}"} for i in range(5)])
    finally:
        faults.clear()
    # THEN each is acknowledged, per entry, as the home write that holds it
    assert faults.count() == 2  # one failed replica write per send
    assert batch.get("Failed", []) == []
    acked = {one} | {e["MessageId"] for e in batch["Successful"]}
    assert len(acked) == 6
    # AND the fault is counted per replica region
    assert runtime.lag.sync_faults() == {REPLICA: 6}
    # AND the replica catches up through the stream, and each message is delivered once
    _pump(pumps)
    assert {sk for (_, sk) in _items(regions[REPLICA])} == acked
    assert sorted(_drain(home, url)) == sorted(acked)


# -- failover --------------------------------------------------------------------------------------


def test_sync_mode_survives_losing_the_home_right_after_acknowledging(
    home: Any, away: Any, pumps: dict[str, StreamPump], clock: FakeClock, settings: Settings,
) -> None:
    url = _replicated_queue(home, "sync-q", "sync")
    _pump(pumps)  # the queue record reaches the replica
    acked = _send(home, url, 60)
    # the home dies before its stream is read: only the synchronous copies exist
    assert _fail_over(clock, settings) == [f"{ACCOUNT}/sync-q"]
    delivered = _drain(away, url)
    lost = acked - set(delivered)
    print(f"\nmode=sync acknowledged={len(acked)} delivered={len(set(delivered))} "
          f"lost={len(lost)}")
    assert not lost
    attrs = away.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqHomeRegion"])
    assert attrs["Attributes"]["DmqHomeRegion"] == REPLICA


def test_async_mode_reports_the_messages_at_risk_and_rejoin_recovers_them(
    home: Any, away: Any, pumps: dict[str, StreamPump], clock: FakeClock, settings: Settings,
    regions: dict[str, Clients],
) -> None:
    url = _replicated_queue(home, "async-q")
    _pump(pumps)
    shipped = _send(home, url, 40, "shipped")
    _pump(pumps)
    unshipped = _send(home, url, 25, "late")  # acknowledged, not yet replicated
    assert _fail_over(clock, settings) == [f"{ACCOUNT}/async-q"]
    delivered = set(_drain(away, url))
    at_risk = (shipped | unshipped) - delivered
    print(f"\nmode=async acknowledged={len(shipped | unshipped)} delivered={len(delivered)} "
          f"at_risk={len(at_risk)} (RPO while the old home is down)")
    assert delivered == shipped and at_risk == unshipped
    # WHEN the old home comes back, it adopts the new record and becomes a replica
    runtime.health.mark(HOME, up=True)
    report = runtime.failover(HOME).tick()
    assert report.adopted == [f"{ACCOUNT}/async-q"]
    attrs = home.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqHomeRegion"])
    assert attrs["Attributes"]["DmqHomeRegion"] == REPLICA
    _pump(pumps)  # the new home's backlog reaches the old home
    clock.advance(RESYNC_SETTLE_MS / 1000 + 1)
    runtime.failover(REPLICA).tick()  # the new home keeps beating
    report = runtime.failover(HOME).tick()
    assert report.resynced == [f"{ACCOUNT}/async-q"] and report.recovered == len(unshipped)
    # THEN the messages only the old home held are delivered by the new home
    recovered = set(_drain(home, url))  # forwarded to the new home
    assert recovered == unshipped
    _pump(pumps)
    assert _items(regions[HOME]) == _items(regions[REPLICA]) == {}
    # AND the old home does not take the queue back by itself, even after a long watch
    for _ in range(4):
        clock.advance(settings.failover_after_s / 2)
        runtime.failover(REPLICA).tick()
        assert runtime.failover(HOME).tick().promoted == []


def test_a_resync_that_cannot_finish_stays_pending_and_runs_again(
    home: Any, away: Any, pumps: dict[str, StreamPump], clock: FakeClock, settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN an async queue failed over with unshipped messages, and its old home back
    url = _replicated_queue(home, "resync-q")
    _pump(pumps)
    unshipped = _send(home, url, 12, "late")
    assert _fail_over(clock, settings) == [f"{ACCOUNT}/resync-q"]
    runtime.health.mark(HOME, up=True)
    assert runtime.failover(HOME).tick().adopted == [f"{ACCOUNT}/resync-q"]
    _pump(pumps)
    clock.advance(RESYNC_SETTLE_MS / 1000 + 1)
    runtime.failover(REPLICA).tick()
    # WHEN its resync meets a store that does not finish the job
    def unfinished(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailableError("writes stayed unprocessed")

    with monkeypatch.context() as patched:
        patched.setattr(failover_module, "resync_partition", unfinished)
        report = runtime.failover(HOME).tick()
    # THEN the queue stays pending, and the next tick resyncs it
    assert report.resynced == []
    assert runtime.failover(HOME).pending_resyncs() == [f"{ACCOUNT}/resync-q"]
    report = runtime.failover(HOME).tick()
    assert report.resynced == [f"{ACCOUNT}/resync-q"] and report.recovered == len(unshipped)
    assert set(_drain(home, url)) == unshipped


def test_overlapping_passes_resync_a_queue_once(
    home: Any, away: Any, pumps: dict[str, StreamPump], clock: FakeClock, settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN an adopted queue due for its resync
    url = _replicated_queue(home, "overlap-q")
    _pump(pumps)
    _send(home, url, 3, "late")
    assert _fail_over(clock, settings) == [f"{ACCOUNT}/overlap-q"]
    runtime.health.mark(HOME, up=True)
    assert runtime.failover(HOME).tick().adopted == [f"{ACCOUNT}/overlap-q"]
    _pump(pumps)
    clock.advance(RESYNC_SETTLE_MS / 1000 + 1)
    runtime.failover(REPLICA).tick()
    calls: list[int] = []
    real = failover_module.resync_partition

    def slow(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        time.sleep(0.3)  # the scheduled pass is still resyncing when a second one starts
        return real(*args, **kwargs)

    # WHEN two passes overlap (the scheduler's and one started by hand)
    errors: list[BaseException] = []

    def tick() -> None:
        try:
            runtime.failover(HOME).tick()
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    with monkeypatch.context() as patched:
        patched.setattr(failover_module, "resync_partition", slow)
        threads = [threading.Thread(target=tick) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    # THEN the queue is resynced once, and neither pass fails
    assert errors == []
    assert len(calls) == 1
    assert runtime.failover(HOME).pending_resyncs() == []


def test_two_managers_racing_to_promote_have_exactly_one_winner(
    home: Any, pumps: dict[str, StreamPump], settings: Settings, clock: FakeClock,
) -> None:
    _replicated_queue(home, "race")
    _pump(pumps)
    queue = runtime.backend(REPLICA).repo.get(f"{ACCOUNT}/race", fresh=True)
    assert queue is not None and queue.home == HOME
    managers = [FailoverManager(REPLICA, settings, runtime.backend, runtime.health, clock)
                for _ in range(4)]
    results: list[bool] = []
    barrier = threading.Barrier(len(managers))

    def promote(manager: FailoverManager) -> None:
        barrier.wait(timeout=10)
        results.append(manager.promote(queue))

    threads = [threading.Thread(target=promote, args=(m,)) for m in managers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [False, False, False, True]
    after = runtime.backend(REPLICA).repo.get(f"{ACCOUNT}/race", fresh=True)
    assert after is not None and after.home == REPLICA and after.epoch == queue.epoch + 1


def test_a_replica_does_not_promote_while_the_home_beats(
    home: Any, pumps: dict[str, StreamPump], clock: FakeClock, settings: Settings,
) -> None:
    _replicated_queue(home, "steady")
    _pump(pumps)
    for _ in range(3):
        runtime.failover(HOME).tick()
        clock.advance(settings.failover_after_s / 2)
        assert runtime.failover(REPLICA).tick().promoted == []


def test_a_returning_old_home_stays_a_replica_through_a_second_outage(
    home: Any, away: Any, pumps: dict[str, StreamPump], clock: FakeClock, settings: Settings,
) -> None:
    # GIVEN a queue that failed over to the replica, whose old home came back as a replica
    url = _replicated_queue(home, "twice")
    _pump(pumps)
    assert _fail_over(clock, settings) == [f"{ACCOUNT}/twice"]
    runtime.health.mark(HOME, up=True)
    assert runtime.failover(HOME).tick().adopted == [f"{ACCOUNT}/twice"]
    for _ in range(3):  # both regions beat for a while, the new home steady
        clock.advance(settings.failover_after_s / 2)
        runtime.failover(REPLICA).tick()
        assert runtime.failover(HOME).tick().promoted == []
    # WHEN the old home goes down and up again between two of its manager's passes, for
    # longer than the failover time: the new home's heartbeats in its table went stale
    runtime.health.mark(HOME, up=False)
    for _ in range(3):
        clock.advance(settings.failover_after_s / 2)
        runtime.failover(REPLICA).tick()
    runtime.health.mark(HOME, up=True)
    # THEN the stale heartbeat does not move the home back: the old home first watches
    # the new home for the failover time, and the new home beats
    assert runtime.failover(HOME).tick().promoted == []
    for _ in range(3):
        clock.advance(settings.failover_after_s / 2)
        runtime.failover(REPLICA).tick()
        assert runtime.failover(HOME).tick().promoted == []
    for client in (home, away):
        attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqHomeRegion"])
        assert attrs["Attributes"]["DmqHomeRegion"] == REPLICA


def test_a_region_whose_own_store_failed_watches_afresh_before_promoting(
    home: Any, pumps: dict[str, StreamPump], clock: FakeClock, settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a replica that watches a beating home
    _replicated_queue(home, "blind")
    _pump(pumps)
    runtime.failover(HOME).tick()
    runtime.failover(REPLICA).tick()
    # WHEN the replica's own store fails for longer than the failover time (the home's
    # heartbeats cannot reach it), then recovers
    control = runtime.backend(REPLICA).control

    def unreachable(*_: Any, **__: Any) -> None:
        raise StoreUnavailableError("timed out")

    with monkeypatch.context() as patch:
        patch.setattr(control, "beat", unreachable)
        patch.setattr(runtime.backend(REPLICA).repo, "scan_active", unreachable)
        for _ in range(3):
            clock.advance(settings.failover_after_s / 2)
            runtime.failover(HOME).tick()
            with pytest.raises(StoreUnavailableError):
                runtime.failover(REPLICA).tick()
    # THEN the stale copy of the home's heartbeat does not promote it
    assert runtime.failover(REPLICA).tick().promoted == []
    # AND a home that is really gone is still replaced after a fresh watch
    runtime.health.mark(HOME, up=False)
    clock.advance(settings.failover_after_s + 1)
    assert runtime.failover(REPLICA).tick().promoted == [f"{ACCOUNT}/blind"]


def test_a_region_marked_down_answers_service_unavailable(home: Any, away: Any) -> None:
    url = home.create_queue(QueueName="local-only")["QueueUrl"]
    runtime.health.mark(REPLICA, up=False)
    with pytest.raises(ClientError) as info:
        away.list_queues()
    assert info.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert home.get_queue_url(QueueName="local-only")["QueueUrl"] == url


def test_replication_lag_is_an_emf_metric_per_target_region(
    home: Any, pumps: dict[str, StreamPump], capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN DMQ as deployed: EMF metrics on
    observability.configure(json_logs=False, emit_metrics=True)
    try:
        url = _replicated_queue(home, "measured")
        _send(home, url, 5)
        capsys.readouterr()
        # WHEN the stream handler replicates the sends
        _pump(pumps)
        out = capsys.readouterr().out
    finally:
        observability.configure(json_logs=False, emit_metrics=False)
    # THEN a valid EMF document carries the lag, dimensioned by the target region
    documents = [d for d in json_lines(out) if "ReplicationLagMs" in d]
    assert documents, out
    for document in documents:
        assert_valid_emf(document)
        directive = document["_aws"]["CloudWatchMetrics"][0]
        assert directive["Metrics"] == [{"Name": "ReplicationLagMs", "Unit": "Milliseconds"}]
        assert ["TargetRegion", "service"] in [sorted(d) for d in directive["Dimensions"]]
        assert document["TargetRegion"] == REPLICA
    # AND the invocation's own metrics were flushed when the handler ended
    assert any("StreamRecords" in d for d in json_lines(out)), out
