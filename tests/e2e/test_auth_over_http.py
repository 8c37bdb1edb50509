"""GIVEN the real local server with DMQ_AUTH=required (root credentials from
DMQ_ROOT_ACCESS_KEY_ID / DMQ_ROOT_SECRET_ACCESS_KEY)
WHEN boto3, the AWS CLI and raw HTTP send forged, tampered, expired, replayed, unsigned and
cross-account requests
THEN each is refused with SQS's code and status, and a second account's keys reach a queue
whose policy allows them; the admin CLI makes, rotates and revokes keys."""

from __future__ import annotations

import datetime
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from dmqcli.main import main as dmq
from tests.admin_signing import sign
from tests.e2e.conftest import (
    CLIENT_CONFIG,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    DmqProcess,
    launch,
)

ROOT, ROOT_SECRET = "AKIAE2EROOTE2EROOTE2", "e2e-root-secret-e2e-root-secret-e2e-root"
ACCOUNT = "000000000000"
OTHER = "222233334444"
AWS = Path(sys.executable).parent / "aws"
CLI_TIMEOUT_S = 60
WAITS = 4  # each account's long polls in progress at once (DMQ_ACCOUNT_MAX_WAITS)


@pytest.fixture(scope="module")
def server() -> Iterator[DmqProcess]:
    """DMQ with authentication required, for this module; stopped with SIGINT after it."""
    dmq = launch(DMQ_AUTH="required", DMQ_ROOT_ACCESS_KEY_ID=ROOT,
                 DMQ_ROOT_SECRET_ACCESS_KEY=ROOT_SECRET, DMQ_METADATA_CACHE_SECONDS="0",
                 DMQ_ACCOUNT_MAX_WAITS=str(WAITS))
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        yield dmq
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
    assert code == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


def sqs(server: DmqProcess, key: str, secret: str, service: str = "sqs") -> Any:
    return boto3.client(service, endpoint_url=server.url, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        config=CLIENT_CONFIG)


@pytest.fixture(scope="module")
def root(server: DmqProcess) -> Any:
    return sqs(server, ROOT, ROOT_SECRET)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def _signed(server: DmqProcess, method: str, path: str, body: bytes, headers: dict[str, str],
            key: str = ROOT, secret: str = ROOT_SECRET, service: str = "sqs",
            when: datetime.datetime | None = None) -> dict[str, str]:
    return sign(method, server.url + path, body, headers, key=key, secret=secret,
                service=service, when=when).headers


def raw(server: DmqProcess, method: str, path: str, body: bytes,
        headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request over a fresh connection: status, headers, body."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def json_call(server: DmqProcess, action: str, payload: dict[str, Any],
              **sign: Any) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    headers = _signed(server, "POST", "/", body, {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"},
        **sign)
    return body, headers


def error_of(status: int, headers: dict[str, str], body: bytes) -> tuple[int, str]:
    return status, json.loads(body)["__type"].split("#")[1]


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    return (exc.value.response["Error"]["Code"],
            exc.value.response["ResponseMetadata"]["HTTPStatusCode"])


def make_key(server: DmqProcess, account: str, user: str | None = None) -> dict[str, Any]:
    body = json.dumps({"account": account, "user": user, "admin": False}).encode()
    headers = _signed(server, "POST", "/admin/keys", body,
                      {"Content-Type": "application/json"}, service="execute-api")
    status, _, answer = raw(server, "POST", "/admin/keys", body, headers)
    assert status == 200, answer
    return dict(json.loads(answer))


def test_required_without_root_credentials_does_not_start() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMQ_")}
    env.update(DMQ_AUTH="required", DMQ_STORE="memory")
    done = subprocess.run([sys.executable, "-m", "dmqlocal", "--port", "0"], env=env,
                          capture_output=True, text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2
    assert "DMQ_AUTH=required needs DMQ_ROOT_ACCESS_KEY_ID" in done.stderr
    assert "Traceback" not in done.stderr
    env["DMQ_AUTH"] = "sometimes"
    done = subprocess.run([sys.executable, "-m", "dmqlocal", "--port", "0"], env=env,
                          capture_output=True, text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2 and "DMQ_AUTH is 'sometimes'" in done.stderr


# -- boto3 ------------------------------------------------------------------------------------
def test_boto3_root_is_served_and_forged_or_wrong_keys_are_refused(server: DmqProcess,
                                                                    root: Any) -> None:
    url = root.create_queue(QueueName="e2e-auth")["QueueUrl"]
    assert url == f"{server.url}/{ACCOUNT}/e2e-auth"
    root.send_message(QueueUrl=url, MessageBody="hello")
    with pytest.raises(ClientError) as exc:
        sqs(server, "AKIAFORGEDFORGEDFORG", "x").receive_message(QueueUrl=url)
    assert code_of(exc) == ("InvalidClientTokenId", 403)
    with pytest.raises(ClientError) as exc:
        sqs(server, ROOT, "not-the-root-secret").receive_message(QueueUrl=url)
    assert code_of(exc) == ("SignatureDoesNotMatch", 403)
    assert root.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "hello"
    me = sqs(server, ROOT, ROOT_SECRET, "sts").get_caller_identity()
    assert (me["Account"], me["Arn"]) == (ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root")


def test_cross_account_needs_a_policy_and_works_with_one(server: DmqProcess, root: Any) -> None:
    url = root.create_queue(QueueName="e2e-shared")["QueueUrl"]
    key = make_key(server, OTHER, "partner")
    partner = sqs(server, key["accessKeyId"], key["secretAccessKey"])
    with pytest.raises(ClientError) as exc:
        partner.send_message(QueueUrl=url, MessageBody="not yet")
    assert code_of(exc) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as exc:
        partner.receive_message(QueueUrl=url)
    assert code_of(exc) == ("AccessDenied", 403)
    # The partner's own account is its own: its queues live there, not in the owner's.
    own = partner.create_queue(QueueName="e2e-shared")["QueueUrl"]
    assert own == f"{server.url}/{OTHER}/e2e-shared"

    root.add_permission(QueueUrl=url, Label="partner", AWSAccountIds=[OTHER],
                        Actions=["SendMessage", "ReceiveMessage", "DeleteMessage"])
    partner.send_message(QueueUrl=url, MessageBody="through the policy")
    got = partner.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in got] == ["through the policy"]
    partner.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    with pytest.raises(ClientError) as exc:
        partner.delete_queue(QueueUrl=url)
    assert code_of(exc) == ("AccessDenied", 403)
    assert url in root.list_queues()["QueueUrls"]


# -- raw HTTP ---------------------------------------------------------------------------------
def test_raw_http_rejections(server: DmqProcess, root: Any) -> None:
    url = root.create_queue(QueueName="e2e-raw")["QueueUrl"]

    # tampered: the body changed after signing
    body, headers = json_call(server, "SendMessage", {"QueueUrl": url, "MessageBody": "a"})
    tampered = body.replace(b'"a"', b'"b"')
    assert error_of(*raw(server, "POST", "/", tampered, headers)) == (
        403, "SignatureDoesNotMatch")

    # expired: X-Amz-Date 10 minutes ago (and 10 minutes ahead)
    for minutes in (-10, 10):
        body, headers = json_call(server, "ListQueues", {},
                                  when=_now() + datetime.timedelta(minutes=minutes))
        assert error_of(*raw(server, "POST", "/", body, headers)) == (400, "RequestExpired")

    # replayed past the window: a request captured 5.5 minutes ago, sent again now
    body, headers = json_call(server, "SendMessage", {"QueueUrl": url, "MessageBody": "once"},
                              when=_now() - datetime.timedelta(minutes=5, seconds=30))
    assert error_of(*raw(server, "POST", "/", body, headers)) == (400, "RequestExpired")

    # unsigned: JSON and Query shapes
    status, headers_out, answer = raw(server, "POST", "/", b"{}", {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"})
    assert error_of(status, headers_out, answer) == (403, "MissingAuthenticationToken")
    assert headers_out["x-amzn-query-error"] == "MissingAuthenticationToken;Sender"
    status, _, answer = raw(server, "POST", "/", b"Action=ListQueues&Version=2012-11-05",
                            {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403 and b"<Code>MissingAuthenticationToken</Code>" in answer

    # forged: an unknown key, signed properly
    body, headers = json_call(server, "ListQueues", {}, key="AKIAFORGEDFORGEDFORG")
    assert error_of(*raw(server, "POST", "/", body, headers)) == (403, "InvalidClientTokenId")

    # the valid request is served, and nothing of the refused ones was sent
    body, headers = json_call(server, "ReceiveMessage", {"QueueUrl": url})
    status, _, answer = raw(server, "POST", "/", body, headers)
    assert status == 200 and "Messages" not in json.loads(answer)


def test_presigned_urls_expire(server: DmqProcess, root: Any) -> None:
    root.create_queue(QueueName="e2e-presigned")

    def presign(when: datetime.datetime, expires_s: int) -> str:
        return sign("GET", f"{server.url}/?Action=GetQueueUrl&QueueName=e2e-presigned&"
                    "Version=2012-11-05", key=ROOT, secret=ROOT_SECRET, service="sqs",
                    when=when, presign_s=expires_s).target

    status, _, answer = raw(server, "GET", presign(_now(), 60), b"", {})
    assert status == 200 and b"/000000000000/e2e-presigned</QueueUrl>" in answer
    expired = presign(_now() - datetime.timedelta(seconds=90), 60)
    status, _, answer = raw(server, "GET", expired, b"", {})
    assert status == 400 and b"<Code>RequestExpired</Code>" in answer


def test_the_admin_api_needs_an_admin_credential(server: DmqProcess) -> None:
    status, _, answer = raw(server, "GET", "/admin/queues", b"", {})
    assert status == 403
    assert json.loads(answer)["code"] == "MissingAuthenticationToken"
    key = make_key(server, ACCOUNT, "not-admin")
    headers = _signed(server, "GET", "/admin/queues", b"", {}, key=key["accessKeyId"],
                      secret=key["secretAccessKey"], service="execute-api")
    status, _, answer = raw(server, "GET", "/admin/queues", b"", headers)
    assert status == 403 and json.loads(answer)["code"] == "AccessDenied"


# -- the AWS CLI and the admin CLI ------------------------------------------------------------
def _cli(server: DmqProcess, tmp_path: Path, key: str, secret: str,
         *args: str) -> subprocess.CompletedProcess[str]:
    if not AWS.exists():
        pytest.fail(f"the AWS CLI is not installed next to the interpreter: {AWS}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DMQ_"))}
    env.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret,
               AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="", AWS_MAX_ATTEMPTS="1")
    return subprocess.run([str(AWS), *args, "--endpoint-url", server.url, "--region",
                           "us-east-1", "--output", "json"], env=env, capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S, check=False)


def test_aws_cli_rejections_and_caller_identity(server: DmqProcess, root: Any,
                                                tmp_path: Path) -> None:
    url = root.create_queue(QueueName="e2e-cli")["QueueUrl"]
    forged = _cli(server, tmp_path, "AKIAFORGEDFORGEDFORG", "x", "sqs", "list-queues")
    assert forged.returncode != 0 and "InvalidClientTokenId" in forged.stderr
    wrong = _cli(server, tmp_path, ROOT, "wrong-secret", "sqs", "send-message", "--queue-url",
                 url, "--message-body", "x")
    assert wrong.returncode != 0 and "SignatureDoesNotMatch" in wrong.stderr
    key = make_key(server, OTHER, "cli-user")
    denied = _cli(server, tmp_path, key["accessKeyId"], key["secretAccessKey"], "sqs",
                  "send-message", "--queue-url", url, "--message-body", "x")
    assert denied.returncode != 0 and "AccessDenied" in denied.stderr
    me = _cli(server, tmp_path, key["accessKeyId"], key["secretAccessKey"], "sts",
              "get-caller-identity")
    assert me.returncode == 0, me.stderr
    assert json.loads(me.stdout)["Arn"] == f"arn:aws:iam::{OTHER}:user/cli-user"
    unsigned = _cli(server, tmp_path, ROOT, ROOT_SECRET, "sqs", "list-queues",
                    "--no-sign-request")
    assert unsigned.returncode != 0 and "MissingAuthenticationToken" in unsigned.stderr
    sent = _cli(server, tmp_path, ROOT, ROOT_SECRET, "sqs", "send-message", "--queue-url", url,
                "--message-body", "from the cli")
    assert sent.returncode == 0, sent.stderr


def test_admin_cli_keys(server: DmqProcess, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ROOT)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ROOT_SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    endpoint = ["--endpoint", server.url, "--json"]
    assert dmq([*endpoint, "keys", "create", "999988887777", "--user", "ci"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["account"] == "999988887777" and made["secretAccessKey"]
    assert dmq([*endpoint, "keys", "rotate", made["accessKeyId"]]) == 0
    rotated = json.loads(capsys.readouterr().out)
    assert dmq([*endpoint, "keys", "revoke", made["accessKeyId"], "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "Revoked"
    assert dmq([*endpoint, "keys", "list"]) == 0
    listed = {k["accessKeyId"] for k in json.loads(capsys.readouterr().out)["keys"]}
    assert rotated["accessKeyId"] in listed and made["accessKeyId"] not in listed
    with pytest.raises(ClientError) as exc:
        sqs(server, made["accessKeyId"], made["secretAccessKey"]).list_queues()
    assert code_of(exc) == ("InvalidClientTokenId", 403)
    ci = sqs(server, rotated["accessKeyId"], rotated["secretAccessKey"])
    assert ci.create_queue(QueueName="ci")["QueueUrl"].endswith("/999988887777/ci")


def test_an_account_past_its_share_of_long_polls_is_refused_at_once(
        server: DmqProcess, root: Any) -> None:
    # GIVEN a tenant holding its share of long polls (WAITS) on a queue of its own
    key = make_key(server, "555566667777")
    tenant = sqs(server, key["accessKeyId"], key["secretAccessKey"])
    url = tenant.create_queue(QueueName="waits")["QueueUrl"]
    polls = [sqs(server, key["accessKeyId"], key["secretAccessKey"]) for _ in range(WAITS)]
    with ThreadPoolExecutor(WAITS + 1) as pool:
        held = [pool.submit(p.receive_message, QueueUrl=url, WaitTimeSeconds=12)
                for p in polls]
        time.sleep(1.5)
        assert not any(f.done() for f in held)
        # WHEN it opens one more THEN that one is refused at once with RequestThrottled
        start = time.monotonic()
        with pytest.raises(ClientError) as refused:
            tenant.receive_message(QueueUrl=url, WaitTimeSeconds=4)
        assert time.monotonic() - start < 1.0
        assert code_of(refused) == ("RequestThrottled", 403)
        assert "Too many long polls of account 555566667777" in str(refused.value)
        # AND its short polls and sends are still served
        assert "Messages" not in tenant.receive_message(QueueUrl=url, WaitTimeSeconds=0)
        # AND another tenant's long poll is served, woken by its message
        mine = root.create_queue(QueueName="waits-elsewhere")["QueueUrl"]
        theirs = pool.submit(root.receive_message, QueueUrl=mine, WaitTimeSeconds=4)
        time.sleep(0.3)
        root.send_message(QueueUrl=mine, MessageBody="served")
        assert [m["Body"] for m in theirs.result(timeout=10)["Messages"]] == ["served"]
        # AND the tenant's message reaches one of its waiting polls
        tenant.send_message(QueueUrl=url, MessageBody="hello")
        bodies = [m["Body"] for f in held for m in f.result(timeout=20).get("Messages", [])]
        assert bodies == ["hello"]
    # AND once its polls ended, it may long-poll again
    assert "Messages" not in tenant.receive_message(QueueUrl=url, WaitTimeSeconds=1)
