"""Validation of message bodies, attributes and sizes, with SQS's error codes and texts."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from chalicelib.domain.messages import AttributeValue
from chalicelib.service.exceptions import (
    InvalidMessageContentsError,
    InvalidParameterValueError,
    MissingParameterError,
    SqsError,
)
from chalicelib.service.text import first_invalid_character, has_invalid_characters, utf8_length

MAX_ATTRIBUTES = 10
_NAME_PUNCTUATION = frozenset("_-.")
MAX_NAME_BYTES = 256
_BASE_TYPES = ("String", "Number", "Binary")
TRACE_HEADER = "AWSTraceHeader"
SYSTEM_ATTRIBUTE_NAMES = frozenset({TRACE_HEADER})


def check_body(body: str | None) -> str:
    """A body is required, non-empty, and made of the characters SQS allows."""
    if body is None or body == "":
        raise MissingParameterError("The request must contain the parameter MessageBody.")
    check_characters(body)
    return body


ALLOWED_CHARACTERS = ("the set of allowed characters is #x9 | #xA | #xD | [#x20-#xD7FF] | "
                      "[#xE000-#xFFFD] | [#x10000-#x10FFFF].")


def check_characters(
    text: str, where: str = "the message body",
    error: type[SqsError] = InvalidMessageContentsError,
) -> None:
    """Reject characters outside #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000+,
    naming the first one as SQS does ('#xFFFF'). SQS refuses such a body as
    InvalidMessageContents, such an attribute value as InvalidParameterValue."""
    found = first_invalid_character(text)
    if found is not None:
        raise error(
            f"Invalid binary character '#x{ord(found):X}' was found in {where}, "
            f"{ALLOWED_CHARACTERS}"
        )


def _check_name(name: str) -> None:
    """Names as SQS checks them, each rule with SQS's own wording."""
    invalid = InvalidParameterValueError
    if name == "":
        raise invalid("The request must contain non-empty message (user) attribute names.")
    if utf8_length(name) > MAX_NAME_BYTES:
        raise invalid("Message (user) attribute names must be shorter than 256 Bytes")
    if name.lower().startswith(("aws.", "amazon.")) or name.startswith(".") or name.endswith("."):
        raise invalid(
            "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These "
            "strings are reserved for internal use. Additionally, they cannot start or end "
            "with '.'."
        )
    if not all(c.isalnum() or c in _NAME_PUNCTUATION for c in name) or ".." in name:
        # Letters and digits of any script: SQS accepts "attr.1\u00f8\u00df\u00e4".
        # SQS's wording, "upper and lower score" and the trailing space included.
        raise invalid(
            "Message (user) attributes name can only contain upper and lower score characters, "
            "digits, periods, hyphens and underscores. "
        )


def _check_number(name: str, text: str) -> None:
    try:
        value = Decimal(text.strip())
    except InvalidOperation as exc:
        raise InvalidParameterValueError(
            f"Can't cast the value of message (user) attribute '{name}' to a number."
        ) from exc
    digits = len(value.as_tuple().digits)
    if not value.is_finite() or digits > 38 or abs(value) > Decimal("1e126"):
        raise InvalidParameterValueError(
            f"Value of message (user) attribute '{name}' is out of range: numbers hold up to "
            "38 significant digits, from -10^128 to 10^126."
        )


def check_attribute(name: str, value: AttributeValue, kind: str = "user") -> None:
    """Validate one attribute's name, data type and value."""
    if kind == "user":
        _check_name(name)
    base = value.data_type.split(".", 1)[0]
    if (base not in _BASE_TYPES or len(value.data_type) > 256
            or has_invalid_characters(value.data_type)):
        raise InvalidParameterValueError(
            f"The type of message ({kind}) attribute '{name}' is invalid. You must use only "
            "the following supported type prefixes: Binary, Number, String."
        )
    if value.is_binary:
        if not value.binary_value:
            raise InvalidParameterValueError(
                f"Message ({kind}) attribute '{name}' must contain a non-empty value of type "
                "'Binary'."
            )
        return
    if not value.string_value:
        raise InvalidParameterValueError(
            f"Message ({kind}) attribute '{name}' must contain a non-empty value of type "
            f"'{base}'."
        )
    check_characters(value.string_value, f"the message attribute '{name}' value",
                     InvalidParameterValueError)
    if base == "Number":
        _check_number(name, value.string_value)


def check_attributes(attributes: Mapping[str, AttributeValue]) -> None:
    """At most 10 user attributes, each valid."""
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidParameterValueError(
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{MAX_ATTRIBUTES}]."
        )
    for name, value in attributes.items():
        check_attribute(name, value)


def check_system_attributes(attributes: Mapping[str, AttributeValue]) -> None:
    """Only AWSTraceHeader, of type String, may be sent."""
    for name, value in attributes.items():
        if name not in SYSTEM_ATTRIBUTE_NAMES:
            raise InvalidParameterValueError(f"Message system attribute name '{name}' is invalid.")
        if value.data_type != "String":
            raise InvalidParameterValueError(
                f"Message system attribute '{name}' must be of type 'String'."
            )
        check_attribute(name, value, kind="system")


def message_size(body: str, attributes: Mapping[str, AttributeValue]) -> int:
    """Size as SQS counts it: the body plus every attribute's name, type and value.

    A batch is measured before its entries are checked, so text the rules will refuse
    (a lone surrogate) is measured too, as the 3 bytes it would take.
    """
    size = utf8_length(body)
    for name, value in attributes.items():
        size += utf8_length(name) + utf8_length(value.data_type)
        size += len(value.binary_value or b"") if value.is_binary else utf8_length(
            value.string_value or "")
    return size


def check_size(body: str, attributes: Mapping[str, AttributeValue], limit: int) -> None:
    """Reject a message larger than the queue's MaximumMessageSize."""
    if message_size(body, attributes) > limit:
        raise InvalidParameterValueError(
            f"One or more parameters are invalid. Reason: Message must be shorter than "
            f"{limit} bytes."
        )


def check_delay(delay: int | None) -> None:
    """DelaySeconds is 0 to 900."""
    if delay is not None and not 0 <= delay <= 900:
        raise InvalidParameterValueError(
            f"Value {delay} for parameter DelaySeconds is invalid. Reason: DelaySeconds must be "
            ">= 0 and <= 900."
        )
