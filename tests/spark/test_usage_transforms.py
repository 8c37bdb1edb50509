"""GIVEN usage records from several flushes WHEN the usage report adds them up THEN the
totals per account and queue and the top talkers per hour are exact."""

from __future__ import annotations

from typing import Any

from pyspark.testing import assertDataFrameEqual

from glue_jobs.common.schemas import USAGE
from glue_jobs.usage_report import transforms as t
from tests.spark.events import rows


def _usage(spark: Any) -> Any:
    return spark.createDataFrame([
        # the same minute in two flushes
        ("111", "111/a", "SendMessage", "2026-01-01T10:00", 3, 300, 3),
        ("111", "111/a", "SendMessage", "2026-01-01T10:00", 2, 200_000, 4),
        ("111", "111/a", "ReceiveMessage", "2026-01-01T10:01", 5, 0, 5),
        ("111", "111/b", "SendMessage", "2026-01-01T10:30", 7, 70, 7),
        ("222", "222/c", "SendMessage", "2026-01-01T11:05", 1, 10, 1),
    ], USAGE)


def test_totals_per_queue_and_account(spark: Any) -> None:
    usage = _usage(spark)
    assertDataFrameEqual(t.per_queue(usage), rows(
        {"account": "111", "queue": "111/a", "requests": 10, "bytes": 200_300,
         "billing_units": 12},
        {"account": "111", "queue": "111/b", "requests": 7, "bytes": 70, "billing_units": 7},
        {"account": "222", "queue": "222/c", "requests": 1, "bytes": 10, "billing_units": 1},
    ))
    assertDataFrameEqual(t.per_account(usage), rows(
        {"account": "111", "requests": 17, "bytes": 200_370, "billing_units": 19},
        {"account": "222", "requests": 1, "bytes": 10, "billing_units": 1},
    ))


def test_top_talkers_per_hour(spark: Any) -> None:
    top = t.top_talkers(_usage(spark), n=1)
    assertDataFrameEqual(top.select("hour", "rank", "queue", "requests"), rows(
        {"hour": "2026-01-01T10", "rank": 1, "queue": "111/a", "requests": 10},
        {"hour": "2026-01-01T11", "rank": 1, "queue": "222/c", "requests": 1},
    ))


def test_flushes_of_two_server_runs_add_up_and_never_merge(spark: Any) -> None:
    # GIVEN two runs of the server (two epochs of the store) each flushed the same counts
    # for the same minute: each flush is its own object, read as its own rows
    row = ("111", "111/a", "SendMessage", "2026-01-01T10:00", 3, 300, 3)
    usage = spark.createDataFrame([row, row], USAGE)
    # THEN the minute holds both runs' requests
    assertDataFrameEqual(t.per_minute(usage).select("requests", "bytes", "billing_units"),
                         rows({"requests": 6, "bytes": 600, "billing_units": 6}))
