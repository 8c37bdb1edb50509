"""GIVEN a queue WHEN permissions are added or removed, or a Policy is set, THEN the Policy
attribute, the limits and the errors are those of SQS (AddPermission, RemovePermission)."""

from __future__ import annotations

import json
from typing import Any

import pytest

ARN = "arn:aws:sqs:us-east-1:000000000000:shared"


def _queue(sqs: Any, name: str = "shared") -> str:
    return str(sqs.create_queue(QueueName=name)["QueueUrl"])


def _policy(sqs: Any, url: str) -> dict[str, Any] | None:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
    text = found.get("Attributes", {}).get("Policy")
    return None if text is None else dict(json.loads(text))


def _error(caught: pytest.ExceptionInfo[Any]) -> tuple[int, str, str]:
    response = caught.value.response
    return (response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"],
            response["Error"]["Message"])


def test_add_permission_writes_the_statement_sqs_writes(sqs: Any) -> None:
    # GIVEN a queue without a policy
    url = _queue(sqs)
    # WHEN one account gets one action
    sqs.add_permission(QueueUrl=url, Label="AliceSendMessage", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    # THEN the Policy holds SQS's default document with one statement: Sid = the label,
    # the account's root ARN, the action with the SQS: prefix, and the queue ARN
    assert _policy(sqs, url) == {
        "Version": "2008-10-17",
        "Id": f"{ARN}/SQSDefaultPolicy",
        "Statement": [{
            "Sid": "AliceSendMessage", "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
            "Action": "SQS:SendMessage", "Resource": ARN,
        }],
    }


def test_several_accounts_and_actions_are_lists_and_labels_add_statements(sqs: Any) -> None:
    url = _queue(sqs)
    sqs.add_permission(QueueUrl=url, Label="one", AWSAccountIds=["111122223333"],
                       Actions=["ReceiveMessage"])
    # WHEN a second label names two accounts and two actions
    sqs.add_permission(QueueUrl=url, Label="two", AWSAccountIds=["111122223333", "444455556666"],
                       Actions=["SendMessage", "DeleteMessage"])
    policy = _policy(sqs, url)
    assert policy is not None
    # THEN both statements are there, the second with lists
    assert [s["Sid"] for s in policy["Statement"]] == ["one", "two"]
    assert policy["Statement"][1]["Principal"] == {"AWS": [
        "arn:aws:iam::111122223333:root", "arn:aws:iam::444455556666:root"]}
    assert policy["Statement"][1]["Action"] == ["SQS:SendMessage", "SQS:DeleteMessage"]


def test_remove_permission_drops_the_statement_and_the_last_one_the_policy(sqs: Any) -> None:
    url = _queue(sqs)
    for label in ("a", "b"):
        sqs.add_permission(QueueUrl=url, Label=label, AWSAccountIds=["111122223333"],
                           Actions=["*"])
    # WHEN one label is removed THEN only the other statement remains
    sqs.remove_permission(QueueUrl=url, Label="a")
    policy = _policy(sqs, url)
    assert policy is not None and [s["Sid"] for s in policy["Statement"]] == ["b"]
    # WHEN the last is removed THEN the queue has no Policy
    sqs.remove_permission(QueueUrl=url, Label="b")
    assert _policy(sqs, url) is None


def test_add_permission_extends_a_policy_set_with_set_queue_attributes(sqs: Any) -> None:
    # GIVEN a policy set by the owner, with a single statement object
    url = _queue(sqs)
    own = {"Version": "2012-10-17", "Statement": {
        "Sid": "Own", "Effect": "Deny", "Principal": "*", "Action": "sqs:PurgeQueue",
        "Resource": ARN}}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(own)})
    # WHEN a permission is added THEN it joins the owner's statement, keeping the Version
    sqs.add_permission(QueueUrl=url, Label="More", AWSAccountIds=["111122223333"],
                       Actions=["GetQueueAttributes"])
    policy = _policy(sqs, url)
    assert policy is not None
    assert policy["Version"] == "2012-10-17"
    assert [s["Sid"] for s in policy["Statement"]] == ["Own", "More"]
    # AND a label that is a Sid of the owner's policy can be removed
    sqs.remove_permission(QueueUrl=url, Label="Own")
    assert [s["Sid"] for s in (_policy(sqs, url) or {})["Statement"]] == ["More"]


def test_a_label_that_exists_is_refused(sqs: Any) -> None:
    url = _queue(sqs)
    sqs.add_permission(QueueUrl=url, Label="test", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=url, Label="test", AWSAccountIds=["111122223333"],
                           Actions=["ReceiveMessage"])
    assert _error(caught) == (400, "InvalidParameterValue",
                              "Value test for parameter Label is invalid. Reason: Already exists.")


def test_removing_an_unknown_label_is_refused(sqs: Any) -> None:
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.remove_permission(QueueUrl=url, Label="test")
    assert _error(caught) == (
        400, "InvalidParameterValue",
        "Value test for parameter Label is invalid. Reason: can't find label.")


@pytest.mark.parametrize("label", ["", "has space", "dot.ted", "x" * 81, "ünï"])
def test_a_label_breaking_the_rules_is_refused(sqs: Any, label: str) -> None:
    # Labels are 1 to 80 alphanumerics, hyphens and underscores
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=url, Label=label, AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"])
    assert _error(caught) == (
        400, "InvalidParameterValue",
        f"Value {label} for parameter Label is invalid. Reason: Can only include alphanumeric "
        "characters, hyphens, or underscores. 1 to 80 in length.")
    assert _policy(sqs, url) is None


def test_a_label_of_80_characters_is_accepted(sqs: Any) -> None:
    url = _queue(sqs)
    label = "L-_9" * 20
    sqs.add_permission(QueueUrl=url, Label=label, AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    assert (_policy(sqs, url) or {})["Statement"][0]["Sid"] == label


def test_eight_actions_are_over_the_limit_of_seven(sqs: Any) -> None:
    url = _queue(sqs)
    seven = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
             "GetQueueAttributes", "GetQueueUrl", "PurgeQueue"]
    sqs.add_permission(QueueUrl=url, Label="seven", AWSAccountIds=["111122223333"],
                       Actions=seven)
    with pytest.raises(sqs.exceptions.OverLimit) as caught:
        sqs.add_permission(QueueUrl=url, Label="eight", AWSAccountIds=["111122223333"],
                           Actions=[*seven, "ListDeadLetterSourceQueues"])
    assert _error(caught) == (403, "OverLimit", "8 Actions were found, maximum allowed is 7.")


@pytest.mark.parametrize("action", ["RemovePermission", "AddPermission", "SetQueueAttributes",
                                    "DeleteQueue", "CreateQueue", "TagQueue"])
def test_an_action_only_the_owner_may_call_cannot_be_shared(sqs: Any, action: str) -> None:
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=["111122223333"],
                           Actions=[action])
    assert _error(caught) == (
        400, "InvalidParameterValue",
        f"Value SQS:{action} for parameter ActionName is invalid. Reason: Only the queue "
        "owner is allowed to invoke this action.")


def test_an_action_sqs_does_not_have_is_invalid(sqs: Any) -> None:
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=["111122223333"],
                           Actions=["SendMessages"])
    assert _error(caught) == (
        400, "InvalidParameterValue",
        "Value SQS:SendMessages for parameter ActionName is invalid. Reason: Please refer to "
        "the appropriate WSDL for a list of valid actions.")


def test_no_actions_is_a_missing_parameter(sqs: Any) -> None:
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=["111122223333"], Actions=[])
    assert _error(caught) == (400, "MissingParameter",
                              "The request must contain the parameter Actions.")


@pytest.mark.parametrize(("accounts", "shown"), [([], ""), (["12345"], "12345"),
                                                  (["arn:aws:iam::111122223333:root"],
                                                   "arn:aws:iam::111122223333:root")])
def test_account_ids_must_be_twelve_digit_accounts(
    sqs: Any, accounts: list[str], shown: str,
) -> None:
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=accounts,
                           Actions=["SendMessage"])
    assert _error(caught) == (
        400, "InvalidParameterValue",
        f"Value [{shown}] for parameter PrincipalId is invalid. Reason: Unable to verify.")


def test_permissions_on_a_missing_queue_are_queue_does_not_exist(sqs: Any) -> None:
    url = _queue(sqs)
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.remove_permission(QueueUrl=url, Label="x")


def test_permissions_past_the_policy_size_quota_are_over_limit(sqs: Any) -> None:
    # GIVEN a policy close to SQS's 8,192-byte quota
    url = _queue(sqs)
    accounts = [f"{n:012d}" for n in range(1, 60)]
    with pytest.raises(sqs.exceptions.OverLimit) as caught:
        for n in range(10):
            sqs.add_permission(QueueUrl=url, Label=f"l{n}", AWSAccountIds=accounts,
                               Actions=["SendMessage"])
    # THEN the permission that would pass it is refused, and the policy stays within it
    assert _error(caught)[:2] == (403, "OverLimit")
    text = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"][
        "Policy"]
    assert 0 < len(text.encode()) <= 8192


@pytest.mark.parametrize(("policy", "reason"), [
    ({"Version": "2012-10-17"}, "The policy needs a Statement: an object or a list of them."),
    ({"Version": "2000-01-01", "Statement": []}, "Version must be 2012-10-17 or 2008-10-17."),
    ({"Statement": [{"Effect": "Maybe", "Principal": "*", "Action": "sqs:*"}]},
     "Effect must be Allow or Deny."),
    ({"Statement": [{"Effect": "Allow", "Action": "sqs:*"}]},
     "A statement needs a Principal (or NotPrincipal)."),
    ({"Statement": [{"Effect": "Allow", "Principal": "*"}]},
     "A statement needs an Action (or NotAction)."),
    ({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sqs:*",
                     "Condition": {"StringSoundsLike": {"aws:SourceArn": "x"}}}]},
     "Condition has an unknown operator StringSoundsLike."),
    ({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Extra": 1}]},
     "Statement has an unknown element Extra."),
    ({"Statement": [{"Sid": "a", "Effect": "Allow", "Principal": "*", "Action": "sqs:*"},
                    {"Sid": "a", "Effect": "Deny", "Principal": "*", "Action": "sqs:*"}]},
     "Statement ids must be unique: a appears twice."),
])
def test_set_queue_attributes_validates_the_policy(
    sqs: Any, policy: dict[str, Any], reason: str,
) -> None:
    url = _queue(sqs)
    for call in (
        lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)}),
        lambda: sqs.create_queue(QueueName="other", Attributes={"Policy": json.dumps(policy)}),
    ):
        with pytest.raises(sqs.exceptions.ClientError) as caught:
            call()
        assert _error(caught) == (400, "InvalidAttributeValue",
                                  f"Invalid value for the parameter Policy. Reason: {reason}")
    assert _policy(sqs, url) is None


def test_a_valid_policy_with_conditions_is_stored(sqs: Any) -> None:
    url = _queue(sqs)
    policy = {"Version": "2012-10-17", "Id": "sns-fanout", "Statement": [{
        "Sid": "topic", "Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"},
        "Action": "sqs:SendMessage", "Resource": ARN,
        "Condition": {"ArnEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:000000000000:t"}},
    }]}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    assert _policy(sqs, url) == policy
