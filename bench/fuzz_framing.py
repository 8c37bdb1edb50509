"""HTTP framing mutations of one JSON 1.0 request: lengths, chunked bodies, methods, paths,
versions, header counts and sizes, line endings and pipelining."""

from __future__ import annotations

import random
from collections.abc import Callable

CONTENT_TYPES = [b"application/x-amz-json-1.0", b"application/json", b"text/plain",
                 b"image/png", b"application/x-amz-json-1.0; charset=utf-8", b""]
METHODS = [b"GET", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"TRACE", b"post", b"FOO",
           b"G\x00T", b"CONNECT"]
PATHS = [b"/nope", b"//", b"/000000000000/q", b"*", b"http://x/", b"/?a=b&c", b"/%ff",
         b"/\xff", b"/admin/nope", b"/" + b"a" * 70_000, b"/?" + b"q" * 5000, b""]
VERSIONS = [b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.1x", b"HTTP/0.9", b"", b"HTTPS/1.1",
            b"HTTP/1.10", b"HTTP/9.9", b"http/1.1"]


def framing_case(rng: random.Random, host: str, action: str, body: bytes) -> tuple[bytes, bool]:
    """The request's bytes, framed wrongly (or unusually); True when it is a HEAD."""
    mutation: Callable[[random.Random, list[bytes], bytes], tuple[bytes, bool]] = rng.choice([
        _length, _duplicate_length, _chunked, _chunked, _method, _path, _version,
        _headers, _line_endings, _pipelined, _content_type,
    ])
    head = [b"Host: " + host.encode(), b"X-Amz-Target: AmazonSQS." + action.encode()]
    return mutation(rng, head, body)


def _build(request_line: bytes, head: list[bytes], body: bytes, eol: bytes = b"\r\n") -> bytes:
    return request_line + eol + b"".join(h + eol for h in head) + eol + body


def _post(head: list[bytes], body: bytes, content_type: bytes = CONTENT_TYPES[0]) -> bytes:
    return _build(b"POST / HTTP/1.1", [*head, b"Content-Type: " + content_type,
                                       b"Content-Length: " + str(len(body)).encode()], body)


def _length(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    value = rng.choice([b"abc", b"-5", b"+5", b" 5", b"0x10", b"1e3", b"", b"9" * 20,
                        b"9" * 12, str(len(body) + 7).encode(),
                        str(max(0, len(body) - 3)).encode(), b"5, 5", b"\xff"])
    return _build(b"POST / HTTP/1.1", [*head, b"Content-Type: " + CONTENT_TYPES[0],
                                       b"Content-Length: " + value], body), False


def _duplicate_length(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    second = rng.choice([len(body), len(body) + 1, 0])
    return _build(b"POST / HTTP/1.1", [
        *head, b"Content-Type: " + CONTENT_TYPES[0], b"Content-Length: " + str(len(body)).encode(),
        b"Content-Length: " + str(second).encode()], body), False


def _chunks(rng: random.Random, body: bytes) -> bytes:
    out, i = [], 0
    while i < len(body):
        size = rng.choice([1, 7, 100, 4096, len(body)])
        piece = body[i:i + size]
        ext = rng.choice([b"", b";x=1", b" ;y"])
        out.append(b"%x" % len(piece) + ext + b"\r\n" + piece + b"\r\n")
        i += size
    trailer = rng.choice([b"", b"X-T: 1\r\n"])
    return b"".join(out) + b"0\r\n" + trailer + b"\r\n"


def _chunked(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    encoded = _chunks(rng, body)
    broken = rng.choice([
        encoded, encoded, encoded[:-2], encoded[:len(encoded) // 2], b"zz\r\n" + encoded,
        b"FFFFFFFFFF\r\n", encoded.replace(b"\r\n", b"\n"), b"5\r\nhelloXX0\r\n\r\n",
        b"0\r\n" + b"X: y\r\n" * 70 + b"\r\n", b"1" * 5000 + b"\r\n",
    ])
    coding = rng.choice([b"chunked", b"chunked", b"Chunked", b"gzip, chunked",
                         b"chunked, chunked", b"identity", b""])
    extra = [b"Content-Length: " + str(len(body)).encode()] if rng.random() < 0.15 else []
    return _build(b"POST / HTTP/1.1", [*head, b"Content-Type: " + CONTENT_TYPES[0],
                                       b"Transfer-Encoding: " + coding, *extra], broken), False


def _method(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    if rng.random() < 0.3:
        return _build(b"HEAD / HTTP/1.1", head, b""), True
    method = rng.choice(METHODS)
    return _build(method + b" / HTTP/1.1", [*head, b"Content-Length: " + str(len(body)).encode()],
                  body), False


def _path(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    method = rng.choice([b"POST", b"GET"])
    path = rng.choice(PATHS + [b"/admin/queues", b"/admin/clusters"] * (method == b"GET"))
    return _build(method + b" " + path + b" HTTP/1.1", [
        *head, b"Content-Type: " + CONTENT_TYPES[0],
        b"Content-Length: " + str(len(body)).encode()], body), False


def _version(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    version = rng.choice(VERSIONS)
    return _build(b"POST / " + version, [*head, b"Content-Type: " + CONTENT_TYPES[0],
                                        b"Content-Length: " + str(len(body)).encode()],
                  body), False


def _headers(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    extra = rng.choice([
        [b"X-A: b"] * rng.choice([99, 101, 300]), [b"X-Long: " + b"v" * 70_000],
        [b"X-Folded: a", b" continued"], [b"NoColon"], [b"Bad Name: x"], [b"X-Nul: a\x00b"],
        [b"Expect: 100-continue"], [b"Connection: close"], [b"Authorization: \xff\xfe"],
        [b"Host: second"], [b"X-Amz-Target: AmazonSQS.ListQueues"], [b": empty-name"],
    ])
    if rng.random() < 0.2:
        head = head[1:]  # no Host
    return _post([*head, *extra], body), False


def _line_endings(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    request = _post(head, body)
    choice = rng.random()
    if choice < 0.3:
        return request.replace(b"\r\n", b"\n"), False
    if choice < 0.6:
        return rng.choice([b"\r\n", b"\r\n\r\n", b" \r\n", b"\n"]) + request, False
    return request.replace(b"\r\n", b"\r", 1), False


def _pipelined(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    first = _post(head, body)
    second = rng.choice([_post(head, body), b"GARBAGE\r\n\r\n", rng.randbytes(20), b"\r\n"])
    return first + second, False


def _content_type(rng: random.Random, head: list[bytes], body: bytes) -> tuple[bytes, bool]:
    content_type = rng.choice(CONTENT_TYPES)
    if not content_type:
        return _build(b"POST / HTTP/1.1", [*head, b"Content-Length: " + str(len(body)).encode()],
                      body), False
    return _post(head, body, content_type), False
