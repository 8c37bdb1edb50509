"""Access policies: how one decides a request (IAM's evaluation logic).

Pure code: a policy is the parsed JSON document of a queue's Policy attribute. `evaluate`
answers for one request: an explicit Deny wins, then an Allow, and otherwise the request is
implicitly denied. The front end (`frontend/authn.py`) calls `evaluate` for every request
to another account's queue, with the authenticated caller as the principal.

A policy's shape (`check_policy`, `statements`) is in `policy_document.py`, its condition
operators in `policy_conditions.py`; the names callers use are importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from chalicelib.domain.policy_conditions import (
    Context,
    ContextValue,
    as_list,
    conditions_hold,
    like,
    lookup,
)
from chalicelib.domain.policy_document import PolicyError, check_policy, statements

__all__ = [
    "Context", "ContextValue", "Decision", "PolicyError", "account_of", "check_policy",
    "evaluate", "principal_matches", "statements",
]

_ACCOUNT = re.compile(r"[0-9]{12}")
_ACCOUNT_ROOT = re.compile(r"arn:aws[a-z-]*:iam::([0-9]{12}):root")
_PRINCIPAL_ARN = re.compile(r"arn:aws[a-z-]*:(?:iam|sts)::([0-9]{12}):.+")


class Decision(StrEnum):
    """The outcome of evaluating a request against a policy."""

    ALLOW = "Allow"
    EXPLICIT_DENY = "ExplicitDeny"
    IMPLICIT_DENY = "ImplicitDeny"


# -- matching ------------------------------------------------------------------------------
def _action_matches(pattern: str, action: str) -> bool:
    """`sqs:SendMessage`, `SQS:Send*`, `sqs:*` or `*`: service prefix and name ignore case."""
    return like(pattern, action, ignore_case=True)


def account_of(principal: str) -> str | None:
    """The account of a principal given as an account id or an IAM/STS ARN."""
    if _ACCOUNT.fullmatch(principal):
        return principal
    match = _PRINCIPAL_ARN.fullmatch(principal)
    return match.group(1) if match else None


def _principal_entry_matches(entry: str, principal: str) -> bool:
    """An AWS principal entry names everyone (`*`), an account (its id or root ARN, which
    covers every principal of the account) or one principal by its ARN."""
    if entry == "*":
        return True
    root = _ACCOUNT_ROOT.fullmatch(entry)
    account = root.group(1) if root else entry if _ACCOUNT.fullmatch(entry) else None
    if account is not None:
        return account_of(principal) == account
    return entry == principal


def principal_matches(element: Any, principal: str) -> bool:
    """True when a Principal element names the principal."""
    if element == "*":
        return True
    if not isinstance(element, Mapping):
        return False
    for kind, names in element.items():
        for entry in as_list(names):
            if kind == "AWS" and _principal_entry_matches(str(entry), principal):
                return True
            if kind != "AWS" and str(entry) == principal:
                return True
    return False


def _applies(statement: Mapping[str, Any], principal: str, action: str, resource: str) -> bool:
    if "Principal" in statement and not principal_matches(statement["Principal"], principal):
        return False
    if "NotPrincipal" in statement and principal_matches(statement["NotPrincipal"], principal):
        return False
    if "Action" in statement and not any(
            _action_matches(str(p), action) for p in as_list(statement["Action"])):
        return False
    if "NotAction" in statement and any(
            _action_matches(str(p), action) for p in as_list(statement["NotAction"])):
        return False
    if "Resource" in statement and not any(
            like(str(p), resource) for p in as_list(statement["Resource"])):
        return False
    return not ("NotResource" in statement and any(
        like(str(p), resource) for p in as_list(statement["NotResource"])))


# -- evaluation ----------------------------------------------------------------------------
def evaluate(
    policy: Mapping[str, Any] | None, principal: str, action: str, resource: str,
    context: Context | None = None,
) -> Decision:
    """Decide a request: an explicit Deny wins, then an Allow, else an implicit deny.

    `principal` is an account id or an IAM/STS ARN (or a service principal name);
    `action` is `sqs:<Action>`; `resource` is the queue ARN; `context` holds condition
    keys such as aws:SourceArn, aws:SourceAccount, aws:SourceIp, aws:SecureTransport,
    aws:CurrentTime and aws:PrincipalAccount.
    """
    facts: dict[str, ContextValue] = dict(context or {})
    account = account_of(principal)
    if account is not None and lookup(facts, "aws:PrincipalAccount") is None:
        facts["aws:PrincipalAccount"] = account
    allowed = False
    for statement in statements(policy or {}):
        if not _applies(statement, principal, action, resource):
            continue
        if not conditions_hold(statement.get("Condition"), facts):
            continue
        if statement.get("Effect") == "Deny":
            return Decision.EXPLICIT_DENY
        if statement.get("Effect") == "Allow":
            allowed = True
    return Decision.ALLOW if allowed else Decision.IMPLICIT_DENY
