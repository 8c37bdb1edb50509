"""The benchmark's figures: one row per figure with its target, a Markdown block, and JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.attributes import AttributesResult
from bench.backlog import BacklogResult
from bench.floor import FloorResult
from bench.shards import EMPTY_RECEIVES, ShardResult
from bench.single_ops import SingleOpsResult
from bench.throughput import ThroughputResult

LIFECYCLE_RATIO = 10.0
SINGLE_OP_RATIO = 0.5
RECEIVE_FLAT = 1.2
ATTRIBUTES_FLAT = 1.5
REQUESTS_PER_MESSAGE = 1.3
RSS_MIB = 1024.0
WARM_START_S = 10.0


@dataclass(frozen=True)
class Row:
    """One figure for moto and DMQ, the ratio DMQ/moto (or DMQ/DMQ baseline) and its check."""

    figure: str
    moto: float | None
    dmq: float | None
    ratio: float | None
    target: str
    passed: bool | None  # None: shown for information, no target


@dataclass(frozen=True)
class Figures:
    """Everything one benchmark run measured."""

    environment: dict[str, str]
    lifecycle: dict[str, ThroughputResult]
    single_ops: dict[str, SingleOpsResult]
    backlog: list[BacklogResult]
    attributes: list[AttributesResult]
    rss_mib: float
    warm_start_s: float
    shards: list[ShardResult]
    rows: list[Row]
    floor: FloorResult | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data for json.dump."""
        return asdict(self)

    def row(self, figure_prefix: str) -> Row:
        """The first row whose figure starts with `figure_prefix`."""
        return next(r for r in self.rows if r.figure.startswith(figure_prefix))


def _ratio(top: float | None, bottom: float | None) -> float | None:
    if top is None or bottom is None or bottom <= 0:
        return None
    return round(top / bottom, 2)


def _compared(figure: str, moto: float, dmq: float, most: float | None = None,
              least: float | None = None) -> Row:
    """A DMQ/moto row: PASS when the ratio is at least `least` or at most `most`."""
    ratio = _ratio(dmq, moto)
    if least is not None:
        return Row(figure, moto, dmq, ratio, f">= {least:g}x moto",
                   ratio is not None and ratio >= least)
    if most is not None:
        return Row(figure, moto, dmq, ratio, f"<= {most:g}x moto",
                   ratio is not None and ratio <= most)
    return Row(figure, moto, dmq, ratio, "-", None)


def _flat(name: str, pairs: list[tuple[int, float]], most: float) -> list[Row]:
    """DMQ at the smallest and the largest backlog; the ratio is largest/smallest."""
    if len(pairs) < 2:
        return []
    (low, low_ms), (high, high_ms) = pairs[0], pairs[-1]
    ratio = _ratio(high_ms, low_ms)
    return [
        Row(f"{name} p50 ms, backlog {low:,}", None, low_ms, None, "baseline", None),
        Row(f"{name} p50 ms, backlog {high:,}", None, high_ms, ratio,
            f"<= {most:g}x backlog {low:,}", ratio is not None and ratio <= most),
    ]


def _lifecycle_rows(lifecycle: dict[str, ThroughputResult]) -> list[Row]:
    moto, dmq = lifecycle["moto"], lifecycle["dmq"]
    rows = [_compared("lifecycle messages/s (sent+received+deleted)", moto.messages_per_s,
                      dmq.messages_per_s, least=LIFECYCLE_RATIO)]
    total = dmq.dynamodb_requests_per_message
    rows.append(Row("DynamoDB requests per message (lifecycle)", None, total, None,
                    f"<= {REQUESTS_PER_MESSAGE:g}", total <= REQUESTS_PER_MESSAGE))
    rows += [Row(f"&nbsp;&nbsp;{op} per message", None, n, None, "-", None)
             for op, n in sorted(dmq.dynamodb_per_message.items())]
    return rows


def _single_rows(single: dict[str, SingleOpsResult]) -> list[Row]:
    moto, dmq = single["moto"], single["dmq"]
    rows = []
    for name in ("send", "receive", "delete"):
        m, d = getattr(moto, name), getattr(dmq, name)
        label = {"send": "SendMessage", "receive": "ReceiveMessage(1)",
                 "delete": "DeleteMessage"}[name]
        rows.append(_compared(f"{label} p50 ms", m.p50_ms, d.p50_ms, most=SINGLE_OP_RATIO))
        rows.append(_compared(f"{label} p99 ms", m.p99_ms, d.p99_ms))
    return rows


def build_rows(lifecycle: dict[str, ThroughputResult], single: dict[str, SingleOpsResult],
               backlog: list[BacklogResult], attributes: list[AttributesResult],
               rss_mib: float, warm_start_s: float) -> list[Row]:
    """Every figure with its target."""
    rows = _lifecycle_rows(lifecycle) + _single_rows(single)
    rows += _flat("ReceiveMessage(10)", [(b.backlog, b.latency.p50_ms) for b in backlog],
                  RECEIVE_FLAT)
    rows += _flat("GetQueueAttributes(All)",
                  [(a.backlog, a.latency.p50_ms) for a in attributes], ATTRIBUTES_FLAT)
    held = attributes[-1].backlog if attributes else 0
    rows.append(Row(f"RSS MiB, DMQ + DynamoDB Local, {held:,} messages held", None, rss_mib,
                    None, f"<= {RSS_MIB:g}", rss_mib <= RSS_MIB))
    rows.append(Row("warm start s (spawn to first ListQueues)", None, warm_start_s, None,
                    f"<= {WARM_START_S:g}", warm_start_s <= WARM_START_S))
    return rows


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def _verdict(passed: bool | None) -> str:
    return "-" if passed is None else ("PASS" if passed else "**FAIL**")


def figures_table(rows: list[Row]) -> list[str]:
    """The main table."""
    lines = ["| figure | moto | DMQ | ratio | target | PASS/FAIL |",
             "|---|---:|---:|---:|---|---|"]
    lines += [f"| {r.figure} | {_cell(r.moto)} | {_cell(r.dmq)} | "
              f"{'-' if r.ratio is None else f'{r.ratio:g}x'} | {r.target} "
              f"| {_verdict(r.passed)} |" for r in rows]
    return lines


def details(figures: Figures) -> list[str]:
    """How each figure was taken, with the counts behind it."""
    lines = [f"- Restart: {figures.environment.get('restart', '-')}."]
    for name, t in figures.lifecycle.items():
        lines.append(
            f"- Lifecycle, {name}: {t.messages:,} messages, {t.producers} producers, "
            f"{t.consumers} consumers, {t.seconds:.1f} s; delivered {t.delivered:,} of "
            f"{t.sent:,} sent ({t.duplicates} duplicates, {t.errors} errors, "
            f"{t.sdk_retries} SDK retries); batch p50 ms send {t.send_batch.p50_ms:.1f}, "
            f"receive {t.receive.p50_ms:.1f}, delete {t.delete_batch.p50_ms:.1f}.")
    for a in figures.attributes:
        lines.append(f"- Preload of {a.preloaded:,} messages (8 threads, batches of 10): "
                     f"{a.preload_seconds:.1f} s ({a.preload_messages_per_s:,.0f} messages/s), "
                     "then "
                     f"{a.settle_seconds:.0f} s until the server was idle; "
                     f"{a.latency.count} GetQueueAttributes calls, ApproximateNumberOfMessages "
                     f"{a.visible_reported:,}.")
    for b in figures.backlog:
        lines.append(f"- Receive at backlog {b.backlog:,}: {b.receives} receives of 10 "
                     "(VisibilityTimeout=3600, refilled) once the server was idle after the "
                     f"preload ({b.settle_seconds:.0f} s), "
                     f"{b.returned_per_receive:.1f} "
                     f"returned each, p99 {b.latency.p99_ms:.1f} ms, "
                     f"{b.dynamodb_requests_per_receive:.1f} DynamoDB requests and "
                     f"{b.items_read_per_receive:.1f} items read per receive.")
    return lines


def shards_table(shards: list[ShardResult]) -> list[str]:
    """The shard-count figures of DMQ (subprocess, default store)."""
    if not shards:
        return []
    t = shards[0].throughput
    rows = [
        f"**Shards (DMQ).** {t.messages:,} messages at each shard count, {t.producers} "
        f"producers and {t.consumers} consumers; then {EMPTY_RECEIVES} receives in a row on "
        "an empty queue with that many shards.",
        "",
        "| shards | messages/s | DynamoDB requests per message | first empty receive: "
        "requests | later empty receives: requests / ms |",
        "|---:|---:|---:|---:|---:|",
    ]
    rows += [f"| {r.shards} | {r.throughput.messages_per_s:.1f} "
             f"| {r.throughput.dynamodb_requests_per_message:.3f} "
             f"| {r.first_empty_receive_requests} "
             f"| {r.empty_receive_requests:.2f} / {r.empty_receive_ms:.1f} |" for r in shards]
    return rows


# DMQ's batched lifecycle against the floor's, and a single call against the store's own
# calls behind it (issue #33's targets).
FLOOR_SHARE = 0.85
STORE_RATIO = 2.0


def floor_lines(figures: Figures) -> list[str]:
    """DynamoDB Local alone, set against what the moto-relative targets need."""
    floor = figures.floor
    if floor is None:
        return []
    cpus = int(figures.environment.get("cpus", "1"))
    moto = figures.lifecycle["moto"].messages_per_s
    needed = LIFECYCLE_RATIO * moto
    budget = cpus * 1000 / needed if needed else 0.0
    spent = floor.store_cpu_ms_per_message + floor.client_cpu_ms_per_message
    single = figures.single_ops["moto"]
    lines = [
        f"**The store's floor.** DynamoDB Local alone, with DMQ's tables and nothing of DMQ "
        f"in between (`bench/floor.py`): {floor.messages:,} messages sent, claimed "
        f"and deleted in batches of ten by 4 producer and 4 consumer threads took "
        f"{floor.seconds:.1f} s, **{floor.messages_per_s:,.1f} messages/s**; DynamoDB Local "
        f"spent {floor.store_cpu_ms_per_message:.2f} ms of CPU per message and the boto3 "
        f"calls {floor.client_cpu_ms_per_message:.2f} ms. {LIFECYCLE_RATIO:g}x moto is "
        f"{needed:,.0f} messages/s, which leaves {budget:.2f} ms of CPU per message on "
        f"{cpus} CPUs for the store, DMQ and the SQS clients together: the store's own "
        f"calls take {spent:.2f} ms of it"
        + (" (more than all of it)." if spent >= budget else "."),
        "",
    ]
    dmq = figures.lifecycle.get("dmq")
    if dmq is not None and floor.messages_per_s:
        share = dmq.messages_per_s / floor.messages_per_s
        lines += ["", f"DMQ's batched lifecycle against the floor, in the same run: "
                      f"{dmq.messages_per_s:,.1f} / {floor.messages_per_s:,.1f} messages/s = "
                      f"**{share:.2f}** (target >= {FLOOR_SHARE:g}: "
                      f"{'PASS' if share >= FLOOR_SHARE else 'FAIL'})."]
    ours = figures.single_ops.get("dmq")
    lines += [
        "",
        "| one call's store work alone | p50 ms | p99 ms | "
        f"{SINGLE_OP_RATIO:g}x moto's p50 | DMQ's whole call p50 ms | DMQ / store "
        f"(target <= {STORE_RATIO:g}x) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, latency, whole, mine in (
        ("SendMessage: conditional PutItem", floor.send, single.send,
         ours.send if ours else None),
        ("ReceiveMessage(1): Query + claim UpdateItem", floor.receive, single.receive,
         ours.receive if ours else None),
        ("DeleteMessage: conditional DeleteItem", floor.delete, single.delete,
         ours.delete if ours else None),
    ):
        versus = (f"{mine.p50_ms:.2f} | {mine.p50_ms / latency.p50_ms:.2f}x "
                  f"({'PASS' if mine.p50_ms <= STORE_RATIO * latency.p50_ms else 'FAIL'})"
                  if mine is not None and latency.p50_ms else "- | -")
        lines.append(f"| {label} | {latency.p50_ms:.2f} | {latency.p99_ms:.2f} "
                     f"| {SINGLE_OP_RATIO * whole.p50_ms:.2f} | {versus} |")
    return lines


def markdown(figures: Figures) -> str:
    """The Markdown block."""
    env = figures.environment
    lines = [
        f"Measured with `{env['command']}` on {env['cpus']} CPUs (a shared machine: figures "
        f"move with its load, {env['load']} at the start), Python {env['python']}: moto's "
        "SQS server and DMQ on its default store (DynamoDB Local), each a subprocess on "
        "loopback, driven over HTTP by boto3. DynamoDB requests are counted inside DMQ on "
        "its store clients (PynamoDB's metadata reads and the stream pump are not counted).",
        "",
        *figures_table(figures.rows),
        "",
        *details(figures),
        "",
        *shards_table(figures.shards),
        "",
        *floor_lines(figures),
    ]
    return "\n".join(lines).rstrip()


def write_outputs(figures: Figures, json_path: Path) -> Path:
    """Write the JSON and, beside it, the Markdown (bench.md); return the Markdown path."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(figures.to_json(), indent=2) + "\n", encoding="utf-8")
    md_path = json_path.with_suffix(".md")
    md_path.write_text(markdown(figures) + "\n", encoding="utf-8")
    return md_path
