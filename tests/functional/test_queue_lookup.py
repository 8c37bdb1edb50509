"""GIVEN queues WHEN they are looked up or listed THEN GetQueueUrl and ListQueues act as SQS."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.settings import Settings

OWNER = "000000000000"
BASE = f"http://dmq.test/{OWNER}"


def _code(caught: pytest.ExceptionInfo[Any]) -> str:
    return str(caught.value.response["Error"]["Code"])


def _make(sqs: Any, *names: str) -> None:
    for name in names:
        sqs.create_queue(QueueName=name)


def _names(response: dict[str, Any]) -> list[str]:
    return [u.rsplit("/", 1)[1] for u in response.get("QueueUrls", [])]


def _all_pages(sqs: Any, **kwargs: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    token = None
    while True:
        response = sqs.list_queues(**kwargs, **({"NextToken": token} if token else {}))
        pages.append(_names(response))
        token = response.get("NextToken")
        if not token or len(pages) > 50:
            return pages


# -- GetQueueUrl ----------------------------------------------------------------------------


def test_get_queue_url_returns_the_created_url(sqs: Any) -> None:
    # GIVEN two queues WHEN each is looked up by name THEN its own URL comes back
    _make(sqs, "alpha", "beta")
    assert sqs.get_queue_url(QueueName="alpha")["QueueUrl"] == f"{BASE}/alpha"
    assert sqs.get_queue_url(QueueName="beta")["QueueUrl"] == f"{BASE}/beta"


@pytest.mark.parametrize("name", ["missing", "ALPHA", "alph", "alpha2"])
def test_get_queue_url_of_an_unknown_name_raises_does_not_exist(sqs: Any, name: str) -> None:
    # GIVEN only "alpha" WHEN another (or a differently cased) name is looked up
    _make(sqs, "alpha")
    # THEN QueueDoesNotExist
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=name)


def test_get_queue_url_with_the_owner_account(sqs: Any) -> None:
    # GIVEN a queue of the caller's account
    _make(sqs, "owned")
    # WHEN it is looked up with QueueOwnerAWSAccountId set to that account THEN it is found
    found = sqs.get_queue_url(QueueName="owned", QueueOwnerAWSAccountId=OWNER)
    assert found["QueueUrl"] == f"{BASE}/owned"
    # WHEN another account is named THEN that account has no such queue
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="owned", QueueOwnerAWSAccountId="111111111111")


def test_a_url_of_another_account_does_not_reach_the_queue(sqs: Any) -> None:
    # GIVEN a queue of the caller's account
    _make(sqs, "mine")
    # WHEN it is addressed under another account's path THEN QueueDoesNotExist
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_attributes(QueueUrl="http://dmq.test/111111111111/mine")


# -- ListQueues -----------------------------------------------------------------------------


def test_list_queues_with_no_queue_returns_no_urls(sqs: Any) -> None:
    # GIVEN no queue WHEN queues are listed THEN neither URLs nor a token come back
    response = sqs.list_queues()
    assert "QueueUrls" not in response
    assert "NextToken" not in response


def test_list_queues_returns_every_queue_url(sqs: Any) -> None:
    # GIVEN three queues WHEN queues are listed without parameters
    _make(sqs, "c-queue", "a-queue", "b-queue")
    response = sqs.list_queues()
    # THEN every URL is listed once and no token is returned
    assert sorted(response["QueueUrls"]) == [f"{BASE}/{n}-queue" for n in "abc"]
    assert "NextToken" not in response


def test_list_queues_filters_by_case_sensitive_prefix(sqs: Any) -> None:
    # GIVEN queues with shared and differently cased prefixes
    _make(sqs, "orders-eu", "orders-us", "Orders-big", "payments", "order")
    # WHEN listed by prefix THEN only names starting with it (same case) come back
    assert sorted(_names(sqs.list_queues(QueueNamePrefix="orders"))) == ["orders-eu", "orders-us"]
    assert _names(sqs.list_queues(QueueNamePrefix="Orders")) == ["Orders-big"]
    assert sorted(_names(sqs.list_queues(QueueNamePrefix="order"))) == [
        "order", "orders-eu", "orders-us"
    ]
    assert _names(sqs.list_queues(QueueNamePrefix="orders-us")) == ["orders-us"]
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix="zzz")


def test_list_queues_leaves_out_deleted_queues(sqs: Any) -> None:
    # GIVEN two queues of which one is deleted
    _make(sqs, "live", "dead")
    sqs.delete_queue(QueueUrl=f"{BASE}/dead")
    # WHEN listed THEN only the live one is returned
    assert _names(sqs.list_queues()) == ["live"]


@pytest.mark.parametrize("max_results", [1, 2, 1000])
def test_max_results_within_range_is_accepted(sqs: Any, max_results: int) -> None:
    # GIVEN two queues WHEN listed with MaxResults from 1 to 1000
    _make(sqs, "q1", "q2")
    response = sqs.list_queues(MaxResults=max_results)
    # THEN at most that many come back, with a token only while more remain
    assert len(response["QueueUrls"]) == min(max_results, 2)
    assert ("NextToken" in response) == (max_results < 2)


@pytest.mark.parametrize("max_results", [0, -1, 1001, 5000])
def test_max_results_out_of_range_is_invalid(sqs: Any, max_results: int) -> None:
    # GIVEN a queue WHEN listed with MaxResults outside 1..1000
    _make(sqs, "q1")
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.list_queues(MaxResults=max_results)
    # THEN InvalidParameterValue
    assert _code(caught) == "InvalidParameterValue"


def test_next_token_pages_through_every_queue_once(sqs: Any) -> None:
    # GIVEN seven queues
    names = [f"page-{i}" for i in range(7)]
    _make(sqs, *names)
    # WHEN listed two at a time, following NextToken
    pages = _all_pages(sqs, MaxResults=2)
    # THEN pages of 2, 2, 2, 1 together hold every queue exactly once
    assert [len(p) for p in pages] == [2, 2, 2, 1]
    assert sorted(n for p in pages for n in p) == names


def test_next_token_is_absent_when_the_page_holds_the_rest(sqs: Any) -> None:
    # GIVEN four queues WHEN listed with MaxResults 4, then 2 pages of 2
    _make(sqs, "w", "x", "y", "z")
    assert "NextToken" not in sqs.list_queues(MaxResults=4)
    assert [len(p) for p in _all_pages(sqs, MaxResults=2)] == [2, 2]


def test_paging_respects_the_prefix(sqs: Any) -> None:
    # GIVEN five matching queues among others
    matching = [f"job-{i}" for i in range(5)]
    _make(sqs, *matching, "aaa", "jobs", "zzz", "Job-9")
    # WHEN listed by prefix 3 at a time THEN only matching names, each once
    pages = _all_pages(sqs, QueueNamePrefix="job-", MaxResults=3)
    assert [len(p) for p in pages] == [3, 2]
    assert sorted(n for p in pages for n in p) == matching


def test_list_without_max_results_returns_no_token(sqs: Any) -> None:
    # GIVEN several queues WHEN listed without MaxResults THEN all come back and no token
    _make(sqs, *[f"n{i}" for i in range(5)])
    response = sqs.list_queues()
    assert len(response["QueueUrls"]) == 5
    assert "NextToken" not in response


# 1,001 queues are more than an account's default quota: this account has none.
@pytest.mark.parametrize("settings", [Settings(long_poll_interval_ms=50,
                                               metadata_cache_seconds=0.0,
                                               account_max_queues=0)])
def test_list_queues_caps_an_unpaged_listing_at_1000(sqs: Any) -> None:
    # GIVEN 1,001 queues
    _make(sqs, *[f"bulk-{i:04d}" for i in range(1001)])
    # WHEN listed without MaxResults THEN exactly 1,000 URLs come back
    assert len(sqs.list_queues()["QueueUrls"]) == 1000
    # WHEN listed with MaxResults 1000 THEN a token leads to the last one
    first = sqs.list_queues(MaxResults=1000)
    rest = sqs.list_queues(MaxResults=1000, NextToken=first["NextToken"])
    assert len(first["QueueUrls"]) == 1000
    assert len(rest["QueueUrls"]) == 1
    assert set(first["QueueUrls"]).isdisjoint(rest["QueueUrls"])
    assert "NextToken" not in rest
