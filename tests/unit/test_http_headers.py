"""The local server's header parser (dmqlocal/http_headers.py) gives what the standard
library's gives, for well-formed blocks and for every malformed one it hands over."""

from __future__ import annotations

import http.client
import io

import pytest

from dmqlocal import http_headers
from dmqlocal.http_headers import install, parse_headers, uninstall

BLOCKS = [
    b"Host: 127.0.0.1:9324\r\nContent-Type: application/x-amz-json-1.0\r\n"
    b"X-Amz-Target: AmazonSQS.SendMessage\r\nContent-Length: 12\r\n\r\n",
    b"A:b\r\nEmpty:\r\nSpaces:   padded value  \r\nTabs:\t\tv\r\n\n",
    b"Dup: 1\r\nDup: 2\r\ndup: 3\r\n\r\n",
    b"Latin: caf\xe9 \x01 ctl\r\n\r\n",
    b"Folded: one\r\n two\r\n\tthree\r\n\r\n",  # continuation lines: the standard parser
    b"No colon here\r\nHost: x\r\n\r\n",
    b": no name\r\nHost: x\r\n\r\n",
    b"Bad Name: space in the name\r\n\r\n",
    b"Lone: carriage\rreturn\r\n\r\n",
    b"From someone\r\nHost: x\r\n\r\n",
    b"Unterminated: end of stream",
    b"\r\n",
    b"",
]


@pytest.mark.parametrize("block", BLOCKS)
def test_every_block_parses_as_the_standard_library_parses_it(block: bytes) -> None:
    ours = parse_headers(io.BytesIO(block + b"body"))
    theirs = http.client.parse_headers(io.BytesIO(block + b"body"))
    assert ours.items() == theirs.items()
    assert ours.get_all("Dup") == theirs.get_all("Dup")
    assert ours.get("content-length") == theirs.get("content-length")


def test_the_limits_are_the_standard_librarys() -> None:
    with pytest.raises(http.client.LineTooLong):
        parse_headers(io.BytesIO(b"A: " + b"x" * 70_000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        parse_headers(io.BytesIO(b"A: b\r\n" * 101 + b"\r\n"))


def test_install_puts_it_in_place_and_uninstall_takes_it_back() -> None:
    before = http.client.parse_headers  # a local server made by another test installs it
    try:
        install()
        install()
        assert http.client.parse_headers is parse_headers
        uninstall()
        assert http.client.parse_headers is http_headers._STANDARD
        assert http.client.parse_headers is not parse_headers
    finally:
        http.client.parse_headers = before
