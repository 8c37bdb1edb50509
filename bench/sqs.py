"""The benchmark's SQS client and the helpers that fill queues."""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.config import Config
from botocore.credentials import Credentials

from chalicelib.dynamo_client import LeanDynamoDB

BATCH = 10
KEY = SECRET = "dmq-bench"  # the benchmark's credentials (a local server accepts any)


def sqs_client(endpoint: str, connections: int = 2, read_timeout: float = 300,
               attempts: int = 3) -> Any:
    """A boto3 SQS client over HTTP, with a connection for every thread that shares it."""
    return boto3.session.Session().client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        config=Config(
            max_pool_connections=max(10, connections),
            retries={"mode": "standard", "max_attempts": attempts},
            connect_timeout=5,
            read_timeout=read_timeout,
        ),
    )


# The SQS calls the lean client sends itself (SQS's JSON protocol), those the single-call
# latency times; any other goes to boto3.
LEAN_SQS_CALLS = {"send_message": "SendMessage", "receive_message": "ReceiveMessage",
                  "delete_message": "DeleteMessage"}


def lean_sqs_client(endpoint: str, read_timeout: float = 300, connections: int = 2,
                    calls: dict[str, str] | None = None) -> Any:
    """An SQS client for plain-HTTP endpoints through the lean client DMQ's store calls
    go through (chalicelib/dynamo_client.py): DMQ's calls timed with it are set against
    store calls timed with the same client, so neither carries botocore's client time.
    It sends `calls` (LEAN_SQS_CALLS unless given) itself, signed, in SQS's JSON
    protocol, and keeps up to `connections` connections for the threads that share it."""
    client = sqs_client(endpoint, connections, read_timeout=read_timeout, attempts=1)
    return LeanDynamoDB(client, endpoint, Credentials(KEY, SECRET),
                        5.0, read_timeout, connections,
                        calls=LEAN_SQS_CALLS if calls is None else calls)


def body(number: int, size: int) -> str:
    """A message body of `size` characters that names its message."""
    head = f"dmq-bench-{number:08d}-"
    return (head + "x" * size)[:max(size, len(head))]


def entries(first: int, count: int, size: int) -> list[dict[str, str]]:
    """SendMessageBatch entries for messages `first` .. `first + count - 1`."""
    return [{"Id": str(n), "MessageBody": body(first + n, size)} for n in range(count)]


def retries_of(response: dict[str, Any]) -> int:
    """How many times the SDK retried the call that gave `response`."""
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


def preload(endpoint: str, queue_url: str, messages: int, size: int, threads: int = 8) -> int:
    """Send `messages` messages in batches of ten from a few threads (a client each); return
    how many were sent."""
    lock = threading.Lock()
    state = {"next": 0, "sent": 0}

    def work() -> None:
        sqs = sqs_client(endpoint)
        while True:
            with lock:
                first = state["next"]
                if first >= messages:
                    return
                state["next"] = first + BATCH
            count = min(BATCH, messages - first)
            result = sqs.send_message_batch(QueueUrl=queue_url,
                                            Entries=entries(first, count, size))
            with lock:
                state["sent"] += len(result.get("Successful", []))

    workers = [threading.Thread(target=work, name=f"bench-preload-{n}") for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return state["sent"]
