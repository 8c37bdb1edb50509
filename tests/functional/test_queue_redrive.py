"""GIVEN dead-letter set-ups WHEN redrive policies are set or listed THEN SQS's rules hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

ACCOUNT = "000000000000"


def _code(caught: pytest.ExceptionInfo[Any]) -> str:
    return str(caught.value.response["Error"]["Code"])


def _queue(sqs: Any, name: str, **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _arn(name: str) -> str:
    return f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"


def _redrive(target: str, count: Any = 3) -> str:
    return json.dumps({"deadLetterTargetArn": _arn(target), "maxReceiveCount": count})


def _allow(permission: str, *sources: str) -> str:
    policy: dict[str, Any] = {"redrivePermission": permission}
    if sources:
        policy["sourceQueueArns"] = [_arn(s) for s in sources]
    return json.dumps(policy)


def _attribute(sqs: Any, url: str, name: str) -> str | None:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[name])
    return found.get("Attributes", {}).get(name)


def _sources(sqs: Any, url: str, **kwargs: Any) -> list[str]:
    found = sqs.list_dead_letter_source_queues(QueueUrl=url, **kwargs)
    return sorted(u.rsplit("/", 1)[1] for u in found["queueUrls"])


# -- RedrivePolicy --------------------------------------------------------------------------


def test_redrive_policy_is_stored_and_read_back(sqs: Any) -> None:
    # GIVEN a dead-letter queue WHEN a source is created with a RedrivePolicy to it
    _queue(sqs, "dlq")
    source = _queue(sqs, "work", RedrivePolicy=_redrive("dlq", "4"))
    # THEN the policy reads back with its target and a numeric maxReceiveCount
    policy = json.loads(_attribute(sqs, source, "RedrivePolicy") or "{}")
    assert policy == {"deadLetterTargetArn": _arn("dlq"), "maxReceiveCount": 4}


def test_redrive_policy_to_a_missing_queue_is_rejected(sqs: Any) -> None:
    # GIVEN no queue "nowhere" WHEN a RedrivePolicy targets it (at creation or later)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        _queue(sqs, "work", RedrivePolicy=_redrive("nowhere"))
    assert _code(caught) == "InvalidParameterValue"
    url = _queue(sqs, "other")
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": _redrive("nowhere")})
    # THEN InvalidParameterValue, and neither queue has a policy
    assert _code(caught) == "InvalidParameterValue"
    assert _attribute(sqs, url, "RedrivePolicy") is None
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="work")


def test_redrive_policy_to_a_deleted_queue_is_rejected(sqs: Any) -> None:
    # GIVEN a dead-letter queue that was deleted
    sqs.delete_queue(QueueUrl=_queue(sqs, "dlq"))
    source = _queue(sqs, "work")
    # WHEN a RedrivePolicy targets it THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": _redrive("dlq")})
    assert _code(caught) == "InvalidParameterValue"


@pytest.mark.parametrize("count", [1, 1000])
def test_max_receive_count_limits_are_inclusive(sqs: Any, count: int) -> None:
    # GIVEN a dead-letter queue WHEN maxReceiveCount is 1 or 1000 THEN it is accepted
    _queue(sqs, "dlq")
    source = _queue(sqs, "work", RedrivePolicy=_redrive("dlq", count))
    assert json.loads(_attribute(sqs, source, "RedrivePolicy") or "{}")["maxReceiveCount"] == count


@pytest.mark.parametrize(
    "policy",
    [_redrive("dlq", 0), _redrive("dlq", 1001), _redrive("dlq", -1), _redrive("dlq", "many"),
     _redrive("dlq", True), _redrive("dlq", "\u00b2"),
     json.dumps({"deadLetterTargetArn": _arn("dlq")}),
     json.dumps({"maxReceiveCount": 3}),
     json.dumps({"deadLetterTargetArn": "not-an-arn", "maxReceiveCount": 3}),
     json.dumps({"deadLetterTargetArn": _arn("dlq"), "maxReceiveCount": 3, "extra": 1})],
)
def test_invalid_redrive_policy_is_an_invalid_parameter_value(sqs: Any, policy: str) -> None:
    # GIVEN a dead-letter queue WHEN a RedrivePolicy with a missing or wrong field is set
    _queue(sqs, "dlq")
    source = _queue(sqs, "work")
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": policy})
    # THEN InvalidParameterValue quoting the policy as sent (as SQS answers it), nothing stored
    assert _code(caught) == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"].startswith(
        f"Value {policy} for parameter RedrivePolicy is invalid. Reason: ")
    assert _attribute(sqs, source, "RedrivePolicy") is None


@pytest.mark.parametrize("policy", ["{broken", "[]"])
def test_a_redrive_policy_that_is_no_json_object_is_an_invalid_value(
    sqs: Any, policy: str,
) -> None:
    # GIVEN a queue WHEN a RedrivePolicy that is no JSON object is set
    source = _queue(sqs, "work")
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": policy})
    # THEN InvalidAttributeValue and no policy is stored
    assert _attribute(sqs, source, "RedrivePolicy") is None


def test_an_empty_redrive_policy_removes_it(sqs: Any) -> None:
    # GIVEN a source queue redriving to a DLQ
    dlq = _queue(sqs, "dlq")
    source = _queue(sqs, "work", RedrivePolicy=_redrive("dlq"))
    # WHEN its RedrivePolicy is set to ""
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    # THEN it has no policy and is no longer a source of the DLQ
    assert _attribute(sqs, source, "RedrivePolicy") is None
    assert _sources(sqs, dlq) == []


# -- RedriveAllowPolicy ---------------------------------------------------------------------


def test_deny_all_refuses_every_source(sqs: Any) -> None:
    # GIVEN a DLQ whose RedriveAllowPolicy is denyAll
    _queue(sqs, "dlq", RedriveAllowPolicy=_allow("denyAll"))
    source = _queue(sqs, "work")
    # WHEN a queue is created or set to redrive to it THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        _queue(sqs, "new-work", RedrivePolicy=_redrive("dlq"))
    assert _code(caught) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": _redrive("dlq")})
    assert _code(caught) == "InvalidParameterValue"
    assert _attribute(sqs, source, "RedrivePolicy") is None


def test_allow_all_accepts_any_source(sqs: Any) -> None:
    # GIVEN a DLQ whose RedriveAllowPolicy is allowAll WHEN a source redrives to it
    dlq = _queue(sqs, "dlq", RedriveAllowPolicy=_allow("allowAll"))
    _queue(sqs, "work", RedrivePolicy=_redrive("dlq"))
    # THEN it is accepted and listed as a source
    assert _sources(sqs, dlq) == ["work"]
    assert json.loads(_attribute(sqs, dlq, "RedriveAllowPolicy") or "{}") == {
        "redrivePermission": "allowAll"
    }


def test_by_queue_accepts_only_the_listed_sources(sqs: Any) -> None:
    # GIVEN a DLQ that allows only "listed"
    dlq = _queue(sqs, "dlq", RedriveAllowPolicy=_allow("byQueue", "listed"))
    # WHEN "listed" redrives to it THEN it is accepted
    _queue(sqs, "listed", RedrivePolicy=_redrive("dlq"))
    # WHEN another queue does, at creation or later THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        _queue(sqs, "stranger", RedrivePolicy=_redrive("dlq"))
    assert _code(caught) == "InvalidParameterValue"
    other = _queue(sqs, "other")
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=other, Attributes={"RedrivePolicy": _redrive("dlq")})
    assert _code(caught) == "InvalidParameterValue"
    assert _sources(sqs, dlq) == ["listed"]


@pytest.mark.parametrize(
    "policy",
    [json.dumps({"redrivePermission": "byQueue"}),
     _allow("byQueue", *[f"s{i}" for i in range(11)]),
     json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": []}),
     json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": ["not-an-arn"]}),
     _allow("allowAll", "work"), _allow("denyAll", "work"),
     json.dumps({"redrivePermission": "sometimes"}), json.dumps({}), "{broken"],
)
def test_malformed_redrive_allow_policy_is_an_invalid_value(sqs: Any, policy: str) -> None:
    # GIVEN a queue WHEN a malformed RedriveAllowPolicy is set
    url = _queue(sqs, "dlq")
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedriveAllowPolicy": policy})
    # THEN InvalidAttributeValue and nothing is stored
    assert _attribute(sqs, url, "RedriveAllowPolicy") is None


def test_by_queue_accepts_up_to_ten_sources(sqs: Any) -> None:
    # GIVEN a queue WHEN byQueue lists exactly 10 source ARNs THEN it is accepted
    url = _queue(sqs, "dlq")
    policy = _allow("byQueue", *[f"s{i}" for i in range(10)])
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedriveAllowPolicy": policy})
    stored = json.loads(_attribute(sqs, url, "RedriveAllowPolicy") or "{}")
    assert len(stored["sourceQueueArns"]) == 10


# -- ListDeadLetterSourceQueues -------------------------------------------------------------


def test_lists_the_queues_that_redrive_to_a_dlq(sqs: Any) -> None:
    # GIVEN two DLQs, two sources of the first, one of the second and an unrelated queue
    first = _queue(sqs, "dlq-1")
    second = _queue(sqs, "dlq-2")
    _queue(sqs, "a", RedrivePolicy=_redrive("dlq-1"))
    _queue(sqs, "b", RedrivePolicy=_redrive("dlq-1"))
    _queue(sqs, "c", RedrivePolicy=_redrive("dlq-2"))
    _queue(sqs, "plain")
    # WHEN each DLQ's sources are listed THEN only its own sources come back
    assert _sources(sqs, first) == ["a", "b"]
    assert _sources(sqs, second) == ["c"]


def test_a_queue_without_sources_lists_an_empty_list(sqs: Any) -> None:
    # GIVEN a queue nobody redrives to WHEN its sources are listed THEN queueUrls is empty
    url = _queue(sqs, "lonely")
    assert sqs.list_dead_letter_source_queues(QueueUrl=url)["queueUrls"] == []


def test_deleted_sources_are_not_listed(sqs: Any) -> None:
    # GIVEN two sources of a DLQ, one deleted
    dlq = _queue(sqs, "dlq")
    _queue(sqs, "kept", RedrivePolicy=_redrive("dlq"))
    sqs.delete_queue(QueueUrl=_queue(sqs, "gone", RedrivePolicy=_redrive("dlq")))
    # WHEN sources are listed THEN only the live one is returned
    assert _sources(sqs, dlq) == ["kept"]


def test_sources_page_with_max_results_and_next_token(sqs: Any) -> None:
    # GIVEN five sources of a DLQ
    dlq = _queue(sqs, "dlq")
    names = [f"src-{i}" for i in range(5)]
    for name in names:
        _queue(sqs, name, RedrivePolicy=_redrive("dlq"))
    # WHEN listed two at a time following NextToken
    seen: list[str] = []
    page = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=2)
    sizes = [len(page["queueUrls"])]
    seen += page["queueUrls"]
    while "NextToken" in page:
        page = sqs.list_dead_letter_source_queues(
            QueueUrl=dlq, MaxResults=2, NextToken=page["NextToken"]
        )
        sizes.append(len(page["queueUrls"]))
        seen += page["queueUrls"]
    # THEN pages of 2, 2, 1 hold every source once
    assert sizes == [2, 2, 1]
    assert sorted(u.rsplit("/", 1)[1] for u in seen) == names


@pytest.mark.parametrize("max_results", [0, 1001])
def test_source_max_results_out_of_range_is_invalid(sqs: Any, max_results: int) -> None:
    # GIVEN a DLQ WHEN its sources are listed with MaxResults outside 1..1000
    dlq = _queue(sqs, "dlq")
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=max_results)
    # THEN InvalidParameterValue
    assert _code(caught) == "InvalidParameterValue"


def test_sources_of_a_missing_queue_raise_does_not_exist(sqs: Any) -> None:
    # GIVEN no queue "ghost" WHEN its sources are listed THEN QueueDoesNotExist
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.list_dead_letter_source_queues(QueueUrl=f"http://dmq.test/{ACCOUNT}/ghost")
