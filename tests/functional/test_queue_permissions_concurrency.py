"""GIVEN several clients adding permissions to one queue at once WHEN their policy edits
race THEN every acknowledged label is in the Policy (each edit is applied again to a fresh
read of the queue), a label is never added twice, and no call fails with a 500."""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from botocore.config import Config
from chalice.test import Client

from tests.conftest import sqs_client
from tests.sdk_retries import outcome

NO_RETRIES = Config(retries={"total_max_attempts": 1})


def test_racing_add_permission_calls_all_land_once(dmq: Client) -> None:
    # GIVEN a queue and clients that do not retry, so every raw answer is seen
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    url = sqs.create_queue(QueueName="shared")["QueueUrl"]

    def add(i: int) -> tuple[str, str]:
        label = f"label-{i % 20}"  # every label is asked for twice
        return label, outcome(sqs, "AddPermission", lambda: sqs.add_permission(
            QueueUrl=url, Label=label, AWSAccountIds=["111122223333"],
            Actions=["SendMessage"]))

    # WHEN 40 AddPermission calls race on 8 threads
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(add, range(40)))

    # THEN each call either landed, found its label already there, or asked for a retry
    kinds = Counter(o.split(":")[0] if o != "ok" else "ok" for _, o in results)
    assert set(kinds) <= {"ok", "final", "retryable"}, kinds
    duplicates = [o for _, o in results if o.startswith("final")]
    assert all(":InvalidParameterValue:400:" in o for o in duplicates), duplicates
    assert not [o for _, o in results if ":500:" in o]
    # AND every acknowledged label is in the policy exactly once
    acked = {label for label, o in results if o == "ok"}
    assert acked
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])[
        "Attributes"]["Policy"])
    sids = [s["Sid"] for s in policy["Statement"]]
    assert len(sids) == len(set(sids))
    assert acked <= set(sids)
    # AND a label is acknowledged at most once
    assert sum(o == "ok" for _, o in results) == len(acked)
