"""GIVEN a region's tables under watch WHEN one disappears, or the store cannot be reached
THEN the region is provisioned again once, the runtime is told, and a failed check is
only logged (the next one tries again)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import EndpointConnectionError

from chalicelib.aws import Clients
from dmqlocal.table_watch import RegionTables, TableWatch
from infra import provision

TABLES = ("dmq-queues", "dmq-control", "dmq-messages")


def _watch(aws: Clients, dynamodb: Any, forgotten: list[str]) -> TableWatch:
    return TableWatch([RegionTables("us-east-1", dynamodb, TABLES,
                                    lambda: provision.create_all(aws.dynamodb, aws.s3))],
                      forgotten.append)


def test_a_lost_table_is_provisioned_again_once(aws: Clients) -> None:
    forgotten: list[str] = []
    watch = _watch(aws, aws.dynamodb, forgotten)
    assert watch.check_once() == [] and forgotten == []
    aws.dynamodb.delete_table(TableName="dmq-control")
    assert watch.check_once() == ["us-east-1"] and forgotten == ["us-east-1"]
    assert set(TABLES) <= set(aws.dynamodb.list_tables()["TableNames"])
    assert watch.check_once() == [] and watch.provisioned == 1


def test_an_unreachable_store_is_checked_again_later(aws: Clients) -> None:
    class Unreachable:
        def get_paginator(self, name: str) -> Any:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

    forgotten: list[str] = []
    assert _watch(aws, Unreachable(), forgotten).check_once() == [] and forgotten == []
