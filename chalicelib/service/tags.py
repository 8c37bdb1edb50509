"""Queue tag rules: at most 50 tags, keys of 1 to 128 and values of 0 to 256 characters,
made of the characters SQS allows in any text (a lone surrogate cannot even be stored)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from chalicelib.service.exceptions import InvalidParameterValueError, MissingParameterError
from chalicelib.service.text import has_invalid_characters, printable

MAX_TAGS = 50
KEY_LENGTH = "Tag keys must be between 1 and 128 characters in length."


def check_tag_request(tags: Mapping[str, str]) -> None:
    """TagQueue names at least one tag (SQS: MissingParameter)."""
    if not tags:
        raise MissingParameterError("The request must contain the parameter Tags.")


def check_untag_request(keys: Sequence[str]) -> None:
    """UntagQueue names at least one key, each a valid one."""
    if not keys:
        raise InvalidParameterValueError(KEY_LENGTH)
    check_tag_keys(keys)


def check_tags(tags: Mapping[str, str], queue_name: str) -> None:
    """Validate a set of tags: the queue's after a change, or those a request sets."""
    if len(tags) > MAX_TAGS:
        raise InvalidParameterValueError(f"Too many tags added for queue {queue_name}.")
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
        if not 1 <= len(key) <= 128:
            raise InvalidParameterValueError(KEY_LENGTH)
        if key.lower().startswith("aws:") or has_invalid_characters(key):
            raise InvalidParameterValueError(
                f"Tag key '{printable(key)}' is invalid: keys hold only characters SQS "
                "allows and may not start with 'aws:'."
            )
