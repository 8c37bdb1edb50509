"""The shape of access policies: what a well-formed policy document holds (a queue's Policy
attribute is checked against it when it is set), and its statements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.domain.policy_conditions import as_list, parse_operator

VERSIONS = ("2012-10-17", "2008-10-17")
_STATEMENT_KEYS = frozenset(
    {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource",
     "NotResource", "Condition"}
)


class PolicyError(ValueError):
    """A policy document that is not a valid access policy."""


def statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The policy's statements: `Statement` is one object or a list of them."""
    raw = policy.get("Statement", [])
    return [raw] if isinstance(raw, Mapping) else list(raw)


def _check_strings(statement: Mapping[str, Any], key: str) -> None:
    values = as_list(statement[key])
    if not values or not all(isinstance(v, str) and v for v in values):
        raise PolicyError(f"{key} must be a string or a list of strings.")


def _check_principal(value: Any, key: str) -> None:
    if value == "*":
        return
    if not isinstance(value, Mapping) or not value:
        raise PolicyError(f"{key} must be \"*\" or an object such as {{\"AWS\": ...}}.")
    for kind, names in value.items():
        if kind not in ("AWS", "Service", "Federated", "CanonicalUser"):
            raise PolicyError(f"{key} has an unknown principal type {kind}.")
        entries = as_list(names)
        if not entries or not all(isinstance(n, str) and n for n in entries):
            raise PolicyError(f"{key} {kind} must be a string or a list of strings.")


def _check_condition(value: Any) -> None:
    if not isinstance(value, Mapping):
        raise PolicyError("Condition must be an object.")
    for operator, block in value.items():
        if parse_operator(operator) is None:
            raise PolicyError(f"Condition has an unknown operator {operator}.")
        if not isinstance(block, Mapping) or not block:
            raise PolicyError(f"Condition {operator} must map keys to values.")
        for values in block.values():
            entries = as_list(values)
            if not entries or not all(isinstance(v, str | int | float | bool) for v in entries):
                raise PolicyError(f"Condition {operator} values must be strings.")


def _check_pairs(statement: Mapping[str, Any]) -> None:
    for one, other in (("Principal", "NotPrincipal"), ("Action", "NotAction"),
                       ("Resource", "NotResource")):
        if one in statement and other in statement:
            raise PolicyError(f"A statement holds {one} or {other}, not both.")
    if "Principal" not in statement and "NotPrincipal" not in statement:
        raise PolicyError("A statement needs a Principal (or NotPrincipal).")
    if "Action" not in statement and "NotAction" not in statement:
        raise PolicyError("A statement needs an Action (or NotAction).")


def check_statement(statement: Any) -> None:
    """Raise PolicyError unless `statement` is a well-formed statement."""
    if not isinstance(statement, Mapping):
        raise PolicyError("Each statement must be an object.")
    unknown = sorted(set(statement) - _STATEMENT_KEYS)
    if unknown:
        raise PolicyError(f"Statement has an unknown element {unknown[0]}.")
    if statement.get("Effect") not in ("Allow", "Deny"):
        raise PolicyError("Effect must be Allow or Deny.")
    if "Sid" in statement and not isinstance(statement["Sid"], str):
        raise PolicyError("Sid must be a string.")
    _check_pairs(statement)
    for key in ("Principal", "NotPrincipal"):
        if key in statement:
            _check_principal(statement[key], key)
    for key in ("Action", "NotAction", "Resource", "NotResource"):
        if key in statement:
            _check_strings(statement, key)
    if "Condition" in statement:
        _check_condition(statement["Condition"])


def check_policy(policy: Any) -> None:
    """Raise PolicyError unless `policy` is a well-formed access policy document."""
    if not isinstance(policy, Mapping):
        raise PolicyError("The policy must be a JSON object.")
    unknown = sorted(set(policy) - {"Version", "Id", "Statement"})
    if unknown:
        raise PolicyError(f"The policy has an unknown element {unknown[0]}.")
    if "Version" in policy and policy["Version"] not in VERSIONS:
        raise PolicyError(f"Version must be {' or '.join(VERSIONS)}.")
    if "Id" in policy and not isinstance(policy["Id"], str):
        raise PolicyError("Id must be a string.")
    if not isinstance(policy.get("Statement"), Mapping | list):
        raise PolicyError("The policy needs a Statement: an object or a list of them.")
    sids = set()
    for statement in statements(policy):
        check_statement(statement)
        sid = statement.get("Sid")
        if sid is not None:
            if sid in sids:
                raise PolicyError(f"Statement ids must be unique: {sid} appears twice.")
            sids.add(sid)
