"""MD5 digests of bodies and attributes, computed with AWS's algorithm."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

from chalicelib.domain.messages import AttributeValue


def md5_of_body(body: str) -> str:
    """Hex MD5 of the UTF-8 body."""
    return hashlib.md5(body.encode("utf-8")).hexdigest()


def _field(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def md5_of_attributes(attributes: Mapping[str, AttributeValue]) -> str | None:
    """Hex MD5 over sorted names, each with length-prefixed type and value; None if empty."""
    if not attributes:
        return None
    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        digest.update(_field(name.encode("utf-8")))
        digest.update(_field(value.data_type.encode("utf-8")))
        if value.is_binary:
            digest.update(b"\x02" + _field(value.binary_value or b""))
        else:
            digest.update(b"\x01" + _field((value.string_value or "").encode("utf-8")))
    return digest.hexdigest()
