"""Readers for the audit inputs under one root (a folder, or an `s3://bucket/prefix` URI).

- `archive/`: stream records (gzip JSON lines, any depth);
- `usage/`: usage records;
- `exports/<table>/<region>/AWSDynamoDB/<export id>/`: table exports in DynamoDB's
  format, full and incremental; of each table and region, the newest complete full
  export (with `manifest-summary.json`) is read, whatever the epoch (lifetime of the
  store) it shows, with the incremental exports that follow it applied (`chains`):
  together they are what the table holds now.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from glue_jobs.common.chains import ExportChain, ExportInfo, chains, export_info
from glue_jobs.common.increments import apply_changes
from glue_jobs.common.schemas import (
    EXPORT_LINE,
    EXPORT_SUMMARY,
    INCREMENT_LINE,
    MANIFEST_LINE,
    STREAM_RECORD,
    USAGE,
)

__all__ = ["ExportChain", "ExportInfo", "export_chains", "latest_exports", "read_chain_items",
           "read_changes", "read_export_items", "read_records", "read_summaries", "read_usage"]


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


def read_summaries(spark: SparkSession, root: str) -> list[ExportInfo]:
    """Every complete export (one with `manifest-summary.json`), full or incremental."""
    pattern = f"{root.rstrip('/')}/exports/*/*/AWSDynamoDB/*/manifest-summary.json"
    try:
        rows = spark.read.schema(EXPORT_SUMMARY).option("multiLine", "true").json(pattern) \
            .withColumn("_file", F.input_file_name()).collect()
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return []
        raise
    return [export_info(row.asDict(), str(row["_file"]).rsplit("/", 1)[0]) for row in rows]


def export_chains(spark: SparkSession, root: str) -> list[ExportChain]:
    """The newest full export of each table in each region, whatever the epoch (lifetime
    of the store) it shows, with the incremental exports that follow it."""
    return chains(read_summaries(spark, root))


def latest_exports(spark: SparkSession, root: str) -> list[ExportInfo]:
    """The newest complete full export of each table in each region."""
    return [chain.full for chain in export_chains(spark, root)]


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


def _data_file(folder: str, key: str) -> str:
    """Where a data file named in an export's manifest is, from the export's folder: the
    key is the object's whole key in the bucket, and the part after `AWSDynamoDB/` is
    the same under any root the audit reads the exports from."""
    return f"{folder.rsplit('/', 1)[0]}/{key.rsplit('AWSDynamoDB/', 1)[-1]}"


def _increment_files(spark: SparkSession,
                     increments: list[ExportInfo]) -> list[tuple[str, ExportInfo]]:
    """(data file, export) of each data file of the incremental exports, from their
    `manifest-files.json` (DynamoDB may keep an incremental export's data apart from its
    manifests)."""
    by_id = {e.export_id: e for e in increments}
    rows = spark.read.schema(MANIFEST_LINE).json([f"{e.folder}/manifest-files.json"
                                                  for e in increments]) \
        .withColumn("_file", F.input_file_name()).collect()
    found = []
    for row in rows:
        export = by_id.get(str(row["_file"]).rsplit("/", 2)[-2])
        if export is not None and row["dataFileS3Key"]:
            found.append((_data_file(export.folder, str(row["dataFileS3Key"])), export))
    return found


CHANGES = ("table string, region string, position long, write_us long, "
           "keys map<string, struct<S: string, N: string>>, "
           "new_image map<string, struct<S: string, N: string>>, "
           "old_image map<string, struct<S: string, N: string>>")


def read_changes(spark: SparkSession, export_chains: list[ExportChain]) -> DataFrame:
    """The lines of the chains' incremental exports (`increments.apply_changes` input)."""
    positions = {e.export_id: i for c in export_chains for i, e in enumerate(c.increments)}
    increments = [e for c in export_chains for e in c.increments]
    files = _increment_files(spark, increments) if increments else []
    if not files:
        return spark.createDataFrame([], CHANGES)
    # Data files have unique names (DynamoDB's and DMQ's alike): the name finds the export.
    names = spark.createDataFrame(
        [(path.rsplit("/", 1)[-1], e.table, e.region, positions[e.export_id])
         for path, e in files], "_name string, table string, region string, position long")
    lines = spark.read.schema(INCREMENT_LINE).json([path for path, _ in files]) \
        .withColumn("_name", F.regexp_extract(F.input_file_name(), r"([^/]+)$", 1))
    return lines.join(F.broadcast(names), "_name").select(
        "table", "region", "position",
        F.col("Metadata.WriteTime.N").cast("long").alias("write_us"),
        F.col("Keys").alias("keys"), F.col("NewImage").alias("new_image"),
        F.col("OldImage").alias("old_image"))


def read_chain_items(spark: SparkSession, export_chains: list[ExportChain]) -> DataFrame:
    """What the chains end with: source, region, table, export_ms (the chain's end), item,
    `live` (the table holds it) and `changed` (an incremental export changed it; a
    deleted item keeps its last image)."""
    fulls = read_export_items(spark, [c.full for c in export_chains])
    applied = apply_changes(fulls, read_changes(spark, export_chains))
    ends = spark.createDataFrame(
        [(c.table, c.region, c.full.source, c.end_ms) for c in export_chains],
        "table string, region string, source string, export_ms long")
    return applied.join(F.broadcast(ends), ["table", "region"]).select(
        "source", "region", "table", "export_ms", "item", "live", "changed")
