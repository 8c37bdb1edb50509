"""GIVEN several clients changing one queue's metadata at once WHEN their writes race
THEN each either lands (on a fresh read of the queue) or fails with an error the SDKs
retry, never a 500 of DMQ's own or a sender fault, and the queue ends in a state one of
the acknowledged writes produced."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from tests.conftest import sqs_client
from tests.sdk_retries import outcome

NO_RETRIES = Config(retries={"total_max_attempts": 1})


def test_racing_attribute_and_tag_writes_land_or_ask_for_a_retry(dmq: Client) -> None:
    # GIVEN a queue and clients that do not retry, so every raw answer is seen
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="contended")["QueueUrl"]

    def set_timeout(i: int) -> tuple[str, str]:
        value = str(100 + i)
        return value, outcome(sqs, "SetQueueAttributes", lambda: sqs.set_queue_attributes(
            QueueUrl=url, Attributes={"VisibilityTimeout": value}))

    def tag(i: int) -> tuple[str, str]:
        key = f"k{i % 40}"  # SQS allows 50 tags per queue
        return key, outcome(sqs, "TagQueue", lambda: sqs.tag_queue(
            QueueUrl=url, Tags={key: "v"}))

    # WHEN 240 SetQueueAttributes and TagQueue calls race on 8 threads
    with ThreadPoolExecutor(max_workers=8) as pool:
        timeouts = list(pool.map(set_timeout, range(120)))
        tags = list(pool.map(tag, range(120)))
        mixed = list(pool.map(lambda i: (set_timeout if i % 2 else tag)(1000 + i), range(40)))

    # THEN no call failed with an error the SDKs would not retry
    outcomes = Counter(o for _, o in timeouts + tags + mixed)
    print(dict(outcomes))
    assert not [o for o in outcomes if o.startswith("final")], outcomes
    # AND the queue holds one acknowledged timeout and every acknowledged tag
    acked_timeouts = {v for v, o in timeouts + mixed if o == "ok" and v.isdigit()}
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert got["Attributes"]["VisibilityTimeout"] in acked_timeouts
    acked_tags = {k for k, o in tags + mixed if o == "ok" and k.startswith("k")}
    assert acked_tags
    assert acked_tags <= set(sqs.list_queue_tags(QueueUrl=url).get("Tags", {}))


def _race_delete(sqs: Any, url: str) -> list[str]:
    """DeleteQueue racing 12 SetQueueAttributes calls; the delete's outcome comes first."""

    def set_attributes(i: int) -> str:
        return outcome(sqs, "SetQueueAttributes", lambda: sqs.set_queue_attributes(
            QueueUrl=url, Attributes={"DelaySeconds": str(i % 10)}))

    with ThreadPoolExecutor(max_workers=4) as pool:
        setters = [pool.submit(set_attributes, i) for i in range(12)]
        deleted = pool.submit(outcome, sqs, "DeleteQueue",
                              lambda: sqs.delete_queue(QueueUrl=url))
        return [deleted.result(), *(f.result() for f in setters)]


def test_delete_queue_racing_set_attributes_deletes_without_a_500(dmq: Client) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    seen: Counter[str] = Counter()
    for attempt in range(5):
        # GIVEN a queue
        url = sqs.create_queue(QueueName=f"doomed-{attempt}")["QueueUrl"]
        # WHEN DeleteQueue races a stream of SetQueueAttributes calls
        results = _race_delete(sqs, url)
        seen.update(results)
        # THEN the delete is acknowledged (or asks for a retry) and the setters either
        # landed, asked for a retry, or found the queue gone
        assert results[0] == "ok" or results[0].startswith("retryable"), results
        assert all(r == "ok" or r.startswith("retryable") or "NonExistentQueue" in r
                   for r in results[1:]), results
        # AND an acknowledged delete leaves no queue behind
        if results[0] == "ok":
            try:
                sqs.get_queue_url(QueueName=f"doomed-{attempt}")
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
            else:
                raise AssertionError("the queue outlived its acknowledged delete")
    print(dict(seen))
    assert not [o for o in seen if ":500" in o], seen
