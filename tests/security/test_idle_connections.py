"""GIVEN the local HTTP server
WHEN thousands of connections are opened and left idle, before or after a request
THEN they cost no thread each (idle connections wait in one selector), a normal client is
still served at once; past DMQ_HTTP_MAX_CONNECTIONS the longest-idle connection is closed
to make room, and when none is idle a new connection is refused cleanly (503 in the SQS
shape), never a hang or a crash."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from chalice import Chalice, Response

from chalicelib.settings import Settings
from dmqlocal.server import HttpLimits, LocalServer

IDLE = 3000  # idle sockets in the large tests
THREAD_MARGIN = 25  # threads the server may add beyond those it started with
WAIT_S = 20.0


def _app() -> Chalice:
    app = Chalice(app_name="idle-test")

    @app.route("/", methods=["POST"], content_types=["application/x-amz-json-1.0"])
    def echo() -> Response:
        request = app.current_request
        assert request is not None
        body = request.raw_body or b""
        if body.startswith(b"sleep"):
            time.sleep(float(body[5:]))
        return Response(body=json.dumps({"got": body.decode()}), status_code=200)

    return app


def _serve(limits: HttpLimits) -> Iterator[LocalServer]:
    local = LocalServer(_app(), "127.0.0.1", 0, limits=limits)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def server() -> Iterator[LocalServer]:
    yield from _serve(HttpLimits(idle_timeout_s=60.0, request_timeout_s=5.0,
                                 max_connections=IDLE + 500))


@pytest.fixture
def small() -> Iterator[LocalServer]:
    """A server that keeps at most 20 connections."""
    yield from _serve(HttpLimits(idle_timeout_s=60.0, request_timeout_s=5.0,
                                 max_connections=20))


def request(body: bytes) -> bytes:
    return (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def answer(sock: socket.socket) -> tuple[int, bytes]:
    """One whole response: its status and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed mid-response: {data!r}"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    return int(head.split()[1]), rest[:length]


def call(port: int, body: bytes = b"hello") -> tuple[int, bytes, float]:
    """A normal client: connect, one request, its answer and how long it all took."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(request(body))
        status, data = answer(sock)
    return status, data, time.monotonic() - started


def open_idle(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
            for _ in range(count)]


def wait_for(check: object, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(WAIT_S)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_the_connection_cap_setting() -> None:
    assert Settings.from_env({}).http_max_connections == 4096
    assert Settings.from_env({"DMQ_HTTP_MAX_CONNECTIONS": "50"}).http_max_connections == 50
    assert HttpLimits.of(Settings(http_max_connections=7)).max_connections == 7


def test_thousands_of_idle_connections_cost_no_thread_each(server: LocalServer) -> None:
    # GIVEN the server's threads before
    before = threading.active_count()
    # WHEN thousands of connections are opened and say nothing
    idle = open_idle(server.port, IDLE)
    try:
        wait_for(lambda: server.connections() == (IDLE, IDLE, 0))  # all held, all idle
        # THEN the thread count stays where it was, give or take a few
        assert threading.active_count() <= before + THREAD_MARGIN
        # AND a normal client is served, promptly
        status, body, took = call(server.port)
        assert (status, body) == (200, b'{"got": "hello"}') and took < 5
    finally:
        for sock in idle:
            sock.close()


def test_connections_idle_after_a_request_give_their_thread_back(server: LocalServer) -> None:
    # GIVEN many keep-alive connections, each of which made one request and went quiet
    before = threading.active_count()
    kept = open_idle(server.port, 500)
    try:
        for sock in kept:
            sock.sendall(request(b"once"))
        for sock in kept:
            assert answer(sock) == (200, b'{"got": "once"}')
        # THEN once they are idle no thread is left serving them
        wait_for(lambda: server.connections()[2] == 0)
        wait_for(lambda: threading.active_count() <= before + THREAD_MARGIN)
        # AND each is still open and serves its next request
        kept[0].sendall(request(b"again"))
        assert answer(kept[0]) == (200, b'{"got": "again"}')
    finally:
        for sock in kept:
            sock.close()


def test_past_the_cap_the_longest_idle_connection_is_closed_first(small: LocalServer) -> None:
    # GIVEN as many idle connections as the server keeps
    idle = open_idle(small.port, 20)
    try:
        wait_for(lambda: small.connections() == (20, 20, 0))
        # WHEN a normal client connects THEN it is served
        status, _, _ = call(small.port)
        assert status == 200
        # AND the connection idle longest was closed to make room, the newest kept
        assert closed_by_server(idle[0])
        idle[-1].sendall(request(b"still here"))
        assert answer(idle[-1]) == (200, b'{"got": "still here"}')
        assert small.connections()[0] <= 20
    finally:
        for sock in idle:
            sock.close()


def test_when_every_connection_is_at_work_a_new_one_is_refused_cleanly(
        small: LocalServer) -> None:
    # GIVEN every connection the server keeps busy with a slow request
    busy = open_idle(small.port, 20)
    try:
        for sock in busy:
            sock.sendall(request(b"sleep3"))
        wait_for(lambda: small.connections()[2] == 20)
        # WHEN one more connects THEN it is answered 503 ServiceUnavailable and closed
        with socket.create_connection(("127.0.0.1", small.port), timeout=WAIT_S) as extra:
            status, body = answer(extra)
            assert status == 503
            assert json.loads(body)["__type"].endswith("#ServiceUnavailable")
            assert closed_by_server(extra)
        # AND the busy ones are all answered
        for sock in busy:
            assert answer(sock) == (200, b'{"got": "sleep3"}')
    finally:
        for sock in busy:
            sock.close()
    # AND once they are done (the server has seen them close), new clients are served again
    wait_for(lambda: small.connections()[0] < 20)
    assert call(small.port)[0] == 200


def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    for local in _serve(HttpLimits(idle_timeout_s=0.5, request_timeout_s=1.0,
                                   max_connections=10)):
        with socket.create_connection(("127.0.0.1", local.port), timeout=WAIT_S) as sock:
            started = time.monotonic()
            assert closed_by_server(sock)
            assert 0.3 < time.monotonic() - started < 5
        wait_for(lambda local=local: local.connections()[0] == 0)
