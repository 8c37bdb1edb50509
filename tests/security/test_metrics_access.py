"""GIVEN `GET /metrics`, which names every tenant's accounts and queues WHEN an anonymous
client scrapes it in the required mode, or many scrape at once THEN it is refused without a
credential (admin Basic or SigV4, or the configured bearer token), stays open in the open
mode, and scrapes share one rendering: their cost does not grow with the queues."""

from __future__ import annotations

import base64
import gzip
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from chalice.test import Client

from app import app, runtime
from chalicelib.aws import Clients
from chalicelib.settings import Settings
from dmqlocal import metrics_access
from dmqlocal.metrics import MetricsEndpoint
from dmqlocal.shared_render import SharedRender
from tests.admin_signing import ENDPOINT, admin_call, client, sign
from tests.clocks import FakeClock
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, launch
from tests.security.attackers import ROOT, ROOT_SECRET, new_data_dir, required_settings

TOKEN = "scrape-token-0123456789abcdef0123456789"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The data folder of the test's DMQ."""
    return new_data_dir(tmp_path)


def _basic(key: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode()}


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return required_settings(data_dir, metrics_token=TOKEN)


@pytest.fixture
def served(aws: Clients, settings: Settings, clock: FakeClock) -> Iterator[Client]:
    """The app with the local server's `GET /metrics` route."""
    metrics_access.install(app, runtime)
    runtime.configure(settings, clock)
    with Client(app) as test_client:
        yield test_client
    runtime.configure(None)


def test_an_anonymous_scrape_in_the_required_mode_is_refused(served: Client) -> None:
    client(served, ROOT, ROOT_SECRET).create_queue(QueueName="tenant-secret-name")
    for headers in ({}, {"Authorization": "Bearer wrong"}, _basic(ROOT, "wrong"),
                    {"Authorization": "AWS4-HMAC-SHA256 Credential=x"}):
        refused = served.http.get("/metrics", headers=headers)
        assert refused.status_code in (400, 401, 403), headers
        assert b"tenant-secret-name" not in refused.body
    assert "Bearer" in served.http.get("/metrics").headers["WWW-Authenticate"]


def test_an_admin_or_the_token_may_scrape(served: Client) -> None:
    client(served, ROOT, ROOT_SECRET).create_queue(QueueName="scraped")
    signed = sign("GET", f"{ENDPOINT}/metrics", key=ROOT, secret=ROOT_SECRET).headers
    for headers in ({"Authorization": f"Bearer {TOKEN}"}, _basic(ROOT, ROOT_SECRET), signed):
        answer = served.http.get("/metrics", headers=headers)
        assert answer.status_code == 200, (headers, answer.body)
        assert b'queue="scraped"' in answer.body


def test_a_key_that_is_not_an_admins_may_not_scrape(served: Client) -> None:
    made = admin_call(served, "POST", "/admin/keys", b'{"account": "111122223333"}',
                      key=ROOT, secret=ROOT_SECRET)
    key = made.json_body
    answer = served.http.get("/metrics", headers=_basic(key["accessKeyId"],
                                                         key["secretAccessKey"]))
    assert answer.status_code == 403


def test_concurrent_scrapes_share_one_rendering() -> None:
    renders: list[float] = []

    def render() -> bytes:
        renders.append(time.monotonic())
        time.sleep(0.3)
        return b"figures"

    shared = SharedRender(render, fresh_s=60)
    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(shared.get())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [b"figures"] * 4 and len(renders) == 1


def test_a_slow_rendering_is_redone_in_the_background_and_rarely() -> None:
    now = [0.0]
    started = threading.Event()
    release = threading.Event()

    def render() -> bytes:
        if started.is_set():  # the second rendering waits to be released
            release.wait(5)
        started.set()
        now[0] += 2.0  # each rendering "takes" 2 s of the clock
        return f"render at {now[0]}".encode()

    shared = SharedRender(render, fresh_s=1, duty=10, wait_budget_s=0.5, max_age_s=60,
                          clock=lambda: now[0])
    first = shared.get()
    now[0] += 19  # 10 x 2 s is not over yet: still fresh
    assert shared.get() == first and shared.renders == 1
    now[0] += 2  # stale: the caller gets the last one at once, a thread renders anew
    begun = time.monotonic()
    assert shared.get() == first
    assert time.monotonic() - begun < 0.5
    release.set()
    for _ in range(100):
        if shared.renders == 2:
            break
        time.sleep(0.05)
    assert shared.renders == 2 and shared.get() != first


def test_a_rendering_is_kept_no_longer_than_its_figures_may_age() -> None:
    now = [0.0]

    def render() -> bytes:
        now[0] += 2.0  # each rendering "takes" 2 s: ten times that would be 20 s
        return f"render at {now[0]}".encode()

    shared = SharedRender(render, fresh_s=1, duty=10, wait_budget_s=5, max_age_s=15,
                          clock=lambda: now[0])
    first = shared.get()
    now[0] += 12  # 12 s after it was made, 14 s after its figures were read: kept
    assert shared.get() == first
    now[0] += 1.5  # past 15 s less the 2 s it took: made again
    assert shared.get() != first and shared.renders == 2


def test_scrapes_within_the_interval_cost_the_store_nothing_whatever_the_queues(
        served: Client) -> None:
    sqs = client(served, ROOT, ROOT_SECRET)
    for i in range(30):
        sqs.create_queue(QueueName=f"many-{i}")
    endpoint = MetricsEndpoint(runtime, cache_s=60)
    bodies = {endpoint.respond()[2] for _ in range(20)}
    assert len(bodies) == 1 and endpoint.reads == 1


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


@pytest.mark.e2e
def test_over_http_the_required_mode_refuses_an_anonymous_scraper(tmp_path: Path) -> None:
    server = launch(DMQ_AUTH="required", DMQ_ROOT_ACCESS_KEY_ID=ROOT,
                    DMQ_ROOT_SECRET_ACCESS_KEY=ROOT_SECRET, DMQ_METRICS_TOKEN=TOKEN,
                    DMQ_DATA_DIR=str(tmp_path / "data"), DMQ_STORE="memory")
    try:
        assert server.wait_ready(START_TIMEOUT_S), server.output
        anonymous = _get(f"{server.url}/metrics")
        assert anonymous[0] == 401 and b"dmq_" not in anonymous[1]
        status, body = _get(f"{server.url}/metrics", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and b"# TYPE dmq_messages_visible gauge" in body
        assert _get(f"{server.url}/metrics", _basic(ROOT, ROOT_SECRET))[0] == 200
        status, packed = _get(f"{server.url}/metrics", {"Authorization": f"Bearer {TOKEN}",
                                                        "Accept-Encoding": "gzip"})
        assert status == 200 and b"# TYPE dmq_messages_visible gauge" in gzip.decompress(packed)
    finally:
        assert server.stop(STOP_TIMEOUT_S) == 0, server.output
