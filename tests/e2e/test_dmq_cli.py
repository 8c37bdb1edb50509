"""GIVEN the local server (`python -m dmqlocal`) WHEN the installed `dmq` executable runs
each subcommand against it THEN it prints a table for people and JSON with `--json`, and
every failure is one line on stderr with exit status 1 (service, connection) or 2 (usage),
never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, free_port

pytestmark = pytest.mark.e2e

DMQ = Path(sys.executable).parent / "dmq"
RUN_TIMEOUT_S = 60
ACCOUNT = "000000000000"


@dataclass
class Done:
    """One finished run of `dmq`."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Dmq = Callable[..., Done]


@pytest.fixture(scope="module")
def dmq(dmq_url: str) -> Dmq:
    """Run the `dmq` console script (what `pip install -e .` put next to this Python)
    against the shared server, found through DMQ_ENDPOINT as a user would set it."""
    if not DMQ.exists():
        pytest.fail(f"{DMQ} is missing: the venv step installs the project (make venv)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMQ_", "AWS_"))}
    env.update(DMQ_ENDPOINT=dmq_url, AWS_ACCESS_KEY_ID="cli-key",
               AWS_SECRET_ACCESS_KEY="cli-secret", AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)

    def run(*argv: str, **extra_env: str) -> Done:
        done = subprocess.run([str(DMQ), *argv], cwd=ROOT, env={**env, **extra_env},
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              check=False)
        assert "Traceback" not in done.stderr, done.stderr
        return Done(done.returncode, done.stdout, done.stderr)

    return run


def _one_error_line(done: Done, code: int, *words: str) -> None:
    assert done.code == code, done
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    for word in words:
        assert word in lines[0], lines[0]
    assert done.out == ""


def test_queues_create_list_describe_purge_delete(dmq: Dmq, unique_name: Any) -> None:
    name = unique_name("orders")
    created = dmq("queues", "create", name, "-a", "VisibilityTimeout=45", "-t", "team=ops")
    assert created.code == 0, created
    url = f"{ACCOUNT}/{name}"
    assert url in created.out and "QueueUrl" in created.out

    listed = dmq("queues", "list", "--prefix", name)
    assert listed.code == 0 and name in listed.out and "┃ name" in listed.out
    as_json = dmq("queues", "list", "--prefix", name, "--json").json()
    assert [u.rsplit("/", 1)[-1] for u in as_json["QueueUrls"]] == [name]
    everyone = dmq("--json", "queues", "list", "--all-accounts").json()
    assert f"{ACCOUNT}/{name}" in {q["queue_id"] for q in everyone["queues"]}

    described = dmq("--json", "queues", "describe", name).json()
    assert described["Attributes"]["VisibilityTimeout"] == "45"
    assert described["Tags"] == {"team": "ops"}
    table = dmq("queues", "describe", url)
    assert "VisibilityTimeout" in table.out and "tag:team" in table.out

    dmq("messages", "send", name, "to purge")
    purged = dmq("queues", "purge", name, "--json", "--yes")
    assert purged.code == 0 and purged.json()["purged"] is True
    deleted = dmq("queues", "delete", name, "-y", "--json")
    assert deleted.code == 0 and deleted.json()["deleted"] is True
    _one_error_line(dmq("queues", "describe", name), 1,
                    "AWS.SimpleQueueService.NonExistentQueue", "does not exist")


def test_a_fifo_name_makes_a_fifo_queue(dmq: Dmq, unique_name: Any) -> None:
    name = unique_name("f") + ".fifo"
    assert dmq("queues", "create", name, "-a", "ContentBasedDeduplication=true").code == 0
    sent = dmq("--json", "messages", "send", name, "one", "--group-id", "g1").json()
    assert sent["SequenceNumber"]
    _one_error_line(dmq("messages", "send", name, "two"), 1, "MissingParameter",
                    "MessageGroupId")


def test_messages_send_peek_receive(dmq: Dmq, unique_name: Any) -> None:
    name = unique_name("m")
    dmq("queues", "create", name)
    first = dmq("--json", "messages", "send", name, "first body", "-a", "kind=test",
                "-a", "n=Number:3").json()
    assert first["MessageId"] and first["MD5OfMessageAttributes"]
    assert "MessageId" in dmq("messages", "send", name, "second body", "--delay", "0").out

    peeked = dmq("messages", "peek", f"{ACCOUNT}/{name}", "--limit", "1")
    assert peeked.code == 0 and "first body" in peeked.out and "second" not in peeked.out
    data = dmq("--json", "messages", "peek", name).json()
    assert [m["body"] for m in data["messages"]] == ["first body", "second body"]
    assert all(m["receive_count"] == 0 for m in data["messages"])  # nothing was claimed

    received = dmq("--json", "messages", "receive", name, "--max", "1").json()
    assert [m["Body"] for m in received["Messages"]] == ["first body"]
    assert received["Messages"][0]["MessageAttributes"]["n"]["StringValue"] == "3"
    # Received with the default 30 s visibility: the next receive gets the second, deletes it.
    table = dmq("messages", "receive", name, "--max", "10", "--delete")
    assert "second body" in table.out and "first body" not in table.out
    counts = dmq("--json", "stats", name).json()["queues"][0]
    assert (counts["visible"], counts["in_flight"], counts["delayed"]) == (0, 1, 0)
    assert dmq("messages", "receive", name, "--wait", "0").out.strip() == "(no messages)"


def test_stats_tables_json_and_watch(dmq: Dmq, unique_name: Any) -> None:
    name = unique_name("s")
    dmq("queues", "create", name)
    dmq("messages", "send", name, "now")
    dmq("messages", "send", name, "later", "--delay", "60")
    table = dmq("stats", name)
    assert table.code == 0
    row = next(line for line in table.out.splitlines() if name in line)
    assert [c.strip() for c in row.strip("│ ").split("│")] == [name, "1", "0", "1"]
    watched = dmq("--json", "stats", name, "--watch", "0.2", "--times", "2")
    rounds = [json.loads(chunk) for chunk in watched.out.replace("}\n{", "}\x00{").split("\x00")]
    assert len(rounds) == 2 and all(r["queues"][0]["visible"] == 1 for r in rounds)


def test_dlq_redrive_shows_progress_and_moves_everything(dmq: Dmq, unique_name: Any,
                                                          sqs: Any) -> None:
    dlq, source = unique_name("dlq"), unique_name("src")
    dlq_url = dmq("--json", "queues", "create", dlq).json()["QueueUrl"]
    dlq_arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{dlq}"
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"})
    dmq("queues", "create", source, "-a", f"RedrivePolicy={policy}")
    sqs.send_message_batch(QueueUrl=dlq_url, Entries=[
        {"Id": str(i), "MessageBody": f"dead {i}"} for i in range(7)])

    done = dmq("dlq", "redrive", dlq, "--destination", source)
    assert done.code == 0, done
    assert "COMPLETED" in done.out and "redrive" in done.err and "7/7" in done.err
    counts = {r["queue"]: r["visible"] for r in dmq("--json", "stats", dlq, source).json()[
        "queues"]}
    assert counts == {dlq: 0, source: 7}

    tasks = dmq("--json", "dlq", "tasks", dlq).json()["Results"]
    assert tasks[0]["Status"] == "COMPLETED"
    assert tasks[0]["ApproximateNumberOfMessagesMoved"] == 7
    # A queue that is no DLQ of any queue cannot be redriven to its sources.
    _one_error_line(dmq("dlq", "redrive", source), 1, "InvalidParameterValue",
                    "Source queue must be configured as a Dead Letter Queue.")
    _one_error_line(dmq("dlq", "cancel", "not-a-handle"), 1, "InvalidParameterValue",
                    "Value for parameter TaskHandle is invalid.")


HOOK = "http://hooks.example.invalid/hook"  # never called: the queues stay empty


def test_subscriptions_create_list_delete(dmq: Dmq, unique_name: Any) -> None:
    name = unique_name("push")
    dmq("queues", "create", name)
    assert dmq("subscriptions", "list", name).out.strip() == "(no subscriptions)"

    created = dmq("--json", "subscriptions", "create", name, "--url", HOOK,
                  "--batch-size", "50", "--window", "2", "--report-batch-item-failures",
                  "--max-concurrency", "3").json()
    assert created["Endpoint"] == HOOK
    assert created["EventSourceArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"
    assert (created["BatchSize"], created["MaximumBatchingWindowInSeconds"]) == (50, 2)
    assert created["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert created["ScalingConfig"] == {"MaximumConcurrency": 3}
    assert created["State"] == "Enabled"
    # Options left out take the service's defaults (Lambda's: 10 messages, no window).
    table = dmq("subscriptions", "create", f"{ACCOUNT}/{name}", "--url",
                HOOK + "2", "--disabled")
    assert table.code == 0 and "subscription created" in table.out and "Disabled" in table.out
    listed = dmq("--json", "subscriptions", "list", name).json()
    assert listed["queue_id"] == f"{ACCOUNT}/{name}"
    second = next(s for s in listed["subscriptions"] if s["UUID"] != created["UUID"])
    assert (second["Endpoint"], second["BatchSize"], second["MaximumBatchingWindowInSeconds"],
            second["FunctionResponseTypes"], second["State"]) == (HOOK + "2", 10, 0, [],
                                                                   "Disabled")
    assert "ScalingConfig" not in second
    assert len(listed["subscriptions"]) == 2

    shown = dmq("subscriptions", "list", name)
    assert "┃ uuid" in shown.out and "max concurrency" in shown.out
    row = next(line for line in shown.out.splitlines() if created["UUID"] in line)
    assert [c.strip() for c in row.strip("│ ").split("│")][1:7] == [
        HOOK, "50", "2", "True", "3", "Enabled"]

    gone = dmq("--json", "subscriptions", "delete", name, created["UUID"], "--yes").json()
    assert gone["UUID"] == created["UUID"]
    deleted = dmq("subscriptions", "delete", name, second["UUID"], "--yes")
    assert deleted.code == 0 and "subscription deleted" in deleted.out
    assert dmq("subscriptions", "list", name).out.strip() == "(no subscriptions)"
    _one_error_line(dmq("subscriptions", "delete", name, created["UUID"], "-y"), 1,
                    "ResourceNotFoundException", "HTTP 404")


def test_subscription_errors_are_the_services_line(dmq: Dmq, unique_name: Any) -> None:
    name = unique_name("pushbad")
    dmq("queues", "create", name)
    _one_error_line(dmq("subscriptions", "create", name, "--url", HOOK,
                        "--batch-size", "0"), 1,
                    "InvalidParameterValue: 1 validation error detected: Value '0' at "
                    "'batchSize' failed to satisfy constraint: Member must have value greater "
                    "than or equal to 1", "HTTP 400")
    _one_error_line(dmq("subscriptions", "create", name, "--url", HOOK,
                        "--batch-size", "11"), 1, "InvalidParameterValue",
                    "Maximum batch window in seconds must be greater than 0 if maximum batch "
                    "size is greater than 10")
    _one_error_line(dmq("subscriptions", "create", name, "--function", "no-such-fn"), 1,
                    "ResourceNotFoundException: Function not found: no-such-fn", "HTTP 404")
    assert dmq("--json", "subscriptions", "list", name).json()["subscriptions"] == []
    # An unknown queue: by name SQS's GetQueueUrl says so, by <account>/<name> the admin API.
    missing = unique_name("nowhere")
    _one_error_line(dmq("subscriptions", "list", missing), 1,
                    "AWS.SimpleQueueService.NonExistentQueue")
    _one_error_line(dmq("subscriptions", "create", f"{ACCOUNT}/{missing}", "--url",
                        HOOK), 1, "QueueDoesNotExist", "HTTP 404")
    for argv in (["create", name], ["create", name, "--url", HOOK, "--function", "f"],
                 ["create", name, "--url", HOOK, "--batch-size", "ten"],
                 ["delete", name], ["list"]):
        _one_error_line(dmq("subscriptions", *argv), 2, "dmq subscriptions", "error:")


def test_regions_clusters_and_shards(dmq: Dmq, unique_name: Any) -> None:
    regions = dmq("--json", "regions", "status").json()
    assert [r["region"] for r in regions["regions"]] == ["us-east-1"]
    assert regions["regions"][0]["up"] is True
    assert "us-east-1" in dmq("regions", "status").out
    tick = dmq("--json", "regions", "tick", "us-east-1").json()
    assert tick["region"] == "us-east-1" and tick["promoted"] == []
    _one_error_line(dmq("regions", "failover", "mars-north-1", "--yes"), 1,
                    "InvalidParameterValue", "Unknown region mars-north-1", "HTTP 400")

    name = unique_name("sh")
    dmq("queues", "create", name)
    clusters = dmq("--json", "clusters", "list").json()["clusters"]
    default = next(c for c in clusters if c["cluster"] == "default")
    assert f"{ACCOUNT}/{name}" in default["queues"]
    assert "default" in dmq("clusters", "list").out
    _one_error_line(dmq("clusters", "capacity", "c9", "5"), 1, "InvalidParameterValue",
                    "DMQ_CLUSTERS")

    shown = dmq("--json", "shards", "show", name).json()
    assert (shown["shard_count"], shown["autoscale"]) == (1, "auto")
    assert "set by the autoscaler" in " ".join(dmq("shards", "show", name).out.split())
    scaled = dmq("shards", "set", name, "3")
    assert scaled.code == 0 and "3 active shard(s), pinned" in " ".join(scaled.out.split())
    shown = dmq("--json", "shards", "show", name).json()
    assert [s["state"] for s in shown["shards"]] == ["active"] * 3
    assert shown["autoscale"] == "pinned"
    assert dmq("--json", "shards", "unpin", name).json()["autoscale"] == "auto"
    assert dmq("--json", "shards", "pin", name).json()["autoscale"] == "pinned"
    _one_error_line(dmq("shards", "split", name), 1, "InvalidParameterValue", "DMQ_CLUSTERS")


def test_export_writes_the_tables_for_the_audit(dmq: Dmq, unique_name: Any) -> None:
    dmq("queues", "create", unique_name("e"))
    folders = dmq("--json", "export").json()["exports"]
    assert folders and all((Path(f) / "manifest-summary.json").is_file() for f in folders)
    assert any("/exports/" in f for f in folders)
    assert "export folder" in dmq("export").out


def test_the_audit_of_a_missing_folder_is_one_line(dmq: Dmq, tmp_path: Path) -> None:
    done = dmq("audit", "--data-dir", str(tmp_path / "nowhere"))
    _one_error_line(done, 2, "No DMQ data under")


def test_keys_create_rotate_and_revoke(dmq: Dmq) -> None:
    assert dmq("keys", "list").code == 0
    created = dmq("--json", "keys", "create", "111122223333", "--user", "cli-e2e").json()
    key_id = created["accessKeyId"]
    assert created["secretAccessKey"] and created["account"] == "111122223333"
    assert key_id in dmq("keys", "list", "--account", "111122223333").out
    rotated = dmq("--json", "keys", "rotate", key_id).json()
    assert rotated["accessKeyId"] != key_id and rotated["secretAccessKey"]
    assert rotated["account"] == "111122223333"
    assert dmq("keys", "revoke", key_id, "--yes").code == 0
    after = {k["accessKeyId"]: k for k in dmq("--json", "keys", "list").json()["keys"]}
    assert key_id not in after  # revoked: deleted, InvalidClientTokenId from then on
    assert after[rotated["accessKeyId"]]["status"] == created["status"] == "Active"


def test_usage_errors_are_one_line_with_status_2(dmq: Dmq) -> None:
    for argv in (["queues"], ["queues", "bogus"], ["messages", "peek", "q", "--limit", "0"],
                 ["messages", "peek", "q", "--limit", "abc"], ["shards", "set", "q", "65"],
                 ["messages", "receive", "q", "--max", "11"], ["clusters", "capacity", "c",
                                                                "nan"],
                 ["queues", "create", "q", "-a", "novalue"], ["stats", "--watch", "-1"]):
        done = dmq(*argv)
        _one_error_line(done, 2, "dmq", "error:")
    _one_error_line(dmq("queues", "describe", "http://127.0.0.1:1/"), 2, "not a queue URL")
    _one_error_line(dmq("queues", "list", "--profile", "no-such-profile"), 2,
                    "no-such-profile")


def test_nothing_listening_is_one_line_with_status_1(dmq: Dmq) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    _one_error_line(dmq("queues", "list", DMQ_ENDPOINT=endpoint), 1,
                    f"cannot reach DMQ at {endpoint}", "DMQ_ENDPOINT")
    _one_error_line(dmq("--endpoint", endpoint, "messages", "peek", f"{endpoint}/{ACCOUNT}/q"),
                    1, f"cannot reach DMQ at {endpoint}")
    assert time.monotonic() - started < 30
