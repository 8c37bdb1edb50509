"""GIVEN the local HTTP server WHEN requests are framed wrongly, stall, or fail THEN each gets
a well-formed HTTP answer in the SQS error shape, and kept-alive connections stay in step."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator

import pytest
from chalice import Chalice, Response

from dmqlocal.server import HttpLimits, LocalServer

BIG = 32 * 1024 * 1024  # more than socket buffers hold
LIMITS = HttpLimits(idle_timeout_s=1.0, request_timeout_s=0.6, max_body_bytes=1000)


def _app() -> Chalice:
    app = Chalice(app_name="http-test")

    @app.route("/", methods=["POST"], content_types=["application/x-amz-json-1.0"])
    def echo() -> Response:
        request = app.current_request
        assert request is not None
        body = request.raw_body or b""
        if body == b"big":
            return Response(body="x" * BIG, status_code=200)
        if body.startswith(b"sleep"):
            time.sleep(float(body[5:]))  # an answer slower than the request timeout
        return Response(body=json.dumps({"got": body.decode()}), status_code=200)

    return app


@pytest.fixture
def server() -> Iterator[LocalServer]:
    local = LocalServer(_app(), "127.0.0.1", 0, limits=LIMITS)
    local.start()
    yield local
    local.stop()


class Conn:
    """A raw keep-alive connection that reads whole HTTP/1.1 responses."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def response(self, head: bool = False) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), f"connection closed mid-response: {self.buffer!r}"
        head_bytes, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head_bytes.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        length = 0 if head else int(headers["content-length"])
        while len(self.buffer) < length:
            assert self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        """True when the server has closed the connection (nothing more to read)."""
        return not self.buffer and not self._fill()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def conn(server: LocalServer) -> Iterator[Conn]:
    c = Conn(server.port)
    yield c
    c.close()


def post(body: bytes, headers: bytes = b"", length: bool = True) -> bytes:
    framing = f"Content-Length: {len(body)}\r\n".encode() if length else b""
    return (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
            + framing + headers + b"\r\n" + body)


def assert_sqs_error(status: int, headers: dict[str, str], body: bytes, code: str) -> None:
    assert headers["content-type"] == "application/x-amz-json-1.0"
    assert headers["x-amzn-query-error"] == f"{code};Sender"
    error = json.loads(body)
    assert error["__type"].rsplit("#", 1)[-1] == code and error["message"]
    assert status < 500


def test_a_request_and_the_next_on_the_same_connection(conn: Conn) -> None:
    conn.send(post(b"one") + post(b"two"))
    assert conn.response()[2] == b'{"got": "one"}'
    assert conn.response()[2] == b'{"got": "two"}'


@pytest.mark.parametrize("value", [b"abc", b"-5", b"+5", b"0x10", b"1e3", b"5, 5", b""])
def test_a_content_length_that_is_not_a_number_is_400_and_closes(
    conn: Conn, value: bytes,
) -> None:
    conn.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + value + b"\r\n\r\nhello")
    status, headers, body = conn.response()
    assert status == 400
    assert_sqs_error(status, headers, body, "MalformedHttpRequestException")
    assert headers["connection"] == "close" and conn.closed()


def test_content_lengths_that_disagree_are_400(conn: Conn) -> None:
    conn.send(post(b"hello", b"Content-Length: 3\r\n"))
    status, headers, body = conn.response()
    assert status == 400 and headers["connection"] == "close"
    assert_sqs_error(status, headers, body, "MalformedHttpRequestException")


def test_content_lengths_that_agree_are_served(conn: Conn) -> None:
    conn.send(post(b"hello", b"Content-Length: 5\r\n") + post(b"next"))
    assert conn.response()[2] == b'{"got": "hello"}'
    assert conn.response()[2] == b'{"got": "next"}'


def test_a_chunked_body_is_decoded_and_the_connection_stays_in_step(conn: Conn) -> None:
    chunked = b"5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
    conn.send(post(chunked, b"Transfer-Encoding: chunked\r\n", length=False) + post(b"next"))
    status, _, body = conn.response()
    assert (status, body) == (200, b'{"got": "hello 0123456789"}')
    assert conn.response()[2] == b'{"got": "next"}'


@pytest.mark.parametrize(("chunked", "status"), [
    (b"zz\r\nhello\r\n0\r\n\r\n", 400),  # size not hexadecimal
    (b"5\r\nhelloXX0\r\n\r\n", 400),  # chunk longer than its size
    (b"FFFFFFFF\r\n", 413),  # over the body limit
])
def test_a_broken_chunked_body_is_refused_and_closes(
    conn: Conn, chunked: bytes, status: int,
) -> None:
    conn.send(post(chunked, b"Transfer-Encoding: chunked\r\n", length=False))
    got, headers, body = conn.response()
    assert got == status and headers["connection"] == "close"
    assert_sqs_error(got, headers, body, "MalformedHttpRequestException" if status == 400
                     else "RequestEntityTooLargeException")
    assert conn.closed()


@pytest.mark.parametrize("framing", [
    b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", b"Transfer-Encoding: gzip\r\n",
])
def test_other_transfer_framings_are_400(conn: Conn, framing: bytes) -> None:
    conn.send(post(b"5\r\nhello\r\n0\r\n\r\n", framing, length=False))
    status, headers, body = conn.response()
    assert status == 400 and headers["connection"] == "close"
    assert_sqs_error(status, headers, body, "MalformedHttpRequestException")


def test_a_body_over_the_limit_is_413(conn: Conn) -> None:
    conn.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n")
    status, headers, body = conn.response()
    assert status == 413 and headers["connection"] == "close"
    assert_sqs_error(status, headers, body, "RequestEntityTooLargeException")


def test_head_sends_headers_only(conn: Conn) -> None:
    conn.send(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n" + post(b"after"))
    status, headers, _ = conn.response(head=True)
    assert status == 405 and int(headers["content-length"]) > 0
    # THEN the next response on the connection is read where it starts
    status, _, body = conn.response()
    assert (status, body) == (200, b'{"got": "after"}')


@pytest.mark.parametrize(("request_bytes", "status", "code"), [
    (b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404, "UnknownOperationException"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 405, "InvalidAction"),
    (b"PATCH / HTTP/1.1\r\nHost: x\r\n\r\n", 405, "InvalidAction"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 0\r\n\r\n",
     415, "UnsupportedMediaTypeException"),
    (b"GARBAGE\r\n\r\n", 400, "MalformedHttpRequestException"),
    (b"GET /\r\n\r\n", 400, "MalformedHttpRequestException"),  # HTTP/0.9
    (b"POST / HTTP/2.0\r\n\r\n", 400, "MalformedHttpRequestException"),
    (b"POST / HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431,
     "RequestHeaderFieldsTooLargeException"),
    (b"POST /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "MalformedHttpRequestException"),
    (b"GET /nope HTTP/1.1\r\nAuthorization: \xff\r\n\r\n", 404, "UnknownOperationException"),
])
def test_every_error_is_in_the_sqs_shape(
    conn: Conn, request_bytes: bytes, status: int, code: str,
) -> None:
    conn.send(request_bytes)
    got, headers, body = conn.response()
    assert got == status, body
    assert_sqs_error(got, headers, body, code)


def test_an_idle_connection_is_closed_after_the_idle_timeout(conn: Conn) -> None:
    conn.send(post(b"one"))
    conn.response()
    started = time.monotonic()
    assert conn.closed()
    assert LIMITS.idle_timeout_s - 0.1 <= time.monotonic() - started < 4


def test_a_half_sent_body_gets_408_within_the_request_timeout(conn: Conn) -> None:
    started = time.monotonic()
    conn.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
    status, headers, body = conn.response()
    assert status == 408 and headers["connection"] == "close"
    assert_sqs_error(status, headers, body, "RequestTimeoutException")
    assert time.monotonic() - started < 3 and conn.closed()


def test_headers_trickled_past_the_request_timeout_get_408(conn: Conn) -> None:
    conn.send(b"POST / HTTP/1.1\r\n")
    started = time.monotonic()
    with pytest.raises(AssertionError):  # the server answers 408 before the headers end
        for _ in range(20):
            conn.send(b"X-Slow: 1\r\n")
            time.sleep(0.1)
            assert not conn.buffer and not _readable(conn.sock)
    assert conn.response()[0] == 408
    assert time.monotonic() - started < 3


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def test_a_slow_answer_is_not_cut_by_the_request_timeout(conn: Conn) -> None:
    conn.send(post(b"sleep1.5"))
    status, _, body = conn.response()
    assert (status, body) == (200, b'{"got": "sleep1.5"}')


def test_blank_lines_before_a_request_are_ignored(conn: Conn) -> None:
    conn.send(b"\r\n\r\n" + post(b"after blank lines"))
    assert conn.response()[2] == b'{"got": "after blank lines"}'


def test_a_whitespace_request_line_is_400(conn: Conn) -> None:
    conn.send(b" \r\n\r\n")
    status, headers, body = conn.response()
    assert_sqs_error(status, headers, body, "MalformedHttpRequestException")


def test_a_refused_body_sent_in_full_does_not_reset_the_answer(server: LocalServer) -> None:
    # GIVEN a client that sends a body over the limit in full before it reads
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n"
                 + b"x" * 3_000_000)  # more than socket buffers hold: the server must drain
    sock.shutdown(socket.SHUT_WR)
    # THEN its 413 arrives intact (unread bytes at close would reset the connection)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    assert data.startswith(b"HTTP/1.1 413 ") and b"RequestEntityTooLargeException" in data


def test_an_answer_the_client_stops_reading_is_cut_without_a_second_answer(
    conn: Conn,
) -> None:
    # GIVEN a client that asks for a large answer and does not read it for a while
    conn.send(post(b"big"))
    time.sleep(LIMITS.request_timeout_s * 3)
    # THEN the server gave up writing and closed: part of the answer, then nothing else
    conn.sock.settimeout(5)
    while conn._fill():
        pass
    assert conn.buffer.startswith(b"HTTP/1.1 200 ")
    assert len(conn.buffer) < BIG and b"HTTP/1.1 408" not in conn.buffer
