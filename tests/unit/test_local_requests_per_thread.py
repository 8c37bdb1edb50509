"""GIVEN the local server answering many requests at once from threads WHEN each request's
view reads `app.current_request` while others arrive THEN every view reads its own request.

Chalice keeps the request being served on the app object, which is right on Lambda (one
request at a time per container) and a race in a threaded server: a view could answer
another thread's request and leave its own unserved. Under `make chaos`, 10 messages of a
SendMessageBatch were acknowledged that way while another batch was written twice."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator

import pytest
from chalice import Chalice, Response

from dmqlocal.server import LocalServer

THREADS = 8
CALLS = 25


def _app() -> Chalice:
    app = Chalice(app_name="per-thread-test")

    @app.route("/", methods=["POST"], content_types=["application/json"])
    def echo() -> Response:
        first = app.current_request
        assert first is not None
        time.sleep(0.002)  # other threads' requests arrive meanwhile
        again = app.current_request
        assert again is not None
        return Response(body=json.dumps({"first": (first.raw_body or b"").decode(),
                                         "again": (again.raw_body or b"").decode()}))

    return app


@pytest.fixture
def server() -> Iterator[LocalServer]:
    local = LocalServer(_app(), "127.0.0.1", 0)
    local.start()
    yield local
    local.stop()


def test_each_thread_reads_its_own_request(server: LocalServer) -> None:
    mixed: list[tuple[str, dict[str, str]]] = []

    def client(number: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        for call in range(CALLS):
            body = f"request-{number}-{call}"
            conn.request("POST", "/", body=body, headers={"Content-Type": "application/json"})
            answer = json.loads(conn.getresponse().read())
            if answer != {"first": body, "again": body}:
                mixed.append((body, answer))
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not mixed, f"{len(mixed)} of {THREADS * CALLS} views read another request: {mixed[:3]}"
