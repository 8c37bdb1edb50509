"""Queue attributes: names, defaults, ranges and validation, as SQS documents them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from chalicelib.clusters.shards import MAX_SHARDS
from chalicelib.domain.policy import PolicyError, check_policy
from chalicelib.domain.queues import parse_queue_arn
from chalicelib.service.exceptions import (
    InvalidAttributeNameError,
    InvalidAttributeValueError,
    InvalidParameterValueError,
)
from chalicelib.service.text import utf8_length

MAX_MESSAGE_SIZE = 1_048_576
# Text attributes' sizes in bytes: SQS's policy quota, and a KMS key id's length (the queue
# record must also stay within DynamoDB's 400 KB item).
TEXT_LIMITS: dict[str, int] = {
    "Policy": 8192, "RedrivePolicy": 8192, "RedriveAllowPolicy": 8192, "KmsMasterKeyId": 2048,
}
_INTEGER = re.compile(r"-?[0-9]+")

INT_RANGES: dict[str, tuple[int, int]] = {
    "DelaySeconds": (0, 900),
    "MaximumMessageSize": (1024, MAX_MESSAGE_SIZE),
    "MessageRetentionPeriod": (60, 1_209_600),
    "ReceiveMessageWaitTimeSeconds": (0, 20),
    "VisibilityTimeout": (0, 43_200),
    "KmsDataKeyReusePeriodSeconds": (60, 86_400),
}

DEFAULTS: dict[str, str] = {
    "DelaySeconds": "0",
    "MaximumMessageSize": str(MAX_MESSAGE_SIZE),
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "VisibilityTimeout": "30",
    "SqsManagedSseEnabled": "true",
}
DEFAULT_DATA_KEY_REUSE = "300"

FIFO_ONLY = frozenset(
    {"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"}
)
FIFO_DEFAULTS: dict[str, str] = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
FIFO_CHOICES = {
    "DeduplicationScope": ("queue", "messageGroup"),
    "FifoThroughputLimit": ("perQueue", "perMessageGroupId"),
}
SETTABLE = frozenset(
    {
        *INT_RANGES,
        "Policy",
        "RedrivePolicy",
        "RedriveAllowPolicy",
        "KmsMasterKeyId",
        "SqsManagedSseEnabled",
    }
)
COMPUTED = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
)
# DMQ's own attributes. SDKs pass attribute names they do not know through unchanged, so
# `Attributes={"DmqShardCount": "4"}` works from boto3 and the AWS CLI. `All` leaves them
# out, so that SQS code sees only SQS attributes; ask for them by name.
SHARD_COUNT = "DmqShardCount"
REPLICA_REGIONS = "DmqReplicaRegions"
REPLICATION_MODE = "DmqReplicationMode"
# The cluster a new queue is placed on (instead of the ring's choice); fixed once created.
CLUSTER = "DmqCluster"
EXTENSIONS_SETTABLE = frozenset({SHARD_COUNT, REPLICA_REGIONS, REPLICATION_MODE, CLUSTER})
EXTENSIONS_READABLE = frozenset({*EXTENSIONS_SETTABLE, "DmqShards", "DmqHomeRegion"})
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")
READABLE = frozenset({*SETTABLE, *COMPUTED, *EXTENSIONS_READABLE, "All"})


def _invalid(name: str, reason: str = "") -> InvalidAttributeValueError:
    suffix = f" Reason: {reason}" if reason else ""
    return InvalidAttributeValueError(f"Invalid value for the parameter {name}.{suffix}")


def _check_int(name: str, value: str) -> str:
    low, high = INT_RANGES[name]
    text = value.strip()
    if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
        raise _invalid(name)  # SQS gives no reason for a value out of its range
    return str(int(text))


def _check_bool(name: str, value: str) -> str:
    if value.lower() not in ("true", "false"):
        raise _invalid(name, "Must be true or false.")
    return value.lower()


def _load_json_object(name: str, value: str) -> dict[str, object]:
    try:
        data = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise _invalid(name, "Must be a valid JSON document.") from exc
    if not isinstance(data, dict):
        raise _invalid(name, "Must be a JSON object.")
    return data


def _check_policy(name: str, value: str) -> str:
    """An access policy: JSON with a Version SQS knows and well-formed statements."""
    if value:
        document = _load_json_object(name, value)
        try:
            check_policy(document)
        except PolicyError as exc:
            raise _invalid(name, str(exc)) from exc
    return value


def redrive_invalid(value: str, reason: str) -> InvalidParameterValueError:
    """A RedrivePolicy SQS refuses, quoted as it was sent."""
    return InvalidParameterValueError(
        f"Value {value} for parameter RedrivePolicy is invalid. Reason: {reason}")


def _check_redrive_policy(name: str, value: str) -> str:
    if not value:
        return value
    data = _load_json_object(name, value)
    for field in ("maxReceiveCount", "deadLetterTargetArn"):
        if field not in data:
            raise redrive_invalid(
                value, f"Redrive policy does not contain mandatory attribute: {field}.")
    count = data["maxReceiveCount"]
    valid = not isinstance(count, bool) and _INTEGER.fullmatch(str(count)) is not None
    if not valid or not 1 <= int(str(count)) <= 1000:
        raise redrive_invalid(value, f"Invalid value for maxReceiveCount: {count}, valid "
                              "values are from 1 to 1000 both inclusive.")
    target = data["deadLetterTargetArn"]
    if not isinstance(target, str) or parse_queue_arn(target) is None:
        raise redrive_invalid(value, "Invalid value for deadLetterTargetArn.")
    extra = set(data) - {"deadLetterTargetArn", "maxReceiveCount"}
    if extra:
        raise redrive_invalid(value, f"Unknown field {sorted(extra)[0]}.")
    return json.dumps(
        {"deadLetterTargetArn": target, "maxReceiveCount": int(str(count))},
        separators=(",", ":"),
    )


def _check_redrive_allow_policy(name: str, value: str) -> str:
    if not value:
        return value
    data = _load_json_object(name, value)
    permission = data.get("redrivePermission")
    arns = data.get("sourceQueueArns")
    if permission not in ("allowAll", "denyAll", "byQueue"):
        raise _invalid(name, "redrivePermission must be allowAll, denyAll or byQueue.")
    if permission == "byQueue":
        valid = isinstance(arns, list) and all(
            isinstance(a, str) and parse_queue_arn(a) for a in arns
        )
        if not valid or not 1 <= len(arns) <= 10:  # type: ignore[arg-type]
            raise _invalid(name, "byQueue needs 1 to 10 sourceQueueArns.")
    elif arns is not None:
        raise _invalid(name, "sourceQueueArns is only allowed with byQueue.")
    return json.dumps(data, separators=(",", ":"))


def _check_text(name: str, value: str) -> str:
    return value


def _check_shard_count(name: str, value: str) -> str:
    text = value.strip()
    if not _INTEGER.fullmatch(text) or not 1 <= int(text) <= MAX_SHARDS:
        raise _invalid(name, f"Must be an integer from 1 to {MAX_SHARDS}.")
    return str(int(text))


def _check_regions(name: str, value: str) -> str:
    regions = [r.strip() for r in value.split(",") if r.strip()]
    if not all(_REGION.fullmatch(r) for r in regions) or len(set(regions)) != len(regions):
        raise _invalid(name, "Must be a comma-separated list of distinct region names.")
    return ",".join(regions)


def _check_cluster(name: str, value: str) -> str:
    if not value.strip():
        raise _invalid(name, "Must be the name of a cluster.")
    return value.strip()


def check_cluster_kept(given: Mapping[str, str], cluster: str) -> None:
    """SetQueueAttributes may repeat a queue's DmqCluster, not change it: its messages
    would stay behind in the old cluster's table."""
    if given.get(CLUSTER, cluster) != cluster:
        raise _invalid(CLUSTER, "A queue's cluster is chosen when it is created; spread it "
                       "onto another cluster with a split (dmq shards split).")


def _check_mode(name: str, value: str) -> str:
    if value not in ("async", "sync"):
        raise _invalid(name, "Must be async or sync.")
    return value


CHECKS: dict[str, Callable[[str, str], str]] = {
    **{name: _check_int for name in INT_RANGES},
    "SqsManagedSseEnabled": _check_bool,
    "Policy": _check_policy,
    "RedrivePolicy": _check_redrive_policy,
    "RedriveAllowPolicy": _check_redrive_allow_policy,
    "KmsMasterKeyId": _check_text,
    SHARD_COUNT: _check_shard_count,
    REPLICA_REGIONS: _check_regions,
    REPLICATION_MODE: _check_mode,
    CLUSTER: _check_cluster,
}


def check_settable(name: str, value: str) -> str:
    """One SQS or DMQ attribute a client sets (not a FIFO-only one), normalised."""
    if name not in SETTABLE and name not in EXTENSIONS_SETTABLE:
        raise InvalidAttributeNameError(f"Unknown Attribute {name}.")
    limit = TEXT_LIMITS.get(name)
    if limit is not None and utf8_length(value) > limit:
        raise _invalid(name, f"Must be at most {limit} bytes.")
    return CHECKS[name](name, value)


def check_fifo_attribute(name: str, value: str) -> str:
    """A FIFO-only attribute set on a FIFO queue, normalised."""
    if name == "FifoQueue":
        if value.lower() != "true":
            raise _invalid(name, "Modifying queue type is not supported.")
        return "true"
    if name == "ContentBasedDeduplication":
        return _check_bool(name, value)
    if value not in FIFO_CHOICES[name]:
        raise _invalid(name, f"Must be {' or '.join(FIFO_CHOICES[name])}.")
    return value


def check_fifo_combination(attributes: Mapping[str, str]) -> None:
    """High throughput (perMessageGroupId) needs DeduplicationScope=messageGroup."""
    if (attributes.get("FifoThroughputLimit") == "perMessageGroupId"
            and attributes.get("DeduplicationScope") != "messageGroup"):
        raise _invalid("FifoThroughputLimit", "You can specify perMessageGroupId only when "
                       "DeduplicationScope is messageGroup.")


SSE_CONFLICT = ("You can use one type of server-side encryption (SSE) at one time. You can "
                "either enable KMS SSE or SQS SSE.")


def check_sse(given: Mapping[str, str]) -> None:
    """SSE-SQS and SSE-KMS exclude each other: one request cannot ask for both."""
    if given.get("SqsManagedSseEnabled") == "true" and given.get("KmsMasterKeyId"):
        raise InvalidAttributeNameError(SSE_CONFLICT)


def with_sse(merged: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The queue's attributes after `given`, with SSE made consistent as SQS keeps it:
    naming a KMS key turns SSE-SQS off, turning SSE-SQS on drops the KMS key, and a queue
    with a KMS key shows KmsDataKeyReusePeriodSeconds (default 300)."""
    result = dict(merged)
    if given.get("KmsMasterKeyId"):
        result["SqsManagedSseEnabled"] = "false"
    elif given.get("SqsManagedSseEnabled") == "true":
        result.pop("KmsMasterKeyId", None)
    if result.get("KmsMasterKeyId"):
        result.setdefault("KmsDataKeyReusePeriodSeconds", DEFAULT_DATA_KEY_REUSE)
    return result


def stripped(attributes: Mapping[str, str]) -> dict[str, str]:
    """The attributes a client sets, named without surrounding whitespace (SQS reads
    " DelaySeconds" as DelaySeconds)."""
    return {str(name).strip(): value for name, value in attributes.items()}


def asks_fifo(attributes: Mapping[str, str]) -> bool:
    """Whether CreateQueue's attributes ask for a FIFO queue."""
    return str(stripped(attributes).get("FifoQueue", "")).lower() == "true"

