"""GIVEN DMQ_CHAOS's fault injector on a DynamoDB client WHEN calls are made
THEN the chosen fraction fails with a throttle, a timeout after the write landed, or a
claim's failed condition, and each fault is counted with the message ids it touched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from moto import mock_aws

from dmqlocal.chaos import CLAIM_CONDITION, FaultInjector, rate

TABLE = "t"


@pytest.fixture
def db() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                       {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "sk", "AttributeType": "S"}])
        yield client


def _key(n: int) -> dict[str, Any]:
    return {"pk": {"S": "q#0"}, "sk": {"S": f"m{n}"}}


def test_the_rate_is_a_fraction_and_off_by_default() -> None:
    assert rate({}) == 0.0 and rate({"DMQ_CHAOS": "0.05"}) == 0.05
    with pytest.raises(ValueError, match="DMQ_CHAOS"):
        rate({"DMQ_CHAOS": "5"})


def test_every_write_fails_one_of_the_three_ways(db: Any) -> None:
    # GIVEN every call failed
    injector = FaultInjector(1.0, seed=3)
    injector.attach(db)
    clean = boto3.client("dynamodb", region_name="us-east-1")  # no faults: reads back
    outcomes = []
    for n in range(40):
        try:
            db.put_item(TableName=TABLE, Item={**_key(n), "v": {"S": "x"}})
            outcomes.append("ok")
        except ReadTimeoutError:
            found = clean.get_item(TableName=TABLE, Key=_key(n), ConsistentRead=True)
            outcomes.append("landed" if "Item" in found else "timeout")
        except ClientError as exc:
            outcomes.append(exc.response["Error"]["Code"])
    # THEN no put succeeds: a throttle, or a write that landed with its answer lost
    assert "ok" not in outcomes
    assert {"ProvisionedThroughputExceededException", "landed"} <= set(outcomes)
    faults = injector.snapshot()
    assert sum(faults["injected"].values()) >= 40
    # a put is not a claim: its condition never fails on purpose
    assert not any(k.endswith("condition") for k in faults["injected"] if "PutItem" in k)
    assert "m0" in faults["messages"]


def test_a_claim_loses_its_condition(db: Any) -> None:
    db.put_item(TableName=TABLE, Item={**_key(1), "visible_at": {"N": "5"}})
    injector = FaultInjector(1.0, seed=0)
    injector.attach(db)
    codes = set()
    for _ in range(30):
        try:
            db.update_item(TableName=TABLE, Key=_key(1), UpdateExpression="SET v = :v",
                           ConditionExpression=CLAIM_CONDITION,
                           ExpressionAttributeValues={":v": {"S": "y"}, ":seen": {"N": "5"}})
        except ClientError as exc:
            codes.add(exc.response["Error"]["Code"])
        except ReadTimeoutError:
            codes.add("timeout")
    assert "ConditionalCheckFailedException" in codes
    assert injector.snapshot()["injected"]["UpdateItem condition"] > 0
