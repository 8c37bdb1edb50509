"""Clients of a DynamoDB Local started by a test (its fixed local credentials), and the
median of a timed call, for the tests of DMQ's shim inside DynamoDB Local."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import boto3

from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY


def dynamodb_client(endpoint: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)


def streams_client(endpoint: str) -> Any:
    return boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)


def median_ms(call: Callable[[], Any], times: int = 40, warm_up: int = 5) -> float:
    """The median milliseconds of `call`, run `times` times, the first `warm_up` left out."""
    took = []
    for _ in range(times):
        began = time.perf_counter()
        call()
        took.append((time.perf_counter() - began) * 1000)
    return statistics.median(took[warm_up:])
