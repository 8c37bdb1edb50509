"""Queue tag rules: at most 50 tags, keys of 1 to 128 and values of 0 to 256 characters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from chalicelib.service.exceptions import InvalidParameterValueError

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


def check_tag_keys(keys: Sequence[str]) -> None:
    """Tag keys are 1 to 128 characters and do not start with `aws:`."""
    for key in keys:
        if not 1 <= len(key) <= 128 or key.lower().startswith("aws:"):
            raise InvalidParameterValueError(
                f"Tag key '{key}' is invalid: keys are 1 to 128 characters and may not "
                "start with 'aws:'."
            )
