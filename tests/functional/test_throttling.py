"""GIVEN throttling configured per queue or per account WHEN requests come faster than the
rate THEN the excess is refused as SQS refuses it (RequestThrottled, HTTP 403, a Sender
fault, in the JSON and Query shapes), botocore retries it, and the buckets live in the
control table, taken in leases rather than written per request."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import botocore.endpoint
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from chalicelib import observability
from chalicelib.aws import Clients
from chalicelib.domain.exceptions import StoreError
from chalicelib.domain.throttling import Limit, limit_of
from chalicelib.metadata.throttle_buckets import BucketStore, Grant
from chalicelib.service import throttling
from chalicelib.service.exceptions import RateThrottledError
from chalicelib.service.throttling import Throttle
from chalicelib.settings import Settings
from tests.clocks import FakeClock
from tests.conftest import sqs_client

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
NO_RETRIES = Config(retries={"total_max_attempts": 1})
QUEUE_RATE, QUEUE_BURST = 5.0, 3  # a token every 200 ms, room for 3
ACCOUNT_RATE, ACCOUNT_BURST = 2.0, 6


@pytest.fixture
def settings(request: pytest.FixtureRequest) -> Settings:
    """The test store's settings, with the throttling a test asks for (indirectly, by
    parametrizing `settings`): per queue by default, per account, or off."""
    kind = getattr(request, "param", "queue")
    rates: dict[str, Any] = {}
    if kind == "queue":
        rates = {"throttle_queue_rps": QUEUE_RATE, "throttle_queue_burst": QUEUE_BURST}
    elif kind == "account":
        rates = {"throttle_account_rps": ACCOUNT_RATE, "throttle_account_burst": ACCOUNT_BURST}
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, **rates)


class _Sleeps:
    """Stands in for botocore's `time` while a test runs: records the backoff botocore
    asks for instead of sleeping it, and moves the fake clock on by `advance_s`."""

    def __init__(self, clock: FakeClock, advance_s: float) -> None:
        self.clock = clock
        self.advance_s = advance_s
        self.delays: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.advance(self.advance_s)


def _exhaust(sqs: Any, url: str, count: int) -> None:
    for n in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")


def test_throttling_is_off_by_default() -> None:
    settings = Settings.from_env({})
    assert settings.throttle_account_rps == 0 and settings.throttle_queue_rps == 0
    assert not limit_of(settings.throttle_account_rps).enabled
    parsed = Settings.from_env({"DMQ_THROTTLE_ACCOUNT_RPS": "40", "DMQ_THROTTLE_QUEUE_RPS": "2.5",
                                "DMQ_THROTTLE_ACCOUNT_BURST": "80",
                                "DMQ_THROTTLE_QUEUE_BURST": "5"})
    assert (parsed.throttle_account_rps, parsed.throttle_account_burst) == (40.0, 80)
    assert (parsed.throttle_queue_rps, parsed.throttle_queue_burst) == (2.5, 5)


@pytest.mark.parametrize("settings", ["off"], indirect=True)
def test_with_throttling_off_a_burst_is_served(dmq: Client) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="open")["QueueUrl"]
    _exhaust(sqs, url, 12)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "12"


def test_a_burst_over_the_queue_rate_is_throttled(dmq: Client, clock: FakeClock) -> None:
    # GIVEN a queue limited to 5 requests per second with room for 3
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="slow")["QueueUrl"]
    # WHEN four requests come at once THEN the bucket serves three and refuses the fourth
    _exhaust(sqs, url, QUEUE_BURST)
    with pytest.raises(sqs.exceptions.RequestThrottled) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="one too many")
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["Error"]["Code"] == "RequestThrottled"
    assert error["Error"]["Message"] == (
        "Request rate exceeded for queue slow (5 requests per second); retry with backoff.")
    assert error["ResponseMetadata"]["HTTPHeaders"]["x-amzn-query-error"] == (
        "RequestThrottled;Sender")
    # AND every kind of request to the queue counts
    with pytest.raises(ClientError, match="RequestThrottled"):
        sqs.receive_message(QueueUrl=url)
    # AND other queues, and requests naming no queue, have buckets of their own
    other = sqs.create_queue(QueueName="other")["QueueUrl"]
    _exhaust(sqs, other, QUEUE_BURST)
    assert url in sqs.list_queues()["QueueUrls"]
    # WHEN one token's time (200 ms) passes THEN one more request is served, and only one
    clock.advance(0.2)
    sqs.send_message(QueueUrl=url, MessageBody="refilled")
    with pytest.raises(ClientError, match="RequestThrottled"):
        sqs.send_message(QueueUrl=url, MessageBody="again too many")
    # AND after a second the bucket is full again, never fuller than its burst
    clock.advance(10)
    _exhaust(sqs, url, QUEUE_BURST)
    with pytest.raises(ClientError, match="RequestThrottled"):
        sqs.send_message(QueueUrl=url, MessageBody="past the burst")
    clock.advance(10)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"]["ApproximateNumberOfMessages"] == str(2 * QUEUE_BURST + 1)


def test_the_throttled_json_error_has_sqs_shape(dmq: Client) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="raw")["QueueUrl"]
    _exhaust(sqs, url, QUEUE_BURST)
    result = dmq.http.post("/", headers={
        "X-Amz-Target": "AmazonSQS.SendMessage", "Host": "dmq.test",
        "Content-Type": "application/x-amz-json-1.0"},
        body=json.dumps({"QueueUrl": url, "MessageBody": "x"}))
    assert result.status_code == 403
    assert result.headers["x-amzn-query-error"] == "RequestThrottled;Sender"
    body = json.loads(result.body)
    assert body["__type"] == "com.amazonaws.sqs#RequestThrottled"
    assert body["message"].startswith("Request rate exceeded for queue raw")


def test_the_throttled_query_error_has_sqs_shape(dmq: Client) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="form")["QueueUrl"]
    _exhaust(sqs, url, QUEUE_BURST)
    result = dmq.http.post("/000000000000/form", headers={
        "Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "Host": "dmq.test"},
        body=urlencode({"Action": "SendMessage", "Version": "2012-11-05", "MessageBody": "x"}))
    assert result.status_code == 403
    root = ET.fromstring(result.body)
    assert root.tag == f"{NS}ErrorResponse"
    assert root.findtext(f"{NS}Error/{NS}Type") == "Sender"
    assert root.findtext(f"{NS}Error/{NS}Code") == "RequestThrottled"
    assert root.findtext(f"{NS}Error/{NS}Message", "").startswith(
        "Request rate exceeded for queue form")
    assert root.findtext(f"{NS}RequestId")


@pytest.mark.parametrize("mode", ["standard", "legacy"])
def test_botocore_retries_a_throttled_request_until_it_gives_up(
        dmq: Client, clock: FakeClock, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an exhausted queue bucket and time that does not move between retries
    sleeps = _Sleeps(clock, advance_s=0.0)
    monkeypatch.setattr(botocore.endpoint, "time", sleeps)
    sqs = sqs_client(dmq, "us-east-1", Config(retries={"mode": mode, "total_max_attempts": 3}))
    url = sqs.create_queue(QueueName=f"retried-{mode}")["QueueUrl"]
    _exhaust(sqs, url, QUEUE_BURST)
    # WHEN one more is sent THEN botocore tries it three times, backing off in between
    with pytest.raises(sqs.exceptions.RequestThrottled) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="refused")
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 2
    assert len(sleeps.delays) == 2 and all(d > 0 for d in sleeps.delays)


@pytest.mark.parametrize("mode", ["standard", "legacy"])
def test_a_retry_after_the_backoff_is_served(
        dmq: Client, clock: FakeClock, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an exhausted queue bucket, and a token due in the time botocore backs off
    sleeps = _Sleeps(clock, advance_s=0.2)
    monkeypatch.setattr(botocore.endpoint, "time", sleeps)
    sqs = sqs_client(dmq, "us-east-1", Config(retries={"mode": mode, "total_max_attempts": 3}))
    url = sqs.create_queue(QueueName=f"recovers-{mode}")["QueueUrl"]
    _exhaust(sqs, url, QUEUE_BURST)
    # WHEN one more is sent THEN the retry gets through, and the message is there once
    sent = sqs.send_message(QueueUrl=url, MessageBody="late")
    assert sent["ResponseMetadata"]["RetryAttempts"] == 1
    clock.advance(10)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"]["ApproximateNumberOfMessages"] == str(QUEUE_BURST + 1)


@pytest.mark.parametrize("settings", ["account"], indirect=True)
def test_the_account_bucket_counts_every_action(dmq: Client, clock: FakeClock) -> None:
    # GIVEN an account limited to 2 requests per second with room for 6
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="a")["QueueUrl"]
    sqs.list_queues()
    sqs.send_message(QueueUrl=url, MessageBody="1")
    sqs.get_queue_attributes(QueueUrl=url)
    sqs.create_queue(QueueName="b")
    sqs.receive_message(QueueUrl=url)
    # WHEN a seventh comes at once THEN it is refused, naming the account
    with pytest.raises(sqs.exceptions.RequestThrottled) as caught:
        sqs.list_queues()
    assert caught.value.response["Error"]["Message"] == (
        "Request rate exceeded for account 000000000000 (2 requests per second); "
        "retry with backoff.")
    # AND half a second later (one token at 2 per second) one more is served
    clock.advance(0.5)
    assert sqs.list_queues()["QueueUrls"]


# The service over moto's control table: two Throttles are two processes.


def _store(aws: Clients, settings: Settings) -> tuple[BucketStore, list[str]]:
    """A bucket store over the control table, and the DynamoDB operations it calls."""
    calls: list[str] = []
    client = aws.dynamodb
    client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name))
    return BucketStore(client, settings.control_table), calls


def test_processes_share_a_bucket_through_leases(aws: Clients, settings: Settings,
                                                  clock: FakeClock) -> None:
    # GIVEN two processes throttling one queue at 100/s with room for 20 (leases of 10)
    store, calls = _store(aws, settings)
    limit = limit_of(100, 20)
    first, second = (Throttle(store, clock, Limit(0, 0), limit) for _ in range(2))
    # WHEN each serves ten requests THEN each took one lease: one write for ten requests,
    # and one more for the second, whose guess (a bucket never written) was wrong: its
    # failed condition returned the bucket, so it read nothing
    for _ in range(10):
        first.admit("000000000000", "000000000000/q")
        second.admit("000000000000", "000000000000/q")
    assert calls == ["UpdateItem"] * 3
    assert first.leased("queue#000000000000/q") == 0
    # AND the shared bucket is empty: both refuse the next request
    for throttle in (first, second):
        with pytest.raises(RateThrottledError):
            throttle.admit("000000000000", "000000000000/q")
    writes = len(calls)
    # AND a refused bucket is not asked again before its next token is due
    for _ in range(20):
        with pytest.raises(RateThrottledError):
            first.admit("000000000000", "000000000000/q")
    assert len(calls) == writes
    # WHEN 100 ms pass (ten tokens) THEN one process leases them all, the other is refused
    clock.advance(0.1)
    for _ in range(10):
        first.admit("000000000000", "000000000000/q")
    with pytest.raises(RateThrottledError):
        second.admit("000000000000", "000000000000/q")


def test_an_expired_lease_goes_back_to_the_shared_bucket(aws: Clients, settings: Settings,
                                                         clock: FakeClock) -> None:
    # GIVEN a bucket of 100/s with room for 300, one process holding a lease of 10 of
    # which it spent one, and another that drew the bucket down
    store, _ = _store(aws, settings)
    limit = limit_of(100, 300)
    idle, busy = (Throttle(store, clock, limit, Limit(0, 0)) for _ in range(2))
    idle.admit("111111111111", None)
    assert idle.leased("account#111111111111") == 9
    for _ in range(200):
        busy.admit("111111111111", None)
    before = store.tat("account#111111111111")
    assert before is not None
    # WHEN the lease expires and the process serves its next request
    clock.advance(1.0)
    idle.admit("111111111111", None)
    # THEN the nine unspent tokens went back before a new lease of ten was taken
    after = store.tat("account#111111111111")
    assert after == before + (10 - 9) * limit.interval_us
    assert idle.leased("account#111111111111") == 9


def test_accounts_have_buckets_of_their_own(aws: Clients, settings: Settings,
                                            clock: FakeClock) -> None:
    store, _ = _store(aws, settings)
    throttle = Throttle(store, clock, limit_of(1, 2), Limit(0, 0))
    for account in ("111111111111", "222222222222"):
        throttle.admit(account, None)
        throttle.admit(account, None)
        with pytest.raises(RateThrottledError, match=f"account {account}"):
            throttle.admit(account, None)


def test_a_request_refused_by_its_queue_keeps_its_account_token(
        aws: Clients, settings: Settings, clock: FakeClock) -> None:
    store, _ = _store(aws, settings)
    throttle = Throttle(store, clock, limit_of(100, 20), limit_of(1, 1))
    throttle.admit("111111111111", "111111111111/q")
    assert throttle.leased("account#111111111111") == 9
    with pytest.raises(RateThrottledError, match="queue q"):
        throttle.admit("111111111111", "111111111111/q")
    assert throttle.leased("account#111111111111") == 9


class _FailingStore(BucketStore):
    def __init__(self) -> None:
        self.takes = 0

    def take(self, *args: Any, **kwargs: Any) -> Any:
        self.takes += 1
        raise StoreError("the control table is unavailable")


def test_a_store_fault_lets_requests_through(clock: FakeClock) -> None:
    # GIVEN a bucket store that fails
    store = _FailingStore()
    throttle = Throttle(store, clock, limit_of(1, 1), Limit(0, 0))
    # WHEN requests come THEN they are served, and the store is asked once a second
    for _ in range(5):
        throttle.admit("111111111111", None)
    assert store.takes == 1
    clock.advance(1.0)
    throttle.admit("111111111111", None)
    assert store.takes == 2


def test_a_queue_that_does_not_exist_gets_no_bucket(dmq: Client, aws: Clients,
                                                   settings: Settings) -> None:
    # GIVEN per-queue throttling WHEN requests name queues that do not exist
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    for n in range(QUEUE_BURST + 2):
        with pytest.raises(sqs.exceptions.QueueDoesNotExist):
            sqs.send_message(QueueUrl=f"http://dmq.test/000000000000/ghost-{n % 2}",
                             MessageBody="x")
    # THEN each is answered QueueDoesNotExist, and no bucket was written for them
    store = BucketStore(aws.dynamodb, settings.control_table)
    assert store.tat("queue#000000000000/ghost-0") is None


class _GrantingStore(BucketStore):
    def __init__(self) -> None:
        pass

    def take(self, *args: Any, **kwargs: Any) -> Grant:
        return Grant(1, None)


def test_a_process_keeps_a_bounded_number_of_buckets(
        clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a process that may keep 3 buckets WHEN requests go to 10 queues in turn
    monkeypatch.setattr(throttling, "MAX_LOCAL_BUCKETS", 3)
    throttle = Throttle(_GrantingStore(), clock, Limit(0, 0), limit_of(5, 1))
    for n in range(10):
        throttle.admit("111111111111", f"111111111111/q{n}")
        # THEN the idle ones (nothing leased, nothing refused) are forgotten
        assert throttle.local_buckets() <= 3


@pytest.fixture
def metrics_on() -> Iterator[None]:
    """EMF metrics on, as on Lambda; off again afterwards."""
    observability.configure(json_logs=False, emit_metrics=True)
    yield
    observability.configure(json_logs=False, emit_metrics=False)


@pytest.mark.usefixtures("metrics_on")
def test_refused_requests_and_leases_are_counted_in_the_metrics(
        dmq: Client, capsys: pytest.CaptureFixture[str]) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="metered")["QueueUrl"]
    _exhaust(sqs, url, QUEUE_BURST)  # one lease each (5/s: leases of one token)
    with pytest.raises(ClientError, match="RequestThrottled"):
        sqs.send_message(QueueUrl=url, MessageBody="refused")
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines()
                 if line.startswith("{") and "_aws" in line]

    def total(name: str) -> float:
        values = [d[name] for d in documents if name in d]
        return sum(sum(v) if isinstance(v, list) else v for v in values)

    assert total("ThrottledRequests") == 1
    assert total("ThrottleLeases") == QUEUE_BURST + 1
