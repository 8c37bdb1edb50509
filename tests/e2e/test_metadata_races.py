"""GIVEN two DMQ servers over one store (two front ends of one deployment)
WHEN clients of both change the same queue's metadata at the same time
THEN every call lands or fails with an error the SDKs retry, never a 500, and the queue
ends in a state the acknowledged writes produced."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY, DynamoDBLocal
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch
from tests.sdk_retries import outcome

METADATA_CACHE_S = 5.0  # DMQ_METADATA_CACHE_SECONDS, its default
CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"total_max_attempts": 1})


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[DmqProcess, DmqProcess]]:
    """Two `python -m dmqlocal` processes on one DynamoDB Local."""
    store = DynamoDBLocal(None)
    endpoint = store.start()
    servers: list[DmqProcess] = []
    try:
        for n in (1, 2):
            dmq = launch(DMQ_DYNAMODB_ENDPOINT=endpoint, DMQ_DATA_DIR=str(tmp_path / str(n)),
                         AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
            servers.append(dmq)
            if not dmq.wait_ready(START_TIMEOUT_S):
                pytest.fail(f"DMQ did not start:\n{dmq.output}")
        yield servers[0], servers[1]
    finally:
        codes = [dmq.stop(STOP_TIMEOUT_S) for dmq in servers]
        store.stop()
    for dmq, code in zip(servers, codes, strict=True):
        assert code == 0, dmq.output
        assert "unexpected error" not in dmq.output, dmq.output


def _client(dmq: DmqProcess) -> Any:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                        aws_access_key_id="k", aws_secret_access_key="s", config=CONFIG)


def test_writes_racing_across_two_servers_land_or_ask_for_a_retry(
    two_servers: tuple[DmqProcess, DmqProcess],
) -> None:
    # GIVEN a queue, and clients of each server that do not retry
    clients = [_client(dmq) for dmq in two_servers]
    url = clients[0].create_queue(QueueName="contended")["QueueUrl"]

    def write(i: int) -> tuple[str, str]:
        sqs = clients[i % 2]
        if i % 3:
            key = f"k{i % 40}"
            return key, outcome(sqs, "TagQueue", lambda: sqs.tag_queue(
                QueueUrl=url, Tags={key: "v"}))
        value = str(100 + i)
        return value, outcome(sqs, "SetQueueAttributes", lambda: sqs.set_queue_attributes(
            QueueUrl=url, Attributes={"VisibilityTimeout": value}))

    # WHEN 120 TagQueue and SetQueueAttributes calls race through both servers
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(write, range(120)))

    # THEN every failure is one the SDKs retry
    outcomes = Counter(o for _, o in results)
    print(dict(outcomes))
    assert not [o for o in outcomes if o.startswith("final")], outcomes
    # AND once each server's metadata cache (5 s) has expired, the queue holds one
    # acknowledged timeout and every acknowledged tag, whichever server is asked
    time.sleep(METADATA_CACHE_S + 1)
    acked_tags = {k for k, o in results if o == "ok" and k.startswith("k")}
    for sqs in clients:
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
        assert got["Attributes"]["VisibilityTimeout"] in {
            v for v, o in results if o == "ok" and v.isdigit()}
        assert acked_tags <= set(sqs.list_queue_tags(QueueUrl=url).get("Tags", {}))


def test_delete_queue_racing_set_attributes_on_the_other_server(
    two_servers: tuple[DmqProcess, DmqProcess],
) -> None:
    deleter, setter = (_client(dmq) for dmq in two_servers)
    seen: Counter[str] = Counter()
    for attempt in range(5):
        # GIVEN a queue that the setter's server has read (and cached)
        name = f"doomed-{attempt}"
        url = deleter.create_queue(QueueName=name)["QueueUrl"]
        setter.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])

        def set_attributes(i: int, url: str = url) -> str:
            return outcome(setter, "SetQueueAttributes", lambda: setter.set_queue_attributes(
                QueueUrl=url, Attributes={"DelaySeconds": str(i % 10)}))

        # WHEN one server deletes the queue while the other sets its attributes
        with ThreadPoolExecutor(max_workers=4) as pool:
            setters = [pool.submit(set_attributes, i) for i in range(8)]
            deleted = outcome(deleter, "DeleteQueue", lambda url=url: deleter.delete_queue(
                QueueUrl=url))
            results = [deleted, *(f.result() for f in setters)]
        seen.update(results)
        # THEN nothing failed in a way the SDKs would not retry, but for a queue found gone
        assert deleted == "ok" or deleted.startswith("retryable"), results
        assert all(r == "ok" or r.startswith("retryable") or "NonExistentQueue" in r
                   for r in results[1:]), results
        # AND an acknowledged delete leaves no queue behind
        if deleted == "ok":
            with pytest.raises(ClientError) as caught:
                deleter.get_queue_url(QueueName=name)
            assert "NonExistentQueue" in caught.value.response["Error"]["Code"]
    print(dict(seen))
    assert not [o for o in seen if ":500:" in o], seen
