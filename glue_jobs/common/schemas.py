"""Explicit schemas for what the jobs read: no inference, the same on Spark 3.5 and 4."""

from __future__ import annotations

from pyspark.sql.types import (
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

# A DynamoDB JSON attribute value. DMQ's message items use only S and N.
VALUE = StructType([StructField("S", StringType()), StructField("N", StringType())])
IMAGE = MapType(StringType(), VALUE)

STREAM_RECORD = StructType([
    StructField("dmqEpoch", StringType()),  # DMQ's: the store's epoch (absent before epochs)
    StructField("awsRegion", StringType()),
    StructField("eventID", StringType()),
    StructField("eventName", StringType()),
    StructField("eventSourceARN", StringType()),
    StructField("dynamodb", StructType([
        StructField("ApproximateCreationDateTime", DoubleType()),
        StructField("SequenceNumber", StringType()),
        StructField("Keys", IMAGE),
        StructField("NewImage", IMAGE),
        StructField("OldImage", IMAGE),
    ])),
])

EXPORT_LINE = StructType([StructField("Item", IMAGE)])

# A line of an incremental export: the item's key, its images and the write time (µs).
INCREMENT_LINE = StructType([
    StructField("Metadata", StructType([
        StructField("WriteTime", StructType([StructField("N", StringType())])),
    ])),
    StructField("Keys", IMAGE),
    StructField("NewImage", IMAGE),
    StructField("OldImage", IMAGE),
])

MANIFEST_LINE = StructType([StructField("dataFileS3Key", StringType())])

EXPORT_SUMMARY = StructType([
    StructField("exportArn", StringType()),
    StructField("exportType", StringType()),  # FULL_EXPORT (or absent) or INCREMENTAL_EXPORT
    StructField("exportTime", StringType()),
    StructField("exportFromTime", StringType()),
    StructField("exportToTime", StringType()),
    StructField("tableArn", StringType()),
    StructField("s3Prefix", StringType()),
    StructField("itemCount", LongType()),
    StructField("dmqRegion", StringType()),
    StructField("dmqStreamArn", StringType()),
    StructField("dmqEpoch", StringType()),
])

USAGE = StructType([
    StructField("account", StringType()),
    StructField("queue", StringType()),
    StructField("action", StringType()),
    StructField("minute", StringType()),
    StructField("requests", LongType()),
    StructField("bytes", LongType()),
    StructField("billing_units", LongType()),
])

# The normalised lifecycle event every lifecycle transform takes (see events.py).
EVENT = StructType([
    StructField("epoch", StringType()),
    StructField("source", StringType()),
    StructField("table", StringType()),
    StructField("region", StringType()),
    StructField("seq", StringType()),
    StructField("event_type", StringType()),
    StructField("at_ms", LongType()),
    StructField("queue_id", StringType()),
    StructField("pk", StringType()),
    StructField("message_id", StringType()),
    StructField("sent_ms", LongType()),
    StructField("expires_ms", LongType()),
    StructField("old_rc", LongType()),
    StructField("new_rc", LongType()),
    StructField("old_visible_at", LongType()),
    StructField("group_id", StringType()),
    StructField("group_seq", StringType()),
    StructField("rseq", StringType()),
])
