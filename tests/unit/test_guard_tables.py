"""GIVEN a DynamoDB or Streams request's parameters WHEN a shared client's guards look at
them THEN they find every table the call names, by name or ARN, and nothing else."""

from __future__ import annotations

from chalicelib.backend.guard.hooks import tables_of

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/dmq-messages-c2"


def test_every_way_a_request_names_a_table() -> None:
    assert tables_of({"TableName": "dmq-messages", "Key": {}}) == {"dmq-messages"}
    assert tables_of({"TableName": ARN}) == {"dmq-messages-c2"}
    assert tables_of({"RequestItems": {"a": [], "b": []}}) == {"a", "b"}
    assert tables_of({"TransactItems": [
        {"Put": {"TableName": "a"}}, {"ConditionCheck": {"TableName": "b"}},
        {"Get": {"TableName": "c"}}]}) == {"a", "b", "c"}
    assert tables_of({"StreamArn": f"{ARN}/stream/2024-01-01T00:00:00.000"}) == {
        "dmq-messages-c2"}
    assert tables_of({"TableName": f"{ARN}/index/visible-index"}) == {"dmq-messages-c2"}


def test_a_request_naming_no_table_names_none() -> None:
    assert tables_of({}) == frozenset()
    assert tables_of({"ShardIterator": "opaque", "Limit": 10}) == frozenset()
    assert tables_of({"Statement": "SELECT * FROM a"}) == frozenset()
