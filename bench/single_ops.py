"""Single-operation latency: SendMessage, ReceiveMessage (one message, no wait) and
DeleteMessage, one client, one call at a time, on a queue that holds about 100 messages."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bench.sqs import body, preload, sqs_client
from bench.timing import Latency, Recorder

SEND, RECEIVE, DELETE = "SendMessage", "ReceiveMessage", "DeleteMessage"


@dataclass(frozen=True)
class SingleOpsResult:
    """p50/p99 of each operation."""

    calls: int
    backlog: int
    send: Latency
    receive: Latency
    delete: Latency
    empty_receives: int


def run_single_ops(endpoint: str, calls: int, backlog: int = 100,
                   body_bytes: int = 256) -> SingleOpsResult:
    """Rounds of send one, receive one, delete it: the backlog stays where it was preloaded."""
    sqs = sqs_client(endpoint)
    url = sqs.create_queue(QueueName="dmq-bench-single")["QueueUrl"]
    preload(endpoint, url, backlog, body_bytes)
    recorder = Recorder()
    empty = 0
    for number in range(calls):
        with recorder.timed(SEND):
            sqs.send_message(QueueUrl=url, MessageBody=body(backlog + number, body_bytes))
        started = time.perf_counter()
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1,
                                       WaitTimeSeconds=0).get("Messages", [])
        recorder.add(RECEIVE, time.perf_counter() - started)
        if not messages:
            empty += 1
            continue
        with recorder.timed(DELETE):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
    sqs.delete_queue(QueueUrl=url)
    return SingleOpsResult(calls, backlog, recorder.summary(SEND), recorder.summary(RECEIVE),
                           recorder.summary(DELETE), empty)
