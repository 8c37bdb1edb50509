"""GIVEN DynamoDB Local with its data in a folder WHEN it is stopped and started again over
the same folder THEN the store keeps its epoch; over a new folder it gets a new one."""

from __future__ import annotations

from pathlib import Path

import boto3

from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY, DynamoDBLocal
from infra import provision


def _run(db_path: Path) -> str:
    """Start DynamoDB Local over `db_path`, provision DMQ's tables, return the epoch, stop."""
    server = DynamoDBLocal(db_path)
    endpoint = server.start()
    try:
        dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                                aws_access_key_id=ACCESS_KEY,
                                aws_secret_access_key=SECRET_KEY)
        provision.create_all(dynamodb, None)
        return provision.store_epoch(dynamodb)
    finally:
        server.stop()


def test_a_restart_over_the_same_data_keeps_the_epoch(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _run(tmp_path / "a")
    # WHEN the store restarts over its data THEN the epoch is the same
    assert _run(tmp_path / "a") == first
    # AND a store over other data has its own
    assert _run(tmp_path / "b") != first
