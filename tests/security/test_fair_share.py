"""GIVEN DMQ_AUTH=required, where every account gets a request rate and a concurrency share
WHEN one tenant floods (more requests at once than its share, faster than its rate, or
unsigned requests naming another tenant's key)
THEN its excess waits or is refused at the front door, before its body is parsed and
without charging anyone it cannot sign for; a long poll gives its place back while it
waits; and another tenant's SendMessage p50 stays close to what it is without the flood."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from chalice.test import Client

from app import app, runtime
from bench import fair_share as bench
from chalicelib.backend.wakeups import Wakeups
from chalicelib.domain import fair_share
from chalicelib.domain.fair_share import ConcurrencyShare
from chalicelib.settings import Settings
from dmqlocal import connection_pool
from dmqlocal.front_door import FrontDoor
from dmqlocal.server import LocalServer
from tests.admin_signing import sign

ROOT, ROOT_SECRET = "AKIAFAIRROOTFAIRROOT", "fair-root-secret-fair-root-secret-000000"
VICTIM, FLOODER = "111111111111", "222222222222"
NO_RETRIES = Config(retries={"total_max_attempts": 1})
RATE, BURST = 1.0, 4  # one request a second, room for four
# The measured flood: the quiet tenant's p50 under it, at most this many times its p50
# alone (the benchmark's goal is 2x; this machine is small and shared, so the test allows
# more, still far below the 4-14x of an unprotected server).
FLOOD_BOUND = 3.0


# -- the settings ----------------------------------------------------------------------------
def test_required_mode_gives_every_account_a_rate_and_a_share_by_default() -> None:
    required = {"DMQ_AUTH": "required", "DMQ_ROOT_ACCESS_KEY_ID": ROOT,
                "DMQ_ROOT_SECRET_ACCESS_KEY": ROOT_SECRET}
    settings = Settings.from_env(required)
    assert (settings.throttle_account_rps, settings.account_max_concurrency) == (100.0, 1)
    opened = Settings.from_env({})
    assert (opened.throttle_account_rps, opened.account_max_concurrency) == (0.0, 0)
    chosen = Settings.from_env({**required, "DMQ_THROTTLE_ACCOUNT_RPS": "0",
                                "DMQ_ACCOUNT_MAX_CONCURRENCY": "16"})
    assert (chosen.throttle_account_rps, chosen.account_max_concurrency) == (0.0, 16)
    assert Settings.from_env({"DMQ_ACCOUNT_MAX_CONCURRENCY": "3"}).account_max_concurrency == 3


def test_required_mode_caps_each_accounts_long_polls_at_a_quarter_of_the_connections() -> None:
    required = {"DMQ_AUTH": "required", "DMQ_ROOT_ACCESS_KEY_ID": ROOT,
                "DMQ_ROOT_SECRET_ACCESS_KEY": ROOT_SECRET}
    assert Settings.from_env(required).account_max_waits == 1024
    assert Settings.from_env({**required, "DMQ_HTTP_MAX_CONNECTIONS": "100"}
                             ).account_max_waits == 25
    assert Settings.from_env({**required, "DMQ_ACCOUNT_MAX_WAITS": "0"}).account_max_waits == 0
    assert Settings.from_env({}).account_max_waits == 0  # the open mode: one account
    assert Settings.from_env({"DMQ_ACCOUNT_MAX_WAITS": "7"}).account_max_waits == 7


def test_long_polls_past_the_accounts_share_are_refused_before_any_work() -> None:
    share = ConcurrencyShare(limit=0, max_waits=2)
    with fair_share.holding(share, "a"), fair_share.long_poll(True), \
            fair_share.long_poll(True):
        assert share.polls("a") == 2
        with pytest.raises(fair_share.WaitShareExceeded, match="at most 2 at once"), \
                fair_share.long_poll(True):
            pytest.fail("a third long poll ran")
        with fair_share.long_poll(False):  # a short poll is not counted
            assert share.polls("a") == 2
        with fair_share.holding(share, "b"), fair_share.long_poll(True):
            assert share.polls("b") == 1  # another account has its own share
    assert (share.polls("a"), share.polls("b")) == (0, 0)


# -- the concurrency share -----------------------------------------------------------------------
def test_a_request_over_the_share_waits_its_turn_then_is_refused() -> None:
    share = ConcurrencyShare(limit=2, wait_s=0.3)
    assert share.enter("a") and share.enter("a")
    started = time.monotonic()
    assert not share.enter("a")  # waited its turn, none came
    assert time.monotonic() - started >= 0.25
    assert share.enter("b")  # other accounts have shares of their own
    threading.Timer(0.1, share.leave, ("a",)).start()
    assert share.enter("a")  # a turn came while it waited
    assert share.running("a") == 2


def test_a_long_poll_gives_its_place_back_while_it_waits() -> None:
    share = ConcurrencyShare(limit=1)
    wakeups = Wakeups()
    seen: list[int] = []
    assert share.enter("a")

    def long_poll() -> None:
        with fair_share.holding(share, "a"):
            wakeups.wait("q", wakeups.generation("q"), 0.5)
            seen.append(share.running("a"))

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.2)
    assert share.running("a") == 0 and share.enter("a")  # its place, free while it waits
    share.leave("a")
    poller.join(timeout=5)
    assert seen == [1]  # taken again when the wait ended


def test_many_waiters_of_one_account_are_served_in_turn_and_leave_nothing_behind() -> None:
    # GIVEN a share of 3 and 40 requests of one account arriving at once, 5 of another's
    share = ConcurrencyShare(limit=3, wait_s=5.0)
    peak: dict[str, int] = {"a": 0, "b": 0}
    served: list[str] = []
    lock = threading.Lock()

    def request(account: str) -> None:
        assert share.enter(account)
        try:
            with lock:
                peak[account] = max(peak[account], share.running(account))
            time.sleep(0.01)
            served.append(account)
        finally:
            share.leave(account)

    threads = [threading.Thread(target=request, args=("a",)) for _ in range(40)]
    threads += [threading.Thread(target=request, args=("b",)) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    # THEN all are served, never more than 3 of an account at once
    assert sorted(served) == ["a"] * 40 + ["b"] * 5
    assert peak == {"a": 3, "b": 3}
    # AND once none is in progress, no account's counts are kept
    assert (share.running("a"), share.running("b")) == (0, 0)
    assert not share._accounts  # what a share keeps per account


def test_without_a_cap_nothing_is_counted() -> None:
    share = ConcurrencyShare(limit=0, max_waits=0)
    assert all(share.enter(f"acct-{n}") for n in range(1000))
    share.start_poll("acct-1")
    assert (share.running("acct-1"), share.polls("acct-1")) == (0, 0)
    assert not share._accounts  # what a share keeps per account


# -- the front door, in process --------------------------------------------------------------
@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """DMQ_AUTH=required on the test store: a small rate, one request at a time."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, auth="required",
                    root_access_key_id=ROOT, root_secret_access_key=ROOT_SECRET,
                    data_dir=str(tmp_path), throttle_account_rps=RATE,
                    throttle_account_burst=BURST, account_max_concurrency=1)


@pytest.fixture
def keys(dmq: Client) -> dict[str, tuple[str, str]]:
    made = {}
    for account in (VICTIM, FLOODER):
        key, secret = runtime.identities().create_key(account, None, False)
        made[account] = (key.access_key_id, secret)
    return made


@pytest.fixture
def served(dmq: Client) -> Iterator[LocalServer]:
    """The app behind the local HTTP server and its front door, on the test store."""
    server = LocalServer(app, "127.0.0.1", 0, gate=FrontDoor(runtime))
    server.start()
    yield server
    server.stop()


def client(server: LocalServer, key: tuple[str, str]) -> Any:
    return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id=key[0], aws_secret_access_key=key[1],
                        config=NO_RETRIES)


def raw(server: LocalServer, key: tuple[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    """A SendMessage request signed with `key` whose body is whatever is given."""
    import urllib.request

    signed = sign("POST", server.url + "/", body, {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"},
        key=key[0], secret=key[1], service="sqs")
    sent = urllib.request.Request(signed.url, data=body, method="POST", headers=signed.headers)
    try:
        with urllib.request.urlopen(sent, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_account_is_charged_once_and_refused_before_its_body_is_read(
        served: LocalServer, keys: dict[str, tuple[str, str]]) -> None:
    # GIVEN a tenant with room for four requests
    sqs = client(served, keys[FLOODER])
    url = sqs.create_queue(QueueName="flood")["QueueUrl"]
    for number in range(BURST - 1):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{number}")  # the door and the app
    # WHEN it sends a fifth, whose body is not even JSON
    started = time.monotonic()
    status, error = raw(served, keys[FLOODER], b"{not json")
    # THEN it is refused for its rate (the body never parsed), after being held until its
    # next token was due rather than at once
    assert status == 403 and error["__type"].endswith("#RequestThrottled")
    assert f"account {FLOODER}" in error["message"]
    assert time.monotonic() - started >= 0.5
    # AND the same body from a tenant with tokens is refused for what it is
    status, error = raw(served, keys[VICTIM], b"{not json")
    assert status == 400 and not error["__type"].endswith("#RequestThrottled")


def test_a_waiting_long_poll_is_parked_without_a_thread_or_its_accounts_place(
        served: LocalServer, keys: dict[str, tuple[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN two accounts, each served one request at a time, with a queue each; no server
    # thread waits for more work after serving (a waiting one, kept busy by the polls'
    # re-checks of the store every 50 ms, would never end: tests/unit/test_parked_long_polls.py)
    monkeypatch.setattr(connection_pool, "WORKER_IDLE_S", 0.0)
    json_sqs, query_sqs = client(served, keys[VICTIM]), client(served, keys[FLOODER])
    json_url = json_sqs.create_queue(QueueName="parked")["QueueUrl"]
    query_url = query_sqs.create_queue(QueueName="parked")["QueueUrl"]
    threads_before = threading.active_count()
    # WHEN one long-polls in the JSON protocol, the other in the Query protocol at its
    # queue's URL
    got: dict[str, Any] = {}
    polls = [threading.Thread(target=lambda: got.__setitem__("json", json_sqs.receive_message(
                 QueueUrl=json_url, WaitTimeSeconds=5)["Messages"][0]["Body"])),
             threading.Thread(target=lambda: got.__setitem__("query", _query_receive(
                 served, keys[FLOODER], f"/{FLOODER}/parked")))]
    for poll in polls:
        poll.start()
    deadline = time.monotonic() + 5
    while served.parked() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    # THEN both wait parked: no server thread is theirs (the two are the clients'; a
    # re-check of a poll has a thread for the few milliseconds it takes)
    assert served.parked() == 2
    allowed = threads_before + 2 + 1  # + the wake-up timer
    deadline = time.monotonic() + 3
    while threading.active_count() > allowed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= allowed
    # AND each account's one place is free: its send is served while its poll waits
    json_sqs.send_message(QueueUrl=json_url, MessageBody="to json")
    query_sqs.send_message(QueueUrl=query_url, MessageBody="to query")
    for poll in polls:
        poll.join(timeout=10)
    assert got == {"json": "to json", "query": "to query"}
    assert served.parked() == 0


def _query_receive(server: LocalServer, key: tuple[str, str], path: str) -> str:
    """A Query-protocol ReceiveMessage at a queue's URL path; the body it got."""
    import urllib.request
    import xml.etree.ElementTree as ET

    body = b"Action=ReceiveMessage&Version=2012-11-05&WaitTimeSeconds=5"
    signed = sign("POST", server.url + path, body,
                  {"Content-Type": "application/x-www-form-urlencoded"},
                  key=key[0], secret=key[1], service="sqs")
    sent = urllib.request.Request(signed.url, data=body, method="POST", headers=signed.headers)
    try:
        with urllib.request.urlopen(sent, timeout=30) as response:
            answer = ET.fromstring(response.read())
    except urllib.error.HTTPError as exc:
        raise AssertionError(exc.read()) from exc
    return next(e.text or "" for e in answer.iter() if e.tag.endswith("}Body"))


def test_unsigned_requests_naming_a_victims_key_do_not_spend_its_budget(
        served: LocalServer, keys: dict[str, tuple[str, str]]) -> None:
    # GIVEN an attacker who knows the victim's key id but not its secret
    victim = client(served, keys[VICTIM])
    url = victim.create_queue(QueueName="victim")["QueueUrl"]
    forged = client(served, (keys[VICTIM][0], "not-the-secret"))
    # WHEN it sends many requests in the victim's name
    for _ in range(3 * BURST):
        with pytest.raises(forged.exceptions.ClientError, match="SignatureDoesNotMatch"):
            forged.send_message(QueueUrl=url, MessageBody="forged")
    # THEN the victim still has its whole budget left
    for number in range(BURST - 1):
        victim.send_message(QueueUrl=url, MessageBody=f"real-{number}")
    with pytest.raises(victim.exceptions.RequestThrottled):
        victim.send_message(QueueUrl=url, MessageBody="past the burst")


def test_more_requests_at_once_than_the_share_wait_their_turn(
        dmq: Client, keys: dict[str, tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a share of one request at a time, and a turn that is waited for briefly
    admission = runtime.admission()
    monkeypatch.setattr(admission.share, "wait_s", 0.3)
    from chalicelib.frontend.sigv4 import SignedRequest
    from chalicelib.service.exceptions import RateThrottledError
    from tests.functional.test_auth import json_request

    headers, body = json_request("ListQueues", {}, *keys[FLOODER])
    signed = SignedRequest("POST", "/", [], {k.lower(): v for k, v in headers.items()}, body)
    outcome: list[str] = []

    def second() -> None:
        try:
            with admission.admitted(signed, "us-east-1"):
                outcome.append("served")
        except RateThrottledError as exc:
            outcome.append(str(exc))

    # WHEN a second request comes while the first is served THEN it is refused after its wait
    with admission.admitted(signed, "us-east-1") as ticket:
        assert ticket.caller is not None and ticket.caller.account == FLOODER
        other = threading.Thread(target=second)
        other.start()
        other.join(timeout=5)
    assert len(outcome) == 1 and "in progress (at most 1 at once" in outcome[0]
    # AND once the first is done the next one is served
    other = threading.Thread(target=second)
    other.start()
    other.join(timeout=5)
    assert outcome[-1] == "served"


# -- the measured flood (the real server on DynamoDB Local) -----------------------------
@pytest.mark.e2e
def test_a_flood_leaves_another_tenants_sends_close_to_their_baseline() -> None:
    # GIVEN a required-mode server with its default fair share, one tenant flooding with
    # eight threads (no retries, no backoff) WHEN another sends one message at a time
    result = bench.measure(calls=80, threads=8)
    # THEN the flood really ran, and the quiet tenant's p50 stays near its baseline
    assert result.flood.served_per_s > 5, result
    assert result.ratio_p50 <= FLOOD_BOUND, bench.markdown(result)
