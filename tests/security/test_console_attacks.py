"""GIVEN the web console in the required mode WHEN an attacker posts a form to it from
another site with the admin's signed-in session, forges a form token with the receipt key
once published, or guesses the admin's secret again and again THEN the post is refused
(Origin, Referer), the forged token too, and guessing is slowed after five failures per key
and per client address and locked out after twenty, each refusal answered at once with
Retry-After."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.frontend.console.csrf import CsrfTokens
from chalicelib.service.sign_in_limits import LOCKOUT_S, SignInLimits
from chalicelib.settings import Settings
from tests.clocks import FakeClock
from tests.security.attackers import (
    ACCOUNT,
    PUBLISHED_KEY,
    ROOT,
    ROOT_SECRET,
    new_data_dir,
    required_settings,
)

HOST = "dmq.test"
PAGE = f"/console/queues/{ACCOUNT}/orders"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The data folder of the test's DMQ."""
    return new_data_dir(tmp_path)


def basic(key: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode(),
            "Host": HOST}


ADMIN = basic(ROOT, ROOT_SECRET)


class Moment:
    """A clock for the sign-in limits that the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    """Required mode; the test client's address (127.0.0.1) is a trusted proxy, so each
    attempt can come from the client address its X-Forwarded-For names."""
    return required_settings(data_dir, trusted_proxies=("127.0.0.1",))


@pytest.fixture
def moment(dmq: Client) -> Iterator[Moment]:
    clock = Moment()
    runtime.sign_in_limits = SignInLimits(now=clock)
    yield clock


@pytest.fixture
def orders(dmq: Client) -> Any:
    from tests.admin_signing import client

    sqs = client(dmq, ROOT, ROOT_SECRET)
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="keep me")
    return sqs, url


def _token(dmq: Client) -> str:
    html = dmq.http.get(PAGE, headers=ADMIN).body.decode()
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def _purge(dmq: Client, token: str, **headers: str) -> Any:
    return dmq.http.post(f"{PAGE}/purge", body=urlencode(
        {"csrf_token": token, "confirm": "yes"}).encode(), headers={
        **ADMIN, "Content-Type": "application/x-www-form-urlencoded", **headers})


def _left(orders: Any) -> list[str]:
    sqs, url = orders
    got = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)
    return [m["Body"] for m in got.get("Messages", [])]


def test_a_cross_origin_post_with_a_valid_session_and_token_is_refused(
        dmq: Client, orders: Any) -> None:
    token = _token(dmq)
    for foreign in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                    {"Referer": "http://evil.example/page.html"},
                    {"Origin": "https://dmq.test"}):  # another scheme is another origin
        refused = _purge(dmq, token, **foreign)
        assert refused.status_code == 403, foreign
        assert "InvalidCsrfToken" in refused.body.decode()
    assert _left(orders) == ["keep me"]
    # the console's own origin is served (the check is on the origin, not on every post)
    assert _purge(dmq, token, Origin=f"http://{HOST}").status_code == 303
    assert _left(orders) == []


def test_a_token_forged_with_the_published_key_is_refused(
        dmq: Client, orders: Any, clock: FakeClock) -> None:
    forged = CsrfTokens(PUBLISHED_KEY).issue(ROOT, int(clock.now_ms() / 1000))
    refused = _purge(dmq, forged, Origin=f"http://{HOST}")
    assert refused.status_code == 403 and "InvalidCsrfToken" in refused.body.decode()
    assert _left(orders) == ["keep me"]


def _attempt(dmq: Client, key: str, secret: str, address: str) -> Any:
    return dmq.http.get("/console", headers={**basic(key, secret), "X-Forwarded-For": address})


def test_guessing_one_keys_secret_from_many_addresses_is_slowed_then_locked_out(
        dmq: Client, moment: Moment) -> None:
    # GIVEN an attacker who knows the admin's key id and sends each guess from a new address
    statuses = [_attempt(dmq, ROOT, f"guess-{i}", f"198.51.100.{i}").status_code
                for i in range(5)]
    # THEN the fifth failure makes the next attempt wait, even with the right secret
    assert statuses == [401, 401, 401, 401, 429]
    waiting = _attempt(dmq, ROOT, ROOT_SECRET, "198.51.100.99")
    assert waiting.status_code == 429 and waiting.headers["Retry-After"] == "1"
    # WHEN it keeps guessing, waiting each time as long as it is told
    failures, retry_after = 5, 1
    while retry_after < LOCKOUT_S:
        moment.now += retry_after
        started = time.monotonic()
        answer = _attempt(dmq, ROOT, f"guess-{failures}", f"203.0.113.{failures}")
        assert time.monotonic() - started < 2  # refused at once: nothing sleeps
        failures += 1
        retry_after = int(answer.headers["Retry-After"])
    # THEN the twentieth failure locks the key out for its lockout time
    assert failures == 20 and retry_after == LOCKOUT_S
    moment.now += LOCKOUT_S - 1
    assert _attempt(dmq, ROOT, ROOT_SECRET, "192.0.2.1").status_code == 429
    moment.now += 1
    assert _attempt(dmq, ROOT, ROOT_SECRET, "192.0.2.1").status_code == 200


def test_guessing_many_keys_from_one_address_is_slowed(dmq: Client, moment: Moment) -> None:
    statuses = [_attempt(dmq, f"AKIAGUESSGUESS{i:06d}", "x", "198.51.100.7").status_code
                for i in range(5)]
    assert statuses == [401, 401, 401, 401, 429]
    # that address waits, whatever key it tries; the admin elsewhere is not held up
    assert _attempt(dmq, ROOT, ROOT_SECRET, "198.51.100.7").status_code == 429
    assert _attempt(dmq, ROOT, ROOT_SECRET, "192.0.2.10").status_code == 200
    moment.now += 1
    assert _attempt(dmq, ROOT, ROOT_SECRET, "198.51.100.7").status_code == 200


def test_a_spoofed_forwarded_address_counts_only_behind_a_trusted_proxy(
        dmq: Client, moment: Moment) -> None:
    runtime.configure(replace(runtime.settings, trusted_proxies=()), runtime.clock)
    runtime.sign_in_limits = SignInLimits(now=moment)
    # each guess claims another address, but the connection's own one is what counts
    statuses = [_attempt(dmq, f"AKIAGUESSGUESS{i:06d}", "x", f"198.51.100.{i}").status_code
                for i in range(5)]
    assert statuses == [401, 401, 401, 401, 429]


def test_failures_under_ever_new_names_cannot_fill_the_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from chalicelib.service import sign_in_limits

    monkeypatch.setattr(sign_in_limits, "MAX_TRACKED", 50)
    moment = Moment()
    limits = SignInLimits(now=moment)
    for i in range(500):
        limits.failed(f"AKIA{i:016d}", f"10.0.{i // 250}.{i % 250}")
        moment.now += 0.01
    assert len(limits._failures) <= 50
    # the newest names are the ones kept: a fresh run of guesses is still counted
    for _ in range(4):
        limits.failed("AKIATARGET", "10.9.9.9")
    assert limits.retry_after("AKIATARGET", "192.0.2.1") == 0
    limits.failed("AKIATARGET", "10.9.9.9")
    assert limits.retry_after("AKIATARGET", "192.0.2.1") == 1
