"""Queue tag rules: at most 50 tags, keys of 1 to 128 and values of 0 to 256 characters,
made of the characters SQS allows in any text (a lone surrogate cannot even be stored)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from chalicelib.service.exceptions import InvalidParameterValueError
from chalicelib.service.text import has_invalid_characters, printable

MAX_TAGS = 50


def check_tags(tags: Mapping[str, str]) -> None:
    """Validate a set of tags."""
    if len(tags) > MAX_TAGS:
        raise InvalidParameterValueError(
            f"Too many tags added for queue. Maximum number of tags per queue is {MAX_TAGS}."
        )
    check_tag_keys(list(tags))
    for key, value in tags.items():
        if len(value) > 256:
            raise InvalidParameterValueError(
                f"Tag value for key '{key}' is longer than 256 characters."
            )
        if has_invalid_characters(value):
            raise InvalidParameterValueError(
                f"Tag value for key '{key}' holds characters SQS does not allow."
            )


def check_tag_keys(keys: Sequence[str]) -> None:
    """Tag keys are 1 to 128 characters and do not start with `aws:`."""
    for key in keys:
        if (not 1 <= len(key) <= 128 or key.lower().startswith("aws:")
                or has_invalid_characters(key)):
            raise InvalidParameterValueError(
                f"Tag key '{printable(key)}' is invalid: keys are 1 to 128 characters of "
                "those SQS allows and may not start with 'aws:'."
            )
