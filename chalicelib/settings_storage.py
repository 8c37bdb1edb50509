"""The settings of DMQ's storage, read from the environment: the DynamoDB and S3 endpoints,
the tables and their streams, the bucket of large bodies, the data folder and the audit
archive, and the store budget (how long one store call may take)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chalicelib.settings import Settings

STORE_CLIENTS = ("lean", "botocore")


def storage_settings(env: Mapping[str, str], base: Settings, region: str) -> dict[str, Any]:
    """The storage fields of the settings; `base` gives the defaults. Unset, the stream
    ARNs are the local ones of the region's tables."""
    messages_table = env.get("DMQ_MESSAGES_TABLE", base.messages_table)
    queues_table = env.get("DMQ_QUEUES_TABLE", base.queues_table)
    return {
        "dynamodb_endpoint": env.get("DMQ_DYNAMODB_ENDPOINT") or None,
        "s3_endpoint": env.get("DMQ_S3_ENDPOINT") or None,
        "bodies_dir": env.get("DMQ_BODIES_DIR") or None,
        "queues_table": queues_table,
        "messages_table": messages_table,
        "bodies_bucket": env.get("DMQ_BODIES_BUCKET", base.bodies_bucket),
        "messages_stream_arn": env.get("DMQ_MESSAGES_STREAM_ARN",
                                       _local_stream_arn(region, messages_table)),
        "queues_stream_arn": env.get("DMQ_QUEUES_STREAM_ARN",
                                     _local_stream_arn(region, queues_table)),
        "inline_body_limit": int(env.get("DMQ_INLINE_BODY_LIMIT", base.inline_body_limit)),
        "control_table": env.get("DMQ_CONTROL_TABLE", base.control_table),
        "cluster_capacity": float(env.get("DMQ_CLUSTER_CAPACITY", base.cluster_capacity)),
        "data_dir": env.get("DMQ_DATA_DIR") or None,
        "archive_bucket": env.get("DMQ_ARCHIVE_BUCKET") or None,
        "store_connect_timeout_s": float(
            env.get("DMQ_STORE_CONNECT_TIMEOUT_S", base.store_connect_timeout_s)),
        "store_read_timeout_s": float(
            env.get("DMQ_STORE_READ_TIMEOUT_S", base.store_read_timeout_s)),
        "store_attempts": max(1, int(env.get("DMQ_STORE_ATTEMPTS", base.store_attempts))),
        "store_client": _store_client(env.get("DMQ_STORE_CLIENT", base.store_client)),
    }


def _store_client(value: str) -> str:
    """DMQ_STORE_CLIENT: "lean" or "botocore"; ValueError for anything else."""
    choice = value.strip().lower()
    if choice not in STORE_CLIENTS:
        raise ValueError(f"DMQ_STORE_CLIENT must be one of {', '.join(STORE_CLIENTS)}, "
                         f"not {value!r}")
    return choice


def _local_stream_arn(region: str, table: str) -> str:
    """The stream ARN a local store gives a table of the region."""
    return f"arn:aws:dynamodb:{region}:000000000000:table/{table}/stream/local"
