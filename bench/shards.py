"""Shards: throughput and DynamoDB cost per message at 1, 2, 4 and 8 shards, and the cost of
receiving from an empty queue with many shards."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bench.counting import Counter
from bench.sqs import sqs_client
from bench.throughput import ThroughputConfig, ThroughputResult, run_throughput

EMPTY_RECEIVES = 50


@dataclass(frozen=True)
class ShardsConfig:
    """The size of the shard runs."""

    shard_counts: tuple[int, ...]
    messages: int
    producers: int
    consumers: int
    body_bytes: int = 256


@dataclass(frozen=True)
class ShardResult:
    """One shard count's figures."""

    shards: int
    throughput: ThroughputResult
    first_empty_receive_requests: int
    empty_receive_requests: float
    empty_receive_ms: float


def empty_receive_cost(endpoint: str, counter: Counter,
                       shards: int) -> tuple[int, float, float]:
    """DynamoDB requests of the first empty receive, then the mean over a run of them."""
    sqs = sqs_client(endpoint)
    url = sqs.create_queue(QueueName=f"dmq-bench-empty-{shards}",
                           Attributes={"DmqShardCount": str(shards)})["QueueUrl"]
    before = counter.snapshot()
    sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    first = (counter.snapshot() - before).total_calls
    before = counter.snapshot()
    started = time.perf_counter()
    for _ in range(EMPTY_RECEIVES):
        sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    elapsed = time.perf_counter() - started
    mean = (counter.snapshot() - before).total_calls / EMPTY_RECEIVES
    sqs.delete_queue(QueueUrl=url)
    return first, round(mean, 2), round(elapsed / EMPTY_RECEIVES * 1000, 1)


def run_shards(endpoint: str, counter: Counter, config: ShardsConfig) -> list[ShardResult]:
    """A throughput run and an empty-receive run at each shard count."""
    results = []
    for shards in config.shard_counts:
        throughput = run_throughput(endpoint, counter, ThroughputConfig(
            messages=config.messages, producers=config.producers, consumers=config.consumers,
            body_bytes=config.body_bytes, shards=shards,
            queue_name=f"dmq-bench-shards-{shards}",
        ))
        first, mean, ms = empty_receive_cost(endpoint, counter, shards)
        results.append(ShardResult(shards, throughput, first, mean, ms))
    return results
