"""`make failover-demo [MODE=async]`: lose a queue's home region under load, in one process.

1. DMQ starts with two regions, us-east-1 (home) and eu-west-1 (replica).
2. A replicated queue is created in the chosen mode; producers send N messages while
   consumers receive and delete. Clients talk to the eu-west-1 endpoint, which forwards
   to the home until the home is lost, then serves the queue itself.
3. Half-way through, the home region is killed; the replica's manager promotes it once
   the home's heartbeats have been silent for the failover time.
4. The rest is sent and received through the new home.

The last line reads `mode=<m> acknowledged=N delivered=D lost=L failover_seconds=S`,
where S runs from the home's last heartbeat to the first receive served by the new home.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field, replace
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.settings import Settings
from dmqlocal.runner import LocalDmq, LocalOptions

HOME, REPLICA = "us-east-1", "eu-west-1"
QUEUE = "failover-demo"
TICK_S = 0.25
FAILOVER_AFTER_S = 2.0
MINUTE_S = 60.0
# Messages received in the old home but not yet deleted there come back in the new home
# after their visibility timeout; the consumers wait longer than that before they stop.
VISIBILITY_S = 2
QUIET_S = VISIBILITY_S + 3.0


@dataclass
class _Tally:
    acked: set[str] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    first_receive_at_new_home: float | None = None
    sending_done: threading.Event = field(default_factory=threading.Event)


def _client(url: str, region: str) -> Any:
    return boto3.client(
        "sqs", endpoint_url=url, region_name=region, aws_access_key_id="demo",
        aws_secret_access_key="demo",
        config=Config(retries={"mode": "standard", "max_attempts": 2}, read_timeout=10),
    )


def _admin(url: str, path: str, method: str = "POST") -> Any:
    data = b"{}" if method == "POST" else b""
    signed = AWSRequest(method=method, url=url + path, data=data,
                        headers={"Content-Type": "application/json"})
    # The admin API needs an admin credential: the demo key acts as the account's root.
    SigV4Auth(Credentials("demo", "demo"), "execute-api", "us-east-1").add_auth(signed)
    request = urllib.request.Request(url + path, method=method, data=data or None,
                                     headers=dict(signed.headers.items()))
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _produce(sqs: Any, url: str, first: int, count: int, tally: _Tally, deadline: float) -> None:
    batch = first
    while batch < first + count and time.monotonic() < deadline:
        size = min(10, first + count - batch)
        try:
            result = sqs.send_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "MessageBody": f"demo-{batch + i}"} for i in range(size)])
        except (BotoCoreError, ClientError):
            time.sleep(0.1)  # the home is gone and no replica is promoted yet: retry
            continue
        with tally.lock:
            tally.acked |= {e["MessageId"] for e in result.get("Successful", [])}
        batch += size


def _consume(sqs: Any, url: str, tally: _Tally, promoted: threading.Event,
             deadline: float) -> None:
    """Receive and delete until everything acknowledged is in, or the queue stays empty
    for QUIET_S after the last send (what is still missing then is lost)."""
    last_seen = time.monotonic()
    while time.monotonic() < deadline:
        try:
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", [])
        except (BotoCoreError, ClientError):
            time.sleep(0.1)
            continue
        if messages and promoted.is_set():
            with tally.lock:
                if tally.first_receive_at_new_home is None:
                    tally.first_receive_at_new_home = time.time()
        if messages:
            last_seen = time.monotonic()
            try:
                sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)])
            except (BotoCoreError, ClientError):
                continue  # not deleted: the message comes back and is received again
            with tally.lock:
                tally.delivered |= {m["MessageId"] for m in messages}
        with tally.lock:
            done = tally.sending_done.is_set() and (
                tally.acked <= tally.delivered or time.monotonic() - last_seen > QUIET_S)
        if done:
            return


def run(mode: str, messages: int, timeout_s: float) -> dict[str, Any]:
    """Run the scenario; return its figures."""
    data_dir = tempfile.mkdtemp(prefix="dmq-failover-demo-")  # never the user's data
    settings = replace(Settings.from_env(), region=HOME, regions=(HOME, REPLICA),
                       failover_after_s=FAILOVER_AFTER_S, dynamodb_endpoint=None,
                       s3_endpoint=None, data_dir=data_dir)
    import app as dmq_app

    local = LocalDmq(dmq_app.app, dmq_app.runtime, LocalOptions(
        host="127.0.0.1", port=0, settings=settings, pump_interval_s=0.05,
        schedule_scale=TICK_S / MINUTE_S))
    endpoint = local.start()
    tally, promoted = _Tally(), threading.Event()
    deadline = time.monotonic() + timeout_s
    try:
        home, away = _client(endpoint, HOME), _client(endpoint, REPLICA)
        url = home.create_queue(QueueName=QUEUE, Attributes={
            "DmqReplicaRegions": REPLICA, "DmqReplicationMode": mode,
            "VisibilityTimeout": str(VISIBILITY_S)})["QueueUrl"]
        time.sleep(0.5)  # the queue record reaches the replica region
        consumers = [threading.Thread(target=_consume, args=(away, url, tally, promoted,
                                                             deadline)) for _ in range(2)]
        for thread in consumers:
            thread.start()
        _produce(away, url, 0, messages // 2, tally, deadline)
        beat = dmq_app.runtime.backend(REPLICA).control.last_beat(HOME) or 0
        _admin(endpoint, f"/admin/regions/{HOME}/down")
        killed_at = time.time()
        last_beat = max(beat, dmq_app.runtime.backend(REPLICA).control.last_beat(HOME) or 0)
        while time.monotonic() < deadline:
            attributes = away.get_queue_attributes(QueueUrl=url, AttributeNames=[
                "DmqHomeRegion"]) if _reachable(away, url) else {}
            if attributes.get("Attributes", {}).get("DmqHomeRegion") == REPLICA:
                promoted.set()
                break
            time.sleep(0.05)
        _produce(away, url, messages // 2, messages - messages // 2, tally, deadline)
        tally.sending_done.set()
        for thread in consumers:
            thread.join(timeout=max(1.0, deadline - time.monotonic()))
        lag = dmq_app.runtime.lag.summary().get(REPLICA, {})
    finally:
        local.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    first = tally.first_receive_at_new_home
    failover_s = (first - last_beat / 1000) if first and last_beat else float("nan")
    return {"mode": mode, "acknowledged": len(tally.acked),
            "delivered": len(tally.delivered & tally.acked),
            "lost": len(tally.acked - tally.delivered),
            "failover_seconds": round(failover_s, 2),
            "killed_after_last_beat_s": round(killed_at - last_beat / 1000, 2),
            "replication_lag_p50_ms": lag.get("p50_ms", float("nan")),
            "replication_lag_p99_ms": lag.get("p99_ms", float("nan"))}


def _reachable(sqs: Any, url: str) -> bool:
    try:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqHomeRegion"])
    except (BotoCoreError, ClientError):
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the demo and print its figures; the last line is the summary."""
    parser = argparse.ArgumentParser(prog="make failover-demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    print(f"two regions ({HOME} home, {REPLICA} replica), {args.mode} replication, "
          f"{args.messages} messages; the home is killed half-way", flush=True)
    result = run(args.mode, args.messages, args.timeout)
    print(f"home killed {result['killed_after_last_beat_s']} s after its last heartbeat; "
          f"failover time is the last heartbeat to the first receive in {REPLICA}", flush=True)
    print(f"mode={result['mode']} acknowledged={result['acknowledged']} "
          f"delivered={result['delivered']} lost={result['lost']} "
          f"failover_seconds={result['failover_seconds']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
