"""The characters SQS allows in text: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
#x10000-#x10FFFF (XML 1.0's; a lone surrogate, U+D800 to U+DFFF, is not a character)."""

from __future__ import annotations

import re

_INVALID_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def has_invalid_characters(text: str) -> bool:
    """True when text holds a character outside SQS's allowed set."""
    return _INVALID_CHARS.search(text) is not None


def first_invalid_character(text: str) -> str | None:
    """The first character of text outside SQS's allowed set, or None."""
    found = _INVALID_CHARS.search(text)
    return found.group() if found is not None else None


def printable(text: str) -> str:
    """Text safe to quote in an error message: invalid characters as escapes."""
    return _INVALID_CHARS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"),
                              text)


def utf8_length(text: str) -> int:
    """UTF-8 bytes of text; a lone surrogate (never accepted, but measured) counts 3."""
    return len(text.encode("utf-8", "surrogatepass"))
