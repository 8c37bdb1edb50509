"""`make chaos`: DMQ under injected DynamoDB faults loses no acknowledged message.

The real local server (`python -m dmqlocal`, DynamoDB Local, a fresh data folder) runs
with DMQ_CHAOS=0.05: 5% of its DynamoDB calls fail with a throttle, a timeout after the
write landed, or a claim's failed condition (see `dmqlocal.chaos`). Producers send
10,000 numbered messages and consumers receive and delete them, 8 threads each, over
HTTP. Then DMQ is stopped (its shutdown writes the table exports) and the Spark
lifecycle audit judges the run from the stream archive.

Printed: messages acknowledged, lost (acknowledged, never received: must be 0),
duplicates split into copies of one send (the send was retried after a write that
landed) and redeliveries of one message, each tied to the injected fault that touched
it, and the audit's own summary line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos_load import Tally, consume, produce
from bench.servers import ROOT, Server, start_dmq
from bench.sqs import sqs_client

VISIBILITY_S = 10
FAULTS_PATH = "/_dmq/chaos"


@dataclass
class ChaosResult:
    """A chaos run's figures."""

    messages: int
    acked: int
    lost: list[str]
    send_copies: Counter[str]  # cause -> extra copies of one send
    redeliveries: Counter[str]  # cause -> extra deliveries of one message
    faults: dict[str, int]
    calls: int
    seconds: float
    tally: Tally
    audit_line: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        """Deliveries beyond one per acknowledged body."""
        return sum(self.send_copies.values()) + sum(self.redeliveries.values())


def _faults(endpoint: str) -> dict[str, Any]:
    with urllib.request.urlopen(endpoint + FAULTS_PATH, timeout=30) as response:
        found: dict[str, Any] = json.loads(response.read())
        return found


def _cause(labels: list[str]) -> str:
    """The fault named for a duplicate: a lost answer first, else the first fault."""
    lost = [label for label in labels if label.endswith("timeout-after-write")]
    return (lost or labels or ["no injected fault touched it"])[0]


def explain(tally: Tally, touched: dict[str, list[str]]) -> tuple[Counter[str], Counter[str]]:
    """Extra copies of a send, and redeliveries of a message, counted by their cause."""
    copies: Counter[str] = Counter()
    redeliveries: Counter[str] = Counter()
    for ids in tally.bodies.values():
        if len(ids) > 1:
            labels = [label for i in sorted(ids) for label in touched.get(i, [])]
            copies[_cause(labels)] += len(ids) - 1
    for message_id, count in tally.deliveries.items():
        if count > 1:
            cause = ("its delete kept failing" if message_id in tally.undeleted
                     else _cause(touched.get(message_id, [])))
            redeliveries[cause] += count - 1
    return copies, redeliveries


def _progress(tally: Tally, started: float) -> None:
    with tally.lock:
        acked, delivered = len(tally.acked), sum(tally.deliveries.values())
    print(f"  {time.monotonic() - started:5.0f} s: {acked} acknowledged, {delivered} delivered",
          flush=True)


def _wait_drained(tally: Tally, producers: list[threading.Thread], quiet_s: float,
                  started: float, deadline: float) -> None:
    """Until the producers are done, every acknowledged body arrived, and nothing more
    came for `quiet_s`."""
    shown = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if time.monotonic() - shown >= 10:
            _progress(tally, started)
            shown = time.monotonic()
        if any(p.is_alive() for p in producers) or tally.missing():
            continue
        with tally.lock:
            idle = time.monotonic() - tally.last_delivery
        if idle >= quiet_s:
            return


def drive(endpoint: str, messages: int, producers: int, consumers: int,
          visibility_s: int, timeout_s: float) -> tuple[Tally, float]:
    """Run the producers and consumers against a queue; return what they saw."""
    sqs = sqs_client(endpoint, attempts=10)
    url = sqs.create_queue(QueueName="chaos",
                           Attributes={"VisibilityTimeout": str(visibility_s)})["QueueUrl"]
    tally, stop = Tally(), threading.Event()
    started = time.monotonic()
    shares = [messages // producers + (1 if p < messages % producers else 0)
              for p in range(producers)]
    senders = [threading.Thread(target=produce, args=(endpoint, url, p, n, tally),
                                name=f"chaos-producer-{p}") for p, n in enumerate(shares)]
    receivers = [threading.Thread(target=consume, args=(endpoint, url, tally, stop),
                                  name=f"chaos-consumer-{c}") for c in range(consumers)]
    for thread in senders + receivers:
        thread.start()
    _wait_drained(tally, senders, visibility_s + 3, started, started + timeout_s)
    for thread in senders:
        thread.join()
    stop.set()
    for thread in receivers:
        thread.join()
    return tally, time.monotonic() - started


def run(messages: int, producers: int, consumers: int, data_dir: Path, rate: float,
        seed: int | None, visibility_s: int = VISIBILITY_S,
        timeout_s: float = 900.0) -> ChaosResult:
    """Start DMQ with faults, drive it, stop it; the figures (no audit yet)."""
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {"DMQ_CHAOS": str(rate), "DMQ_EXPORT_INTERVAL_S": "3600"}
    if seed is not None:
        env["DMQ_CHAOS_SEED"] = str(seed)
    server: Server = start_dmq(data_dir, extra_env=env)
    try:
        server.wait_answering()
        tally, seconds = drive(server.url, messages, producers, consumers, visibility_s,
                               timeout_s)
        faults = _faults(server.url)
    finally:
        code = server.stop()
    copies, redeliveries = explain(tally, faults["messages"])
    lost = sorted(set(tally.acked) - set(tally.bodies))
    result = ChaosResult(messages, len(tally.acked), lost, copies, redeliveries,
                         faults["injected"], int(faults["calls"]), seconds, tally)
    if code != 0:
        result.notes.append(f"DMQ exited with {code}")
    return result


def audit(data_dir: Path) -> tuple[int, str]:
    """The Spark lifecycle audit over the run's archive: exit status and summary line."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-m", "dmqlocal.admin", "audit", "--data-dir", str(data_dir),
         "--job", "lifecycle_audit"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    lines = done.stdout.strip().splitlines()
    return done.returncode, (lines[-1] if lines else done.stderr.strip()[-500:])


def report(result: ChaosResult) -> list[str]:
    """The run in a few lines."""
    tally = result.tally
    deliveries = sum(tally.deliveries.values())
    lines = [
        f"{result.acked} of {result.messages} messages acknowledged in "
        f"{result.seconds:.0f} s ({tally.given_up} sends given up), {deliveries} deliveries",
        f"faults injected: {sum(result.faults.values())} of {result.calls} DynamoDB calls",
        *(f"    {name}: {n}" for name, n in result.faults.items()),
        f"SQS calls that failed after the SDK's retries (retried by the client): "
        f"{dict(tally.call_errors) or 0}",
        f"lost={len(result.lost)} duplicates={result.duplicates}",
        f"  copies of one send (the send was retried after its write landed): "
        f"{sum(result.send_copies.values())}",
        *(f"    {cause}: {n}" for cause, n in result.send_copies.most_common()),
        f"  redeliveries of one message: {sum(result.redeliveries.values())}",
        *(f"    {cause}: {n}" for cause, n in result.redeliveries.most_common()),
    ]
    if result.lost:
        lines.append(f"LOST: {', '.join(result.lost[:20])}")
    if result.audit_line:
        lines.append(f"lifecycle audit: {result.audit_line}")
    return lines + result.notes


def main(argv: list[str] | None = None) -> int:
    """`make chaos`; exit 1 if an acknowledged message was lost (by the clients or the
    audit)."""
    parser = argparse.ArgumentParser(description="DMQ under injected DynamoDB faults.")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--rate", type=float, default=0.05, help="fraction of calls failed")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".dmq-chaos")
    parser.add_argument("--no-audit", action="store_true", help="skip the Spark audit")
    args = parser.parse_args(argv)
    print(f"chaos: {args.messages} messages, {args.producers} producers, {args.consumers} "
          f"consumers, {args.rate:.0%} of DynamoDB calls failed, data in {args.data_dir}",
          flush=True)
    result = run(args.messages, args.producers, args.consumers, args.data_dir, args.rate,
                 args.seed)
    audit_code = 0
    if not args.no_audit:
        print("running the Spark lifecycle audit ...", flush=True)
        audit_code, result.audit_line = audit(args.data_dir)
    print("\n".join(report(result)))
    return 1 if result.lost or audit_code else 0


if __name__ == "__main__":
    raise SystemExit(main())
