"""AddPermission and RemovePermission: statements of the queue's Policy, with SQS's rules."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from chalicelib.domain.policy import statements
from chalicelib.service.exceptions import (
    InvalidParameterValueError,
    MissingParameterError,
    OverLimitError,
)
from chalicelib.service.text import utf8_length

MAX_ACTIONS = 7
MAX_POLICY_BYTES = 8192
POLICY_VERSION = "2008-10-17"  # the version of the policies SQS writes for AddPermission
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
_ACCOUNT = re.compile(r"[0-9]{12}")
# Actions a queue owner can share with other accounts (the batch forms come with
# SendMessage, DeleteMessage and ChangeMessageVisibility).
SHAREABLE = frozenset({
    "*", "ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl",
    "ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage", "SendMessage",
})
# SQS actions only the owner may call: naming one is refused with its own reason.
OWNER_ONLY = frozenset({
    "AddPermission", "RemovePermission", "CreateQueue", "DeleteQueue", "SetQueueAttributes",
    "TagQueue", "UntagQueue", "ListQueueTags", "ListQueues", "SendMessageBatch",
    "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "StartMessageMoveTask",
    "CancelMessageMoveTask", "ListMessageMoveTasks",
})


def check_label(label: str) -> None:
    """1 to 80 alphanumerics, hyphens or underscores."""
    if not _LABEL.fullmatch(label):
        raise InvalidParameterValueError(
            f"Value {label} for parameter Label is invalid. Reason: Can only include "
            "alphanumeric characters, hyphens, or underscores. 1 to 80 in length."
        )


def check_grant(account_ids: Sequence[str], actions: Sequence[str]) -> None:
    """The accounts and actions of an AddPermission, checked in the order SQS checks them."""
    if not actions:
        raise MissingParameterError("The request must contain the parameter Actions.")
    if not account_ids:
        raise InvalidParameterValueError(
            "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.")
    if len(actions) > MAX_ACTIONS:
        raise OverLimitError(
            f"{len(actions)} Actions were found, maximum allowed is {MAX_ACTIONS}.")
    for action in actions:
        if action in SHAREABLE:
            continue
        reason = ("Only the queue owner is allowed to invoke this action." if action in OWNER_ONLY
                  else "Please refer to the appropriate WSDL for a list of valid actions.")
        raise InvalidParameterValueError(
            f"Value SQS:{action} for parameter ActionName is invalid. Reason: {reason}")
    for account in account_ids:
        if not _ACCOUNT.fullmatch(account):
            raise InvalidParameterValueError(
                f"Value [{account}] for parameter PrincipalId is invalid. Reason: Unable to "
                "verify.")


def _document(policy_text: str, queue_arn: str) -> dict[str, Any]:
    """The stored policy (already validated when set), or SQS's default empty one."""
    if policy_text:
        document: dict[str, Any] = json.loads(policy_text)
        raw = document.get("Statement")
        # A policy stored before policies were validated may hold anything here: only its
        # statement objects are kept.
        kept = statements(document) if isinstance(raw, dict | list) else []
        document["Statement"] = [st for st in kept if isinstance(st, dict)]
        return document
    return {"Version": POLICY_VERSION, "Id": f"{queue_arn}/SQSDefaultPolicy", "Statement": []}


def _one_or_many(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else values


def _text(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))


def with_permission(
    policy_text: str, queue_arn: str, label: str, account_ids: Sequence[str],
    actions: Sequence[str],
) -> str:
    """The Policy after AddPermission: a new statement whose Sid is the label."""
    document = _document(policy_text, queue_arn)
    if any(s.get("Sid") == label for s in document["Statement"]):
        raise InvalidParameterValueError(
            f"Value {label} for parameter Label is invalid. Reason: Already exists.")
    partition = queue_arn.split(":")[1] if queue_arn.count(":") >= 5 else "aws"
    document["Statement"].append({
        "Sid": label,
        "Effect": "Allow",
        "Principal": {"AWS": _one_or_many(
            [f"arn:{partition}:iam::{a}:root" for a in dict.fromkeys(account_ids)])},
        "Action": _one_or_many([f"SQS:{a}" for a in dict.fromkeys(actions)]),
        "Resource": queue_arn,
    })
    text = _text(document)
    if utf8_length(text) > MAX_POLICY_BYTES:
        raise OverLimitError(
            f"The queue policy would exceed the limit of {MAX_POLICY_BYTES} bytes.")
    return text


def without_permission(policy_text: str, queue_arn: str, label: str) -> str:
    """The Policy after RemovePermission; empty (no policy) once no statement is left."""
    document = _document(policy_text, queue_arn)
    kept = [s for s in document["Statement"] if s.get("Sid") != label]
    if len(kept) == len(document["Statement"]):
        raise InvalidParameterValueError(
            f"Value {label} for parameter Label is invalid. Reason: can't find label.")
    if not kept:
        return ""
    document["Statement"] = kept
    return _text(document)
