"""The policy evaluation logic, as the IAM documentation describes it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.domain.policy import (
    Decision,
    PolicyError,
    check_policy,
    evaluate,
)
from chalicelib.domain.policy_conditions import conditions_hold, like, parse_date

QUEUE = "arn:aws:sqs:us-east-1:111122223333:orders"
ALICE = "arn:aws:iam::444455556666:user/alice"
BOB = "arn:aws:iam::777788889999:user/bob"
TOPIC = "arn:aws:sns:us-east-1:111122223333:orders-topic"


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def _allow(**extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage",
            "Resource": QUEUE, **extra}


# -- effects -----------------------------------------------------------------------------
def test_no_policy_or_no_matching_statement_is_an_implicit_deny() -> None:
    assert evaluate(None, ALICE, "sqs:SendMessage", QUEUE) is Decision.IMPLICIT_DENY
    policy = _policy(_allow(Action="sqs:ReceiveMessage"))
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE) is Decision.IMPLICIT_DENY


def test_a_matching_allow_allows() -> None:
    assert evaluate(_policy(_allow()), ALICE, "sqs:SendMessage", QUEUE) is Decision.ALLOW


def test_an_explicit_deny_wins_over_any_allow_in_any_order() -> None:
    deny = {**_allow(), "Effect": "Deny", "Principal": {"AWS": ALICE}}
    for statements in ([_allow(), deny], [deny, _allow()]):
        assert evaluate(_policy(*statements), ALICE, "sqs:SendMessage",
                        QUEUE) is Decision.EXPLICIT_DENY
    # AND the deny names Alice only: Bob is still allowed
    assert evaluate(_policy(_allow(), deny), BOB, "sqs:SendMessage", QUEUE) is Decision.ALLOW


def test_a_single_statement_object_is_a_policy_too() -> None:
    policy = {"Version": "2012-10-17", "Statement": _allow()}
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE) is Decision.ALLOW


# -- principals ----------------------------------------------------------------------------
@pytest.mark.parametrize(("element", "principal", "expected"), [
    ("*", ALICE, True),
    ({"AWS": "*"}, ALICE, True),
    ({"AWS": "444455556666"}, ALICE, True),
    ({"AWS": "444455556666"}, BOB, False),
    ({"AWS": "arn:aws:iam::444455556666:root"}, ALICE, True),
    ({"AWS": "arn:aws:iam::444455556666:root"}, "444455556666", True),
    ({"AWS": "arn:aws:iam::444455556666:root"}, BOB, False),
    ({"AWS": ALICE}, ALICE, True),
    ({"AWS": ALICE}, "arn:aws:iam::444455556666:user/alice2", False),
    ({"AWS": [BOB, "444455556666"]}, ALICE, True),
    ({"AWS": [BOB]}, ALICE, False),
    ({"Service": "sns.amazonaws.com"}, "sns.amazonaws.com", True),
    ({"Service": "sns.amazonaws.com"}, ALICE, False),
    ({"AWS": "arn:aws:sts::444455556666:assumed-role/r/s"}, ALICE, False),
])
def test_principal_forms(element: Any, principal: str, expected: bool) -> None:
    policy = _policy(_allow(Principal=element))
    decision = evaluate(policy, principal, "sqs:SendMessage", QUEUE)
    assert (decision is Decision.ALLOW) is expected


def test_an_assumed_role_session_belongs_to_its_account() -> None:
    policy = _policy(_allow(Principal={"AWS": "444455556666"}))
    session = "arn:aws:sts::444455556666:assumed-role/worker/i-0abc"
    assert evaluate(policy, session, "sqs:SendMessage", QUEUE) is Decision.ALLOW


def test_not_principal_applies_to_everyone_else() -> None:
    statement = {"Effect": "Deny", "NotPrincipal": {"AWS": ALICE}, "Action": "sqs:*",
                 "Resource": QUEUE}
    policy = _policy(_allow(), statement)
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE) is Decision.ALLOW
    assert evaluate(policy, BOB, "sqs:SendMessage", QUEUE) is Decision.EXPLICIT_DENY


# -- actions -------------------------------------------------------------------------------
@pytest.mark.parametrize(("pattern", "action", "expected"), [
    ("sqs:SendMessage", "sqs:SendMessage", True),
    ("SQS:SendMessage", "sqs:SendMessage", True),
    ("sqs:sendmessage", "sqs:SendMessage", True),
    ("sqs:*", "sqs:DeleteMessage", True),
    ("*", "sqs:DeleteMessage", True),
    ("SQS:Send*", "sqs:SendMessageBatch", True),
    ("SQS:Send*", "sqs:ReceiveMessage", False),
    ("sqs:?eceiveMessage", "sqs:ReceiveMessage", True),
    ("sqs:?eceiveMessage", "sqs:XXReceiveMessage", False),
    ("sns:Publish", "sqs:SendMessage", False),
    (["sqs:ReceiveMessage", "sqs:Send*"], "sqs:SendMessage", True),
])
def test_action_patterns(pattern: Any, action: str, expected: bool) -> None:
    decision = evaluate(_policy(_allow(Action=pattern)), ALICE, action, QUEUE)
    assert (decision is Decision.ALLOW) is expected


def test_not_action_covers_every_other_action() -> None:
    statement = {"Effect": "Allow", "Principal": "*", "NotAction": "sqs:Purge*",
                 "Resource": QUEUE}
    assert evaluate(_policy(statement), ALICE, "sqs:SendMessage", QUEUE) is Decision.ALLOW
    assert evaluate(_policy(statement), ALICE, "sqs:PurgeQueue",
                    QUEUE) is Decision.IMPLICIT_DENY


# -- resources -----------------------------------------------------------------------------
@pytest.mark.parametrize(("pattern", "expected"), [
    (QUEUE, True),
    ("arn:aws:sqs:us-east-1:111122223333:*", True),
    ("arn:aws:sqs:*:111122223333:ord?rs", True),
    ("arn:aws:sqs:us-east-1:111122223333:ORDERS", False),  # resources are case-sensitive
    ("arn:aws:sqs:us-east-1:111122223333:other", False),
    ("*", True),
])
def test_resource_patterns(pattern: str, expected: bool) -> None:
    decision = evaluate(_policy(_allow(Resource=pattern)), ALICE, "sqs:SendMessage", QUEUE)
    assert (decision is Decision.ALLOW) is expected


def test_not_resource_and_a_missing_resource() -> None:
    statement = {"Effect": "Allow", "Principal": "*", "Action": "sqs:*",
                 "NotResource": "arn:aws:sqs:*:*:secret-*"}
    assert evaluate(_policy(statement), ALICE, "sqs:SendMessage", QUEUE) is Decision.ALLOW
    secret = "arn:aws:sqs:us-east-1:111122223333:secret-1"
    assert evaluate(_policy(statement), ALICE, "sqs:SendMessage", secret) is Decision.IMPLICIT_DENY
    # A resource policy without Resource applies to the resource it is attached to
    bare = {"Effect": "Allow", "Principal": "*", "Action": "sqs:*"}
    assert evaluate(_policy(bare), ALICE, "sqs:SendMessage", QUEUE) is Decision.ALLOW


# -- conditions ----------------------------------------------------------------------------
def _holds(condition: dict[str, Any], **context: Any) -> bool:
    return conditions_hold(condition, {k.replace("__", ":"): v for k, v in context.items()})


def test_the_sns_fanout_policy_allows_only_the_topic() -> None:
    policy = _policy(_allow(Principal={"Service": "sns.amazonaws.com"},
                            Condition={"ArnEquals": {"aws:SourceArn": TOPIC}}))
    sns = "sns.amazonaws.com"
    assert evaluate(policy, sns, "sqs:SendMessage", QUEUE,
                    {"aws:SourceArn": TOPIC}) is Decision.ALLOW
    assert evaluate(policy, sns, "sqs:SendMessage", QUEUE,
                    {"aws:SourceArn": TOPIC + "2"}) is Decision.IMPLICIT_DENY
    assert evaluate(policy, sns, "sqs:SendMessage", QUEUE) is Decision.IMPLICIT_DENY


@pytest.mark.parametrize(("operator", "wanted", "value", "expected"), [
    ("StringEquals", "abc", "abc", True),
    ("StringEquals", "abc", "ABC", False),
    ("StringNotEquals", "abc", "abd", True),
    ("StringNotEquals", "abc", "abc", False),
    ("StringEqualsIgnoreCase", "abc", "ABC", True),
    ("StringNotEqualsIgnoreCase", "abc", "ABC", False),
    ("StringLike", "a*c", "abbbc", True),
    ("StringLike", "a?c", "abbc", False),
    ("StringNotLike", "a*", "bcd", True),
    ("StringNotLike", "a*", "abc", False),
    ("StringEquals", ["x", "abc"], "abc", True),  # values of one key are ORed
    ("StringNotEquals", ["x", "abc"], "abc", False),  # negated: matches none of them
    ("NumericEquals", "10", "10.0", True),
    ("NumericNotEquals", "10", "11", True),
    ("NumericLessThan", "10", "9", True),
    ("NumericLessThan", "10", "10", False),
    ("NumericLessThanEquals", "10", "10", True),
    ("NumericGreaterThan", "10", "11", True),
    ("NumericGreaterThanEquals", "10", "10", True),
    ("NumericEquals", "10", "ten", False),
    ("DateLessThan", "2030-01-01T00:00:00Z", "2026-11-24T08:00:00Z", True),
    ("DateGreaterThan", "2030-01-01T00:00:00Z", "2026-11-24T08:00:00Z", False),
    ("DateEquals", "2026-11-24T08:00:00Z", "1795507200", True),
    ("DateNotEquals", "2026-11-24T08:00:00Z", "2026-11-24T08:00:01Z", True),
    ("DateLessThanEquals", "2026-11-24T08:00:00Z", "2026-11-24T08:00:00+00:00", True),
    ("DateGreaterThanEquals", "2026-11-24", "2026-11-24T00:00:01Z", True),
    ("Bool", "true", "true", True),
    ("Bool", "true", "false", False),
    ("Bool", "false", "FALSE", True),
    ("Bool", True, "true", True),
    ("IpAddress", "203.0.113.0/24", "203.0.113.7", True),
    ("IpAddress", "203.0.113.0/24", "203.0.114.7", False),
    ("IpAddress", "2001:db8::/32", "2001:db8::1", True),
    ("IpAddress", "203.0.113.5", "203.0.113.5", True),
    ("NotIpAddress", "203.0.113.0/24", "198.51.100.1", True),
    ("NotIpAddress", "203.0.113.0/24", "203.0.113.9", False),
    ("ArnEquals", "arn:aws:sns:*:111122223333:*", TOPIC, True),
    ("ArnLike", "arn:aws:sns:us-east-1:111122223333:orders-*", TOPIC, True),
    ("ArnLike", "arn:aws:sns:us-east-1:999999999999:*", TOPIC, False),
    ("ArnLike", "arn:aws:sns:*", TOPIC, False),  # six parts are compared
    ("ArnNotEquals", "arn:aws:sns:*:999999999999:*", TOPIC, True),
    ("ArnNotLike", "arn:aws:sns:*:111122223333:*", TOPIC, False),
])
def test_condition_operators(operator: str, wanted: Any, value: str, expected: bool) -> None:
    assert _holds({operator: {"aws:Key": wanted}}, aws__Key=value) is expected


@pytest.mark.parametrize(("operator", "expected"), [
    ("StringEquals", False), ("StringLike", False), ("ArnEquals", False),
    ("NumericLessThan", False), ("DateLessThan", False), ("Bool", False),
    ("IpAddress", False),
    # negated operators hold when the key is absent
    ("StringNotEquals", True), ("StringNotLike", True), ("ArnNotLike", True),
    ("NotIpAddress", True),
    # ...IfExists hold when the key is absent
    ("StringEqualsIfExists", True), ("ArnLikeIfExists", True), ("BoolIfExists", True),
    ("NumericLessThanIfExists", True),
])
def test_a_key_missing_from_the_request(operator: str, expected: bool) -> None:
    assert _holds({operator: {"aws:SourceArn": "x"}}) is expected


def test_if_exists_compares_when_the_key_is_present() -> None:
    condition = {"StringEqualsIfExists": {"aws:SourceAccount": "111122223333"}}
    assert _holds(condition, aws__SourceAccount="111122223333")
    assert not _holds(condition, aws__SourceAccount="444455556666")


def test_null_checks_presence() -> None:
    assert _holds({"Null": {"aws:SourceArn": "true"}})
    assert not _holds({"Null": {"aws:SourceArn": "true"}}, aws__SourceArn=TOPIC)
    assert _holds({"Null": {"aws:SourceArn": "false"}}, aws__SourceArn=TOPIC)
    assert not _holds({"Null": {"aws:SourceArn": "false"}})


def test_condition_keys_ignore_case_and_values_do_not() -> None:
    assert _holds({"StringEquals": {"AWS:SOURCEACCOUNT": "111122223333"}},
                  aws__SourceAccount="111122223333")
    assert not _holds({"StringEquals": {"aws:SourceVpc": "VPC-1"}}, aws__SourceVpc="vpc-1")


def test_every_operator_and_every_key_must_hold() -> None:
    condition = {"StringEquals": {"aws:SourceAccount": "111122223333",
                                  "aws:SourceVpc": "vpc-1"},
                 "Bool": {"aws:SecureTransport": "true"}}
    context: dict[str, Any] = {"aws:SourceAccount": "111122223333", "aws:SourceVpc": "vpc-1",
               "aws:SecureTransport": True}
    assert conditions_hold(condition, context)
    assert not conditions_hold(condition, {**context, "aws:SecureTransport": False})
    assert not conditions_hold(condition, {**context, "aws:SourceVpc": "vpc-2"})


def test_for_any_value_and_for_all_values_over_multivalued_keys() -> None:
    any_of = {"ForAnyValue:StringLike": {"aws:TagKeys": ["env", "team-*"]}}
    all_of = {"ForAllValues:StringEquals": {"aws:TagKeys": ["env", "team"]}}
    assert _holds(any_of, aws__TagKeys=["cost", "team-a"])
    assert not _holds(any_of, aws__TagKeys=["cost"])
    assert not _holds(any_of)  # no values: nothing matches
    assert _holds(all_of, aws__TagKeys=["env"])
    assert _holds(all_of, aws__TagKeys=["env", "team"])
    assert not _holds(all_of, aws__TagKeys=["env", "cost"])
    assert _holds(all_of)  # no values: all of none match
    assert _holds(all_of, aws__TagKeys=[])


def test_secure_transport_deny_statement() -> None:
    # The documented "deny plain HTTP" statement
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": QUEUE,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    policy = _policy(_allow(), deny)
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE,
                    {"aws:SecureTransport": False}) is Decision.EXPLICIT_DENY
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE,
                    {"aws:SecureTransport": True}) is Decision.ALLOW


def test_source_ip_and_current_time_conditions() -> None:
    policy = _policy(_allow(Condition={
        "IpAddress": {"aws:SourceIp": ["192.0.2.0/24", "203.0.113.0/24"]},
        "DateLessThan": {"aws:CurrentTime": "2027-01-01T00:00:00Z"}}))
    inside = {"aws:SourceIp": "203.0.113.10", "aws:CurrentTime": "2026-11-24T08:00:00Z"}
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE, inside) is Decision.ALLOW
    late = {**inside, "aws:CurrentTime": "2027-06-01T00:00:00Z"}
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE, late) is Decision.IMPLICIT_DENY
    outside = {**inside, "aws:SourceIp": "198.51.100.1"}
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE, outside) is Decision.IMPLICIT_DENY


def test_principal_account_comes_from_the_principal() -> None:
    policy = _policy(_allow(Condition={"StringEquals": {"aws:PrincipalAccount": "444455556666"}}))
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE) is Decision.ALLOW
    assert evaluate(policy, BOB, "sqs:SendMessage", QUEUE) is Decision.IMPLICIT_DENY


def test_a_condition_on_a_deny_that_does_not_hold_leaves_the_allow() -> None:
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": QUEUE,
            "Condition": {"StringNotEquals": {"aws:SourceAccount": "111122223333"}}}
    policy = _policy(_allow(), deny)
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE,
                    {"aws:SourceAccount": "111122223333"}) is Decision.ALLOW
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE,
                    {"aws:SourceAccount": "999999999999"}) is Decision.EXPLICIT_DENY
    # a missing key satisfies the negated operator: the deny applies
    assert evaluate(policy, ALICE, "sqs:SendMessage", QUEUE) is Decision.EXPLICIT_DENY


def test_an_unknown_operator_never_holds() -> None:
    assert not _holds({"StringSoundsLike": {"aws:Key": "x"}}, aws__Key="x")
    assert not _holds({"ForSomeValues:StringEquals": {"aws:Key": "x"}}, aws__Key="x")


# -- helpers and validation ------------------------------------------------------------------
def test_wildcards_escape_everything_else() -> None:
    assert like("a.c", "a.c") and not like("a.c", "abc")
    assert like("(x)+", "(x)+")
    assert like("multi\nline*", "multi\nline end")


def test_dates_parse_iso_and_epoch_forms() -> None:
    assert parse_date("2026-11-24T08:00:00Z") == parse_date("1795507200")
    assert parse_date("2026-11-24") is not None
    assert parse_date("yesterday") is None


@pytest.mark.parametrize("policy", [
    {"Version": "2012-10-17", "Statement": []},
    {"Statement": {"Effect": "Deny", "Principal": {"AWS": ["*"]}, "NotAction": "sqs:Get*"}},
    {"Version": "2008-10-17", "Id": "x", "Statement": [_allow(Sid="a"), _allow(Sid="b")]},
])
def test_valid_policies(policy: dict[str, Any]) -> None:
    check_policy(policy)


@pytest.mark.parametrize("policy", [
    [],
    {"Statement": [1]},
    {"Statement": [_allow(Principal={"Cat": "tom"})]},
    {"Statement": [_allow(Principal={"AWS": []})]},
    {"Statement": [_allow(Action=[])]},
    {"Statement": [_allow(Action=[3])]},
    {"Statement": [_allow(Resource="")]},
    {"Statement": [{**_allow(), "NotAction": "sqs:x"}]},
    {"Statement": [{**_allow(), "NotPrincipal": "*"}]},
    {"Statement": [{**_allow(), "NotResource": "*"}]},
    {"Statement": [_allow(Condition=[])]},
    {"Statement": [_allow(Condition={"StringEquals": {}})]},
    {"Statement": [_allow(Condition={"StringEquals": {"k": [{"x": 1}]}})]},
    {"Statement": [_allow(Condition={"ForAnyValue:Null": {"k": "true"}})]},
    {"Statement": [_allow(Sid=3)]},
    {"Statement": [], "Other": 1},
    {"Statement": [], "Id": 5},
])
def test_invalid_policies(policy: Any) -> None:
    with pytest.raises(PolicyError):
        check_policy(policy)


def test_permissions_edit_a_policy_stored_before_validation() -> None:
    # A Policy an older DMQ stored only had to be a JSON object
    from chalicelib.service.permissions import with_permission, without_permission

    arn = "arn:aws:sqs:us-east-1:111122223333:q"
    added = json.loads(with_permission('{"Statement": "odd"}', arn, "l", ["444455556666"],
                                       ["SendMessage"]))
    assert [s["Sid"] for s in added["Statement"]] == ["l"]
    mixed = json.dumps({"Statement": [1, {"Sid": "keep", "Effect": "Allow"}]})
    assert json.loads(without_permission(
        with_permission(mixed, arn, "l", ["444455556666"], ["*"]), arn, "l"))["Statement"] == [
        {"Sid": "keep", "Effect": "Allow"}]


@pytest.mark.parametrize(("pattern", "value", "expected"), [
    ("", "", True), ("", "a", False), ("*", "", True), ("**", "abc", True),
    ("a*", "a", True), ("*a", "ba", True), ("*a", "ab", False), ("a?c", "abc", True),
    ("a?c", "ac", False), ("a*b*c", "axxbyyc", True), ("a*b*c", "axxbyy", False),
    ("*?", "", False), ("?*", "x", True), ("a*a*a*a*a*a*a*a*b", "a" * 200, False),
])
def test_wildcard_matching(pattern: str, value: str, expected: bool) -> None:
    assert like(pattern, value) is expected
