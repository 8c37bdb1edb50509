"""GIVEN an attacker who knows the receipt key DMQ once shipped in its source and the id of
a message it sent WHEN it forges a receipt handle THEN DMQ refuses it: no key is written in
the source any more; without DMQ_RECEIPT_KEY a random key is made once, private, in the data
folder and kept; a deployed stage without one refuses to start; the console's key is a
separate one; and access-key secrets already sealed in a data folder stay readable."""

from __future__ import annotations

import base64
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.domain.messages import MessageRef
from chalicelib.encryption import deployment_keys as secrets
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.settings import ConfigurationError, Settings
from tests.clocks import FakeClock
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, launch
from tests.key_loaders import FILES
from tests.security.attackers import (
    ACCOUNT,
    PUBLISHED_KEY,
    ROOT,
    ROOT_SECRET,
    new_data_dir,
    required_settings,
)

ROOT_DIR = Path(__file__).resolve().parents[2]
SHIPPED = ["app.py", "chalicelib", "dmqlocal", "infra", "localstack", ".chalice", "README.md",
           "docs", "Makefile"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The data folder of the test's DMQ."""
    return new_data_dir(tmp_path)


def _forged(key: str, queue: str, message_id: str) -> str:
    return ReceiptCodec(key).encode(MessageRef(f"{ACCOUNT}/{queue}", 0, message_id, "forged"))


def test_a_handle_forged_with_the_published_key_is_refused(sqs: Any) -> None:
    # GIVEN a message the attacker sent, so it knows its id, and nobody received
    url = sqs.create_queue(QueueName="victim")["QueueUrl"]
    message_id = sqs.send_message(QueueUrl=url, MessageBody="keep me")["MessageId"]
    # WHEN it deletes it, and resets its visibility, with handles signed by the old key
    for call in (lambda h: sqs.delete_message(QueueUrl=url, ReceiptHandle=h),
                 lambda h: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=h,
                                                         VisibilityTimeout=0)):
        with pytest.raises(ClientError) as refused:
            call(_forged(PUBLISHED_KEY, "victim", message_id))
        # THEN both are ReceiptHandleIsInvalid
        assert refused.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"
    # AND the message is still there for its consumer
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["keep me"]
    # (the same forgery with the deployment's own key is what the key protects)
    other = sqs.send_message(QueueUrl=url, MessageBody="x")["MessageId"]
    sqs.delete_message(QueueUrl=url,
                       ReceiptHandle=_forged(runtime.receipt_key(), "victim", other))


def test_no_key_is_written_in_the_shipped_source() -> None:
    found = subprocess.run(["grep", "-rIl", "--exclude-dir=__pycache__", PUBLISHED_KEY,
                            *SHIPPED], cwd=ROOT_DIR, capture_output=True, text=True,
                           check=False)
    assert found.stdout == "", found.stdout


def test_the_key_is_made_once_private_in_the_data_folder_and_kept(data_dir: Path) -> None:
    settings = Settings(data_dir=str(data_dir))
    first = secrets.receipt_key(settings, secret_file=FILES.secret)
    path = data_dir / "keys" / "receipt.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(first) >= 43 and first != PUBLISHED_KEY
    restarted = secrets.receipt_key(Settings(data_dir=str(data_dir)), secret_file=FILES.secret)
    assert restarted == first
    console = secrets.console_key(settings, secret_file=FILES.secret)
    assert console != first and (data_dir / "keys" / "console.key").is_file()
    assert secrets.receipt_key(Settings(data_dir=str(data_dir / "other")),
                               secret_file=FILES.secret) != first


def test_processes_starting_at_once_end_up_with_one_key(data_dir: Path) -> None:
    path = data_dir / "keys" / "receipt.key"
    code = ("import sys; from pathlib import Path; from dmqlocal.key_files import "
            "read_or_create; print(read_or_create(Path(sys.argv[1])))")
    started = [subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT_DIR,
                                stdout=subprocess.PIPE, text=True) for _ in range(6)]
    keys = {p.communicate(timeout=60)[0].strip() for p in started}
    assert len(keys) == 1 and keys == {path.read_text().strip()}
    assert [p.name for p in path.parent.iterdir()] == ["receipt.key"]  # no temporary left


def test_a_deployed_stage_without_a_key_refuses_to_start() -> None:
    lambda_env = {"AWS_LAMBDA_FUNCTION_NAME": "dmq-dev"}
    with pytest.raises(ConfigurationError, match="DMQ_RECEIPT_KEY_PARAMETER"):
        Settings.from_env(lambda_env)
    with pytest.raises(ConfigurationError, match="DMQ_CONSOLE_KEY_PARAMETER"):
        secrets.console_key(Settings(on_lambda=True))
    assert Settings.from_env({**lambda_env, "DMQ_RECEIPT_KEY": "a-secret-of-the-stage"})


@pytest.mark.parametrize("name", ["DMQ_RECEIPT_KEY", "DMQ_CONSOLE_KEY"])
def test_the_published_key_is_refused_wherever_it_is_set(name: str) -> None:
    with pytest.raises(ConfigurationError, match="published"):
        Settings.from_env({name: PUBLISHED_KEY})


def test_sealed_access_key_secrets_survive_a_new_receipt_key(
        aws: Clients, data_dir: Path) -> None:
    # GIVEN a data folder whose access-key secrets were sealed (required mode)
    runtime.configure(required_settings(data_dir), FakeClock())
    try:
        key, secret = runtime.identities().create_key("111122223333", None, False)
        # WHEN the receipt key changes (a new one is made) and DMQ restarts
        (data_dir / "keys" / "receipt.key").unlink(missing_ok=True)
        runtime.configure(required_settings(data_dir), FakeClock())
        assert runtime.receipt_key() != PUBLISHED_KEY
        # THEN the stored secret still opens
        assert runtime.identities().check_secret(key.access_key_id, secret).account == (
            "111122223333")
    finally:
        runtime.configure(None)


def test_the_console_key_is_not_derived_from_the_receipt_key(dmq: Client) -> None:
    assert runtime.console_key() != runtime.receipt_key()


@pytest.mark.e2e
def test_the_real_server_keeps_its_key_across_a_restart(tmp_path: Path) -> None:
    # GIVEN the local server in the required mode, no DMQ_RECEIPT_KEY, and a received message
    data = tmp_path / "data"
    env = {"DMQ_AUTH": "required", "DMQ_ROOT_ACCESS_KEY_ID": ROOT,
           "DMQ_ROOT_SECRET_ACCESS_KEY": ROOT_SECRET, "DMQ_DATA_DIR": str(data)}

    def started() -> Any:
        server = launch(**env)
        assert server.wait_ready(START_TIMEOUT_S), server.output
        return server

    def sqs(server: Any) -> Any:
        return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                            aws_access_key_id=ROOT, aws_secret_access_key=ROOT_SECRET,
                            config=Config(retries={"total_max_attempts": 1}))

    server = started()
    try:
        url = sqs(server).create_queue(QueueName="kept")["QueueUrl"]
        sqs(server).send_message(QueueUrl=url, MessageBody="one")
        sent = sqs(server).send_message(QueueUrl=url, MessageBody="two")["MessageId"]
        handle = sqs(server).receive_message(QueueUrl=url, MaxNumberOfMessages=1)[
            "Messages"][0]["ReceiptHandle"]
    finally:
        assert server.stop(STOP_TIMEOUT_S) == 0, server.output
    key = data / "keys" / "receipt.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    # WHEN it starts again on the same data folder
    server = started()
    try:
        # THEN the handle it gave out still works, and a forged one does not
        sqs(server).delete_message(QueueUrl=url, ReceiptHandle=handle)
        with pytest.raises(ClientError) as refused:
            sqs(server).delete_message(QueueUrl=url,
                                       ReceiptHandle=_forged(PUBLISHED_KEY, "kept", sent))
        assert refused.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"
    finally:
        assert server.stop(STOP_TIMEOUT_S) == 0, server.output


def test_a_deployed_console_without_its_key_refuses_to_render(dmq: Client) -> None:
    runtime.configure(replace(runtime.settings, on_lambda=True, receipt_key="stage-secret"),
                      runtime.clock)
    admin = {"Authorization": "Basic " + base64.b64encode(b"AKIDADMIN:s").decode()}
    page = dmq.http.get("/console", headers=admin)
    assert page.status_code == 503
    assert b"DMQ_CONSOLE_KEY_PARAMETER" in page.body
