"""GIVEN a region's tables under watch WHEN one disappears, or the store cannot be reached
THEN the region is provisioned again once, the runtime is told, and a failed check is
only logged (the next one tries again)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from botocore.exceptions import ClientError, EndpointConnectionError

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


def test_a_client_told_a_table_is_missing_makes_the_watch_check_at_once(aws: Clients) -> None:
    # GIVEN a running watch on a slow timer, watching the client DMQ uses
    forgotten: list[str] = []
    watch = TableWatch([RegionTables("us-east-1", aws.dynamodb, TABLES,
                                     lambda: provision.create_all(aws.dynamodb, aws.s3))],
                       forgotten.append, interval_s=3600.0)
    watch.watch(aws.dynamodb)
    watch.start()
    try:
        # WHEN a table is deleted and a request to it fails as not found
        aws.dynamodb.delete_table(TableName="dmq-control")
        with contextlib.suppress(ClientError):
            aws.dynamodb.get_item(TableName="dmq-control", Key={"key": {"S": "x"}})
        deadline = time.monotonic() + 10
        while not forgotten and time.monotonic() < deadline:
            time.sleep(0.05)
        # THEN the watch provisioned it again long before its timer
        assert forgotten == ["us-east-1"] and watch.provisioned == 1
        assert "dmq-control" in aws.dynamodb.list_tables()["TableNames"]
    finally:
        watch.stop()


def test_an_idle_watch_lists_no_tables_between_its_slow_checks(aws: Clients) -> None:
    listed: list[str] = []
    aws.dynamodb.meta.events.register("before-call.dynamodb.ListTables",
                                      lambda **_: listed.append("ListTables"))
    watch = _watch(aws, aws.dynamodb, [])
    watch.start()
    try:
        time.sleep(2.5)
    finally:
        watch.stop()
    assert listed == [] and TableWatch.INTERVAL_S >= 10
