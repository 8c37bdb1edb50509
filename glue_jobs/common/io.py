"""Readers for the audit inputs under one root (a folder, or an `s3://bucket/prefix` URI).

- `archive/`: stream records (gzip JSON lines, any depth);
- `usage/`: usage records;
- `exports/<table>/<region>/AWSDynamoDB/<export id>/`: table exports in DynamoDB's
  format; only the newest complete one (with `manifest-summary.json`) of each table
  and region is read, whatever the epoch (lifetime of the store) it shows: it is what
  the table holds now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from glue_jobs.common.schemas import EXPORT_LINE, EXPORT_SUMMARY, STREAM_RECORD, USAGE


def _read_json(spark: SparkSession, schema: StructType, path: str) -> DataFrame:
    """Every JSON-lines file under `path`; an empty frame when there is none."""
    try:
        return spark.read.schema(schema).option("recursiveFileLookup", "true").json(path)
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return spark.createDataFrame([], schema)
        raise


def read_records(spark: SparkSession, root: str) -> DataFrame:
    """The archived stream records, as archived (duplicates included)."""
    return _read_json(spark, STREAM_RECORD, f"{root.rstrip('/')}/archive")


def read_usage(spark: SparkSession, root: str) -> DataFrame:
    """The usage records of every flush."""
    return _read_json(spark, USAGE, f"{root.rstrip('/')}/usage")


@dataclass(frozen=True)
class ExportInfo:
    """One complete table export."""

    table: str
    region: str
    source: str  # the table's stream ARN ("" in DynamoDB's own exports)
    export_ms: int
    folder: str  # the export's own folder (`<export prefix>/AWSDynamoDB/<export id>`)
    table_arn: str = ""
    epoch: str = ""  # the store's epoch ("" in DynamoDB's own exports)


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def latest_exports(spark: SparkSession, root: str) -> list[ExportInfo]:
    """The newest complete export of each table in each region."""
    pattern = f"{root.rstrip('/')}/exports/*/*/AWSDynamoDB/*/manifest-summary.json"
    try:
        rows = spark.read.schema(EXPORT_SUMMARY).option("multiLine", "true").json(pattern) \
            .withColumn("_file", F.input_file_name()).collect()
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return []
        raise
    newest: dict[tuple[str, str], ExportInfo] = {}
    for row in rows:
        info = _export_info(row)
        key = (info.table, info.region)
        if key not in newest or newest[key].export_ms < info.export_ms:
            newest[key] = info
    return sorted(newest.values(), key=lambda e: (e.table, e.region))


def _export_info(row: Row) -> ExportInfo:
    table_arn = str(row["tableArn"] or "")
    # DMQ's local exports name their region; DynamoDB's own (on AWS) do not, and the
    # region is then the table ARN's (arn:aws:dynamodb:<region>:...).
    parts = table_arn.split(":")
    region = row["dmqRegion"] or (parts[3] if len(parts) > 3 else "")
    return ExportInfo(table_arn.rsplit("table/", 1)[-1], region, row["dmqStreamArn"] or "",
                      _ms(row["exportTime"]), str(row["_file"]).rsplit("/", 1)[0], table_arn,
                      row["dmqEpoch"] or "")


def read_export_items(spark: SparkSession, exports: list[ExportInfo]) -> DataFrame:
    """The items of the given exports: source, region, table, export_ms and the item."""
    frames = [
        _read_json(spark, EXPORT_LINE, f"{e.folder}/data").select(
            F.lit(e.source).alias("source"), F.lit(e.region).alias("region"),
            F.lit(e.table).alias("table"), F.lit(e.export_ms).cast("long").alias("export_ms"),
            F.col("Item").alias("item"),
        )
        for e in exports
    ]
    if not frames:
        empty = (StructType().add("source", "string").add("region", "string")
                 .add("table", "string").add("export_ms", "long")
                 .add("item", EXPORT_LINE["Item"].dataType))
        return spark.createDataFrame([], empty)
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
