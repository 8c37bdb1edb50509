"""Header parsing for the local server's `http.server` and `http.client`, without the email
parser for headers that are well formed.

The standard library parses every request's and every answer's headers with the email
package's feed parser: about a sixth of the local server's interpreter time per SQS call
once its store calls stopped using botocore (chalicelib/dynamo_client.py), for the
server's own request headers and for the answers of S3 and PynamoDB's store calls.
`parse_headers` gives the same message for a block of well-formed lines (a name of
printable characters, a colon, a value without CR or LF), and hands anything else
(continuation lines, a line without a colon, stray control characters) to the standard
parser, so malformed requests meet exactly the checks they met before
(tests/unit/test_http_headers.py compares the two). `install()` puts it in place of
`http.client.parse_headers`, which `http.server` calls too.
"""

from __future__ import annotations

import email.parser
import http.client
import re
import threading
from typing import Any

_WELL_FORMED = re.compile(rb"[\x21-\x39\x3b-\x7e]+:[^\r\n]*\r?\n")
_END = (b"\r\n", b"\n", b"")
_STANDARD = http.client.parse_headers
_lock = threading.Lock()


def parse_headers(fp: Any, _class: type[http.client.HTTPMessage] = http.client.HTTPMessage
                  ) -> http.client.HTTPMessage:
    """`http.client.parse_headers`, with the same limits (line length, header count) and
    the same result."""
    lines = http.client._read_headers(fp)  # type: ignore[attr-defined]
    body = lines[:-1] if lines and lines[-1] in _END else lines
    if all(_WELL_FORMED.fullmatch(line) for line in body):
        message = _class()
        pairs = []
        for line in body:
            name, _, value = line.decode("iso-8859-1").partition(":")
            pairs.append((name, value.lstrip(" \t").rstrip("\r\n")))
        message._headers = pairs  # type: ignore[attr-defined]  # as the feed parser sets them
        return message
    text = b"".join(lines).decode("iso-8859-1")
    return email.parser.Parser(_class=_class).parsestr(text)


def install() -> None:
    """Parse every header block of this process with `parse_headers` (idempotent)."""
    with _lock:
        http.client.parse_headers = parse_headers  # type: ignore[assignment]


def uninstall() -> None:
    """Back to the standard library's parser."""
    with _lock:
        http.client.parse_headers = _STANDARD
