"""The benchmark's figures: acceptance checks, a Markdown block for the README, and JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.backlog import BacklogResult
from bench.shards import EMPTY_RECEIVES, ShardResult
from bench.throughput import ThroughputResult
from bench.timing import Latency

MAX_ITEMS_PER_RETURNED = 2.0
FLAT_RATIO = 1.5
FLAT_SLACK_MS = 2.0
SHARD_COST_SLACK = 1.10


@dataclass(frozen=True)
class Criteria:
    """The acceptance checks, with the figures they were judged on."""

    max_items_read_per_returned: float
    items_read_within_twice_returned: bool
    p50_smallest_backlog_ms: float
    p50_largest_backlog_ms: float
    latency_flat: bool
    requests_per_message_by_shards: dict[int, float]
    cost_flat_over_shards: bool


@dataclass(frozen=True)
class Figures:
    """Everything one benchmark run measured."""

    environment: dict[str, str]
    throughput: ThroughputResult
    backlog: list[BacklogResult]
    shards: list[ShardResult]
    failovers: list[dict[str, Any]]
    criteria: Criteria

    def to_json(self) -> dict[str, Any]:
        """Plain data for json.dump."""
        return asdict(self)


def judge(
    throughput: ThroughputResult, backlog: list[BacklogResult], shards: list[ShardResult],
) -> Criteria:
    """Receive reads at most about twice what it returns; latency does not grow with backlog.

    Latency is flat when the p50 at the largest backlog is within FLAT_RATIO (plus a
    little slack) of the p50 at the smallest backlog that returns messages: an empty
    queue makes no claims, so it is cheaper for reasons that have nothing to do with size.
    """
    ratios = [b.items_read_per_returned for b in backlog if b.items_read_per_returned is not None]
    ratios.append(throughput.items_read_per_returned)
    worst = max(ratios)
    loaded = [b for b in backlog if b.returned]
    low = loaded[0].latency.p50_ms if loaded else 0.0
    high = loaded[-1].latency.p50_ms if loaded else 0.0
    by_shards = {r.shards: r.throughput.dynamodb_requests_per_message for r in shards}
    return Criteria(
        max_items_read_per_returned=worst,
        items_read_within_twice_returned=worst <= MAX_ITEMS_PER_RETURNED,
        p50_smallest_backlog_ms=low,
        p50_largest_backlog_ms=high,
        latency_flat=high <= low * FLAT_RATIO + FLAT_SLACK_MS,
        requests_per_message_by_shards=by_shards,
        cost_flat_over_shards=not by_shards or (
            max(by_shards.values()) <= min(by_shards.values()) * SHARD_COST_SLACK),
    )


def _ms(latency: Latency) -> str:
    return f"{latency.p50_ms:.1f} / {latency.p99_ms:.1f}"


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def throughput_table(t: ThroughputResult) -> list[str]:
    """The throughput figures as Markdown."""
    rows = [
        f"**Throughput.** {t.messages:,} messages; {t.producers} producers "
        "(SendMessageBatch of 10), "
        f"{t.consumers} consumers (ReceiveMessage of up to 10 with WaitTimeSeconds=1, "
        "then DeleteMessageBatch).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| messages/s (sent, received and deleted) | {t.messages_per_s:,.1f} |",
        f"| delivered / sent | {t.delivered:,} / {t.sent:,} ({t.duplicates} duplicates, "
        f"{t.failed_sends + t.failed_deletes} failed entries, {t.sdk_retries} SDK retries) |",
        f"| SendMessageBatch p50 / p99 ms | {_ms(t.send_batch)} |",
        f"| ReceiveMessage p50 / p99 ms (non-empty) | {_ms(t.receive)} "
        f"({t.empty_receives} empty long polls) |",
        f"| DeleteMessageBatch p50 / p99 ms | {_ms(t.delete_batch)} |",
        f"| DynamoDB requests per message | {t.dynamodb_requests_per_message:.3f} |",
    ]
    rows += [f"| &nbsp;&nbsp;{op} per message | {n:.3f} |"
             for op, n in sorted(t.dynamodb_per_message.items())]
    rows += [
        f"| failed claims per receive | {t.failed_claims_per_receive:.3f} "
        f"({t.lost_claims} lost of {t.dmq_receives} receive passes) |",
        f"| items read per returned message | {t.items_read_per_returned:.3f} |",
    ]
    return rows


def backlog_table(backlog: list[BacklogResult]) -> list[str]:
    """The backlog figures as Markdown."""
    receives = backlog[0].receives if backlog else 0
    rows = [
        f"**Backlog.** {receives} receives of up to 10 (VisibilityTimeout=3600, "
        "WaitTimeSeconds=0) on a fresh queue preloaded with the backlog; after each receive "
        "as many messages are sent again, so the visible backlog stays the same.",
        "",
        "| backlog | returned per receive | receive p50 / p99 ms | items read per receive "
        "| items read per returned message | DynamoDB requests per receive "
        "| DynamoDB ms per receive (Query) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b in backlog:
        per_returned = (f"{b.items_read_per_returned:.2f}"
                        if b.items_read_per_returned is not None else "- (nothing returned)")
        rows.append(
            f"| {b.backlog:,} | {b.returned_per_receive:.1f} | {_ms(b.latency)} "
            f"| {b.items_read_per_receive:.1f} | {per_returned} "
            f"| {b.dynamodb_requests_per_receive:.1f} "
            f"| {b.store_ms_per_receive:.1f} ({b.query_ms_per_receive:.1f}) |"
        )
    return rows


def shards_table(shards: list[ShardResult]) -> list[str]:
    """The shard figures as Markdown."""
    if not shards:
        return []
    t = shards[0].throughput
    rows = [
        f"**Shards.** At each shard count, {t.messages:,} messages through {t.producers} "
        f"producers and {t.consumers} consumers as above; then {EMPTY_RECEIVES} receives "
        "(WaitTimeSeconds=0) in a row on an empty queue with that many shards.",
        "",
        "| shards | messages/s | DynamoDB requests per message | Query per message "
        "| failed claims per receive | first empty receive: DynamoDB requests "
        "| later empty receives: requests / ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in shards:
        t = r.throughput
        rows.append(
            f"| {r.shards} | {t.messages_per_s:.1f} | {t.dynamodb_requests_per_message:.3f} "
            f"| {t.dynamodb_per_message.get('Query', 0.0):.3f} "
            f"| {t.failed_claims_per_receive:.3f} | {r.first_empty_receive_requests} "
            f"| {r.empty_receive_requests:.2f} / {r.empty_receive_ms:.1f} |"
        )
    return rows


def failover_table(runs: list[dict[str, Any]]) -> list[str]:
    """The two-region figures as Markdown."""
    if not runs:
        return []
    rows = [
        f"**Regions.** `make failover-demo` in each mode: two regions in this process, "
        f"{runs[0]['acknowledged']:,} messages sent while two consumers run, the home killed "
        "half-way (heartbeats every 0.25 s, failover after 2 s of silence). Failover time "
        "runs from the home's last heartbeat to the first receive served by the new home; "
        "lag from the stream record's time to its apply time in the replica.",
        "",
        "| mode | acknowledged | delivered | lost (RPO) | failover s "
        "| replication lag p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        rows.append(
            f"| {r['mode']} | {r['acknowledged']} | {r['delivered']} | {r['lost']} "
            f"| {r['failover_seconds']:.2f} "
            f"| {r['replication_lag_p50_ms']:.0f} / {r['replication_lag_p99_ms']:.0f} |"
        )
    return rows


def markdown(figures: Figures) -> str:
    """The Markdown block for the README."""
    env, c = figures.environment, figures.criteria
    lines = [
        f"Measured with `make bench`: DMQ in one process with its {env['store']}, "
        f"Python {env['python']}, {env['cpus']} CPUs; boto3 over HTTP from the same process. "
        "DynamoDB requests and items read are counted on DMQ's messages-table client; the "
        "queue-metadata client (PynamoDB, cached) is not counted.",
        "",
        *throughput_table(figures.throughput),
        "",
        *backlog_table(figures.backlog),
        "",
        *shards_table(figures.shards),
        "",
        *failover_table(figures.failovers),
        "",
        f"- Receive reads at most about twice what it returns: "
        f"{_yes(c.items_read_within_twice_returned)} "
        f"(at most {c.max_items_read_per_returned:.2f} items read per returned message).",
        f"- Receive latency stays flat as the backlog grows: {_yes(c.latency_flat)} "
        f"(p50 {c.p50_smallest_backlog_ms:.1f} ms at the smallest backlog, "
        f"{c.p50_largest_backlog_ms:.1f} ms at the largest).",
    ]
    if c.requests_per_message_by_shards:
        lines.append(
            "- DynamoDB requests per message do not rise with the shard count: "
            f"{_yes(c.cost_flat_over_shards)} ("
            + ", ".join(f"{n} shards {v:.3f}"
                        for n, v in c.requests_per_message_by_shards.items()) + ")."
        )
    return "\n".join(lines)


def write_json(figures: Figures, path: Path) -> None:
    """Write the figures as JSON, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures.to_json(), indent=2) + "\n", encoding="utf-8")
