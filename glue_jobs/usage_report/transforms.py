"""Pure transforms of usage records (one row per account, queue, action and minute and flush)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

TOTALS = ["requests", "bytes", "billing_units"]


def _sum(frame: DataFrame, keys: list[str]) -> DataFrame:
    return frame.groupBy(*keys).agg(*[F.sum(c).cast("long").alias(c) for c in TOTALS])


def per_minute(usage: DataFrame) -> DataFrame:
    """One row per account, queue, action and minute (flushes of one minute added up)."""
    return _sum(usage, ["account", "queue", "action", "minute"])


def per_queue(usage: DataFrame) -> DataFrame:
    """Totals per account and queue."""
    return _sum(usage, ["account", "queue"]).orderBy("account", "queue")


def per_account(usage: DataFrame) -> DataFrame:
    """Totals per account."""
    return _sum(usage, ["account"]).orderBy("account")


def per_action(usage: DataFrame) -> DataFrame:
    """Totals per account, queue and action."""
    return _sum(usage, ["account", "queue", "action"]).orderBy("account", "queue", "action")


def top_talkers(usage: DataFrame, n: int = 5) -> DataFrame:
    """Per hour, the `n` queues with the most requests (ties by billing units, then name)."""
    hourly = _sum(usage.withColumn("hour", F.substring("minute", 1, 13)),
                  ["hour", "account", "queue"])
    rank = F.row_number().over(
        Window.partitionBy("hour").orderBy(F.desc("requests"), F.desc("billing_units"),
                                           "account", "queue"))
    return hourly.withColumn("rank", rank).where(F.col("rank") <= n) \
        .select("hour", "rank", "account", "queue", *TOTALS).orderBy("hour", "rank")


def per_hour(usage: DataFrame) -> DataFrame:
    """Totals per hour, for the throughput plot."""
    return _sum(usage.withColumn("hour", F.substring("minute", 1, 13)), ["hour"]).orderBy("hour")
