"""GIVEN account A calling DeleteQueue, PurgeQueue and TagQueue on account B's queues, and
on names B does not have WHEN the calls are refused THEN the usage records put them on A's
account (the caller's credential), with their outcome, and none on B's; a request that is
not authenticated is in nobody's usage; the usage report still reads the records and
bills A."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from chalice.test import Client

from app import runtime
from chalicelib.settings import Settings
from tests.admin_signing import client
from tests.security.attackers import ROOT, ROOT_SECRET, new_data_dir

A, B = "111111111111", "222222222222"  # open mode: a 12-digit key acts as that account
HOST = "http://dmq.test"
ATTACKS = {
    "DeleteQueue": lambda sqs, url: sqs.delete_queue(QueueUrl=url),
    "PurgeQueue": lambda sqs, url: sqs.purge_queue(QueueUrl=url),
    "TagQueue": lambda sqs, url: sqs.tag_queue(QueueUrl=url, Tags={"owner": "attacker"}),
}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return new_data_dir(tmp_path)


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    """A data folder: usage is metered and flushed into it."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                    data_dir=str(data_dir))


def usage_rows(data_dir: Path) -> list[dict[str, Any]]:
    """Every usage record flushed so far."""
    meter = runtime.meter()
    assert meter is not None
    meter.flush()
    return [json.loads(line) for path in sorted((data_dir / "usage").rglob("*.json.gz"))
            for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


@pytest.fixture
def refused_calls(dmq: Client) -> Iterator[None]:
    """B has a queue; A tries every attack on it and on a name B does not have."""
    url = client(dmq, B, "s").create_queue(QueueName="b-queue")["QueueUrl"]
    attacker = client(dmq, A, "s")
    for target in (url, f"{HOST}/{B}/no-such-queue"):
        for attack in ATTACKS.values():
            with pytest.raises(ClientError):
                attack(attacker, target)
    yield


@pytest.mark.usefixtures("refused_calls")
def test_a_refused_call_on_anothers_queue_is_the_callers_usage(data_dir: Path) -> None:
    rows = usage_rows(data_dir)
    attacks = [r for r in rows if r["action"] in ATTACKS]
    assert attacks and all(r["account"] == A for r in attacks), attacks
    outcomes = {(r["action"], r["queue"], r["outcome"]) for r in attacks}
    for action in ATTACKS:
        assert (action, f"{B}/b-queue", "denied") in outcomes
        assert (action, f"{B}/no-such-queue", "QueueDoesNotExist") in outcomes
    b_usage = [r for r in rows if r["account"] == B]
    assert [(r["action"], r["outcome"]) for r in b_usage] == [("CreateQueue", "ok")]


def test_an_unauthenticated_call_is_in_nobodys_usage(dmq: Client, data_dir: Path) -> None:
    url = client(dmq, B, "s").create_queue(QueueName="b-queue")["QueueUrl"]
    runtime.configure(replace(runtime.settings, auth="required", root_access_key_id=ROOT,
                              root_secret_access_key=ROOT_SECRET), runtime.clock)
    with pytest.raises(ClientError) as refused:
        client(dmq, "AKIANOBODYNOBODYNOBO", "s").purge_queue(QueueUrl=url)
    assert refused.value.response["Error"]["Code"] == "InvalidClientTokenId"
    assert [r for r in usage_rows(data_dir) if r["action"] == "PurgeQueue"] == []


@pytest.mark.usefixtures("refused_calls")
def test_the_usage_report_bills_the_caller(spark: Any, data_dir: Path) -> None:
    from glue_jobs.common import io
    from glue_jobs.usage_report import transforms as t

    usage_rows(data_dir)
    per_account = {r["account"]: r["requests"] for r in
                   t.per_account(t.per_minute(io.read_usage(spark, str(data_dir)))).collect()}
    assert per_account == {A: 2 * len(ATTACKS), B: 1}
