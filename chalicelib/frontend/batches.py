"""Batch request rules shared by the three batch actions."""

from __future__ import annotations

import re

from chalicelib.frontend.params import Params
from chalicelib.service.exceptions import (
    BatchEntryIdsNotDistinctError,
    EmptyBatchRequestError,
    InvalidBatchEntryIdError,
    TooManyEntriesInBatchRequestError,
)
from chalicelib.service.messages import EntryFailure

MAX_ENTRIES = 10
_ENTRY_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}\Z")


def batch_entries(params: Params, entry_shape: str) -> list[Params]:
    """The Entries of a batch request: 1 to 10, with distinct, well-formed Ids."""
    entries = params.entries("Entries")
    if not entries:
        raise EmptyBatchRequestError(f"There should be at least one {entry_shape} in the request.")
    if len(entries) > MAX_ENTRIES:
        raise TooManyEntriesInBatchRequestError(
            f"Maximum number of entries per request are {MAX_ENTRIES}. "
            f"You have sent {len(entries)}."
        )
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry.required_str("Id")
        if not _ENTRY_ID.match(entry_id):
            raise InvalidBatchEntryIdError(
                "A batch entry id can only contain alphanumeric characters, hyphens and "
                "underscores. It can be at most 80 letters long."
            )
        if entry_id in seen:
            raise BatchEntryIdsNotDistinctError(f"Id {entry_id} repeated.")
        seen.add(entry_id)
    return entries


def batch_result(successful: list[dict[str, object]],
                 failures: list[EntryFailure]) -> dict[str, object]:
    """A batch response: its Successful and Failed entries, an empty list left out as
    SQS leaves it out (a batch without failures has no "Failed" member)."""
    result: dict[str, object] = {}
    if successful:
        result["Successful"] = successful
    if failures:
        result["Failed"] = failed_entries(failures)
    return result


def failed_entries(failures: list[EntryFailure]) -> list[dict[str, object]]:
    """The Failed list of a batch response."""
    return [
        {
            "Id": f.entry_id,
            "Code": f.error.code,
            "Message": f.error.message,
            "SenderFault": f.error.sender_fault,
        }
        for f in failures
    ]
