"""Reading an HTTP/1.1 request body, strictly, within a deadline.

The rules (RFC 9112 section 6): a body is framed by one Content-Length (digits only;
repeats must agree) or by `Transfer-Encoding: chunked`, never both; a request with neither
has no body. Anything else is refused with 400, as is a body over the size limit with 413,
and the connection is closed, since where the next request starts is then unknown.
"""

from __future__ import annotations

import io
import re
import socket
import ssl
import time
from email.message import Message

from dmqlocal.http_errors import HttpError

_DIGITS = re.compile(rb"[0-9]{1,19}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
MAX_LINE = 4096  # a chunk-size or trailer line
MAX_TRAILERS = 64
READ_SIZE = 64 * 1024


class DeadlineSocketIO(io.RawIOBase):
    """A socket's reading side that gives up at a deadline, whatever the peer trickles:
    each read waits at most until `deadline` (time.monotonic()), or without end if None."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self.deadline: float | None = None
        self.nonblocking = False  # read only what has arrived (None when nothing has)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int | None:  # type: ignore[override]
        if self.nonblocking:
            self._sock.settimeout(0)
            try:
                return self._sock.recv_into(buffer)
            except (BlockingIOError, ssl.SSLWantReadError):
                return None
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the request did not arrive in time")
            self._sock.settimeout(remaining)
        else:
            self._sock.settimeout(None)
        return self._sock.recv_into(buffer)


def arrived(reader: io.BufferedReader[DeadlineSocketIO], raw: DeadlineSocketIO) -> bool:
    """True when bytes of the next request are buffered or waiting in the socket (or the
    peer closed), found without blocking."""
    raw.nonblocking = True
    try:
        return bool(reader.peek(1))
    finally:
        raw.nonblocking = False


def read_body(headers: Message, rfile: io.BufferedIOBase, max_bytes: int) -> bytes:
    """The request's body, as its headers frame it; HttpError when they frame it wrongly."""
    encodings = headers.get_all("transfer-encoding") or []
    lengths = headers.get_all("content-length") or []
    if encodings:
        if lengths:
            raise HttpError(400, "A request may not carry both Transfer-Encoding and "
                                 "Content-Length.")
        codings = [c.strip().lower() for value in encodings for c in value.split(",")]
        if codings != ["chunked"]:
            raise HttpError(400, f"Transfer-Encoding {', '.join(codings)!r} is not "
                                 "supported: send chunked or a Content-Length.")
        return _read_chunked(rfile, max_bytes)
    if not lengths:
        return b""
    length = _content_length(lengths)
    if length > max_bytes:
        raise HttpError(413, f"The request body of {length} bytes is larger than the "
                             f"{max_bytes} bytes DMQ accepts.")
    return _read_exact(rfile, length)


def _content_length(values: list[str]) -> int:
    texts = {v.strip().encode("latin-1", "replace") for v in values}
    if len(texts) != 1:
        raise HttpError(400, "The request carries Content-Length headers that disagree.")
    text = texts.pop()
    if not _DIGITS.fullmatch(text):
        raise HttpError(400, "Content-Length must be a non-negative decimal number.")
    return int(text)


def _read_exact(rfile: io.BufferedIOBase, size: int) -> bytes:
    parts: list[bytes] = []
    while size > 0:
        data = rfile.read1(min(size, READ_SIZE))
        if not data:
            raise HttpError(400, "The connection closed before the request body ended.")
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _read_line(rfile: io.BufferedIOBase) -> bytes:
    line = rfile.readline(MAX_LINE + 1)
    if not line.endswith(b"\n") or len(line) > MAX_LINE:
        raise HttpError(400, "A chunked body has a line that is too long or incomplete.")
    return line.rstrip(b"\r\n")


def _read_chunked(rfile: io.BufferedIOBase, max_bytes: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_text = _read_line(rfile).split(b";", 1)[0].strip()
        if not _HEX.fullmatch(size_text):
            raise HttpError(400, "A chunked body has a chunk size that is not hexadecimal.")
        size = int(size_text, 16)
        if size == 0:
            break
        total += size
        if total > max_bytes:
            raise HttpError(413, f"The chunked request body is larger than the {max_bytes} "
                                 "bytes DMQ accepts.")
        parts.append(_read_exact(rfile, size))
        if _read_exact(rfile, 2) != b"\r\n":
            raise HttpError(400, "A chunk of the body does not end where its size says.")
    for _ in range(MAX_TRAILERS):
        if not _read_line(rfile):
            return b"".join(parts)
    raise HttpError(400, "A chunked body has too many trailer lines.")
