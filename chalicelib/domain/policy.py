"""Access policies: their shape, and how one decides a request (IAM's evaluation logic).

Pure code: a policy is the parsed JSON document of a queue's Policy attribute. `evaluate`
answers for one request: an explicit Deny wins, then an Allow, and otherwise the request is
implicitly denied. The front end (`frontend/authn.py`) calls `evaluate` for every request
to another account's queue, with the authenticated caller as the principal.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

ContextValue = str | int | float | bool | Sequence[str]
Context = Mapping[str, ContextValue]

VERSIONS = ("2012-10-17", "2008-10-17")
_STATEMENT_KEYS = frozenset(
    {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource",
     "NotResource", "Condition"}
)
_ACCOUNT = re.compile(r"[0-9]{12}")
_ACCOUNT_ROOT = re.compile(r"arn:aws[a-z-]*:iam::([0-9]{12}):root")
_PRINCIPAL_ARN = re.compile(r"arn:aws[a-z-]*:(?:iam|sts)::([0-9]{12}):.+")


class Decision(StrEnum):
    """The outcome of evaluating a request against a policy."""

    ALLOW = "Allow"
    EXPLICIT_DENY = "ExplicitDeny"
    IMPLICIT_DENY = "ImplicitDeny"


class PolicyError(ValueError):
    """A policy document that is not a valid access policy."""


# -- shape ---------------------------------------------------------------------------------
def statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The policy's statements: `Statement` is one object or a list of them."""
    raw = policy.get("Statement", [])
    return [raw] if isinstance(raw, Mapping) else list(raw)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _check_strings(statement: Mapping[str, Any], key: str) -> None:
    values = _as_list(statement[key])
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
        entries = _as_list(names)
        if not entries or not all(isinstance(n, str) and n for n in entries):
            raise PolicyError(f"{key} {kind} must be a string or a list of strings.")


def _check_condition(value: Any) -> None:
    if not isinstance(value, Mapping):
        raise PolicyError("Condition must be an object.")
    for operator, block in value.items():
        if _operator(operator) is None:
            raise PolicyError(f"Condition has an unknown operator {operator}.")
        if not isinstance(block, Mapping) or not block:
            raise PolicyError(f"Condition {operator} must map keys to values.")
        for values in block.values():
            entries = _as_list(values)
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


# -- matching ------------------------------------------------------------------------------
def like(pattern: str, value: str, ignore_case: bool = False) -> bool:
    """Wildcard match of a whole value: `*` matches any run of characters, `?` any one
    character, nothing else is special. Greedy with one backtrack point, so the time is
    bounded by len(pattern) * len(value) whatever the pattern (no regex backtracking)."""
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    p = v = 0
    star, mark = -1, 0
    while v < len(value):
        if p < len(pattern) and pattern[p] in ("?", value[v]) and pattern[p] != "*":
            p, v = p + 1, v + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark, p = p, v, p + 1
        elif star >= 0:
            mark += 1
            p, v = star + 1, mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


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
        for entry in _as_list(names):
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
            _action_matches(str(p), action) for p in _as_list(statement["Action"])):
        return False
    if "NotAction" in statement and any(
            _action_matches(str(p), action) for p in _as_list(statement["NotAction"])):
        return False
    if "Resource" in statement and not any(
            like(str(p), resource) for p in _as_list(statement["Resource"])):
        return False
    return not ("NotResource" in statement and any(
        like(str(p), resource) for p in _as_list(statement["NotResource"])))


# -- conditions ----------------------------------------------------------------------------
Compare = Callable[[str, str], bool]


def _number(text: str) -> Decimal | None:
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _numeric(test: Callable[[Decimal, Decimal], bool]) -> Compare:
    def compare(value: str, wanted: str) -> bool:
        a, b = _number(value), _number(wanted)
        return a is not None and b is not None and test(a, b)
    return compare


def parse_date(text: str) -> datetime | None:
    """An ISO 8601 date or time, or epoch seconds, as IAM accepts them."""
    text = str(text).strip()
    number = _number(text)
    if number is not None and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", text):
        return datetime.fromtimestamp(float(number), tz=UTC)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _dated(test: Callable[[datetime, datetime], bool]) -> Compare:
    def compare(value: str, wanted: str) -> bool:
        a, b = parse_date(value), parse_date(wanted)
        return a is not None and b is not None and test(a, b)
    return compare


def _ip(value: str, wanted: str) -> bool:
    try:
        return ipaddress.ip_address(value.strip()) in ipaddress.ip_network(
            wanted.strip(), strict=False)
    except ValueError:
        return False


def _arn_like(value: str, wanted: str) -> bool:
    """ARNs compare part by part (six colon-separated parts), each with wildcards."""
    have, want = value.split(":", 5), wanted.split(":", 5)
    if len(have) != 6 or len(want) != 6:
        return False
    return all(like(w, h) for w, h in zip(want, have, strict=True))


def _bool(value: str, wanted: str) -> bool:
    return str(value).lower() == str(wanted).lower() and str(value).lower() in ("true", "false")


_BASE: dict[str, tuple[Compare, bool]] = {
    # operator: (positive comparison, negated)
    "StringEquals": (lambda v, w: v == w, False),
    "StringNotEquals": (lambda v, w: v == w, True),
    "StringEqualsIgnoreCase": (lambda v, w: v.lower() == w.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda v, w: v.lower() == w.lower(), True),
    "StringLike": (lambda v, w: like(w, v), False),
    "StringNotLike": (lambda v, w: like(w, v), True),
    "NumericEquals": (_numeric(lambda a, b: a == b), False),
    "NumericNotEquals": (_numeric(lambda a, b: a == b), True),
    "NumericLessThan": (_numeric(lambda a, b: a < b), False),
    "NumericLessThanEquals": (_numeric(lambda a, b: a <= b), False),
    "NumericGreaterThan": (_numeric(lambda a, b: a > b), False),
    "NumericGreaterThanEquals": (_numeric(lambda a, b: a >= b), False),
    "DateEquals": (_dated(lambda a, b: a == b), False),
    "DateNotEquals": (_dated(lambda a, b: a == b), True),
    "DateLessThan": (_dated(lambda a, b: a < b), False),
    "DateLessThanEquals": (_dated(lambda a, b: a <= b), False),
    "DateGreaterThan": (_dated(lambda a, b: a > b), False),
    "DateGreaterThanEquals": (_dated(lambda a, b: a >= b), False),
    "Bool": (_bool, False),
    "BinaryEquals": (lambda v, w: v == w, False),
    "IpAddress": (_ip, False),
    "NotIpAddress": (_ip, True),
    "ArnEquals": (_arn_like, False),
    "ArnLike": (_arn_like, False),
    "ArnNotEquals": (_arn_like, True),
    "ArnNotLike": (_arn_like, True),
}


def _operator(name: str) -> tuple[str, str, bool] | None:
    """(set qualifier, base operator, IfExists) of an operator name, or None if unknown."""
    qualifier, _, rest = name.partition(":")
    if not rest:
        qualifier, rest = "", name
    if qualifier not in ("", "ForAnyValue", "ForAllValues"):
        return None
    if rest == "Null":
        return ("", "Null", False) if not qualifier else None
    if_exists = rest.endswith("IfExists")
    base = rest[: -len("IfExists")] if if_exists else rest
    return (qualifier, base, if_exists) if base in _BASE else None


def _lookup(context: Context, key: str) -> list[str] | None:
    """The context values of a key (keys ignore case), or None when the request lacks it."""
    lowered = key.lower()
    for name, value in context.items():
        if name.lower() == lowered:
            if isinstance(value, bool):
                return [str(value).lower()]
            if isinstance(value, str | int | float):
                return [str(value)]
            return [str(v) for v in value]
    return None


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _condition_holds(operator: str, key: str, wanted: Any, context: Context) -> bool:
    parsed = _operator(operator)
    if parsed is None:
        return False
    qualifier, base, if_exists = parsed
    wanted_values = [_text(w) for w in _as_list(wanted)]
    values = _lookup(context, key)
    if base == "Null":
        absent = values is None or values == []
        return any((w.lower() == "true") == absent for w in wanted_values)
    compare, negated = _BASE[base]

    def matches(value: str) -> bool:
        hit = any(compare(value, w) for w in wanted_values)
        return not hit if negated else hit

    if values is None or values == []:
        if qualifier == "ForAllValues":
            return True
        if qualifier == "ForAnyValue":
            return False
        # A key the request lacks matches nothing: true for ...IfExists and for the
        # negated operators, false for the others.
        return if_exists or negated
    if qualifier == "ForAllValues":
        return all(matches(v) for v in values)
    return any(matches(v) for v in values)


def conditions_hold(condition: Mapping[str, Any] | None, context: Context) -> bool:
    """Every operator, and every key under it, must hold (values of a key are ORed)."""
    if not condition:
        return True
    return all(
        _condition_holds(operator, key, wanted, context)
        for operator, block in condition.items()
        for key, wanted in block.items()
    )


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
    if account is not None and _lookup(facts, "aws:PrincipalAccount") is None:
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
