"""GIVEN SQS's encryption attributes WHEN queues are created, changed and used THEN they
behave as SQS documents them, and the stores hold ciphertext only."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from chalice.test import Client
from moto import mock_aws

from app import app, runtime
from chalicelib.aws import Clients
from chalicelib.settings import ConfigurationError, Settings
from infra import deploy
from tests.admin_signing import admin_call
from tests.clocks import FakeClock
from tests.conftest import sqs_client
from tests.functional.test_query_protocol import error_of, post

ROOT = Path(__file__).resolve().parents[2]

MESSAGES_TABLE = "dmq-messages"
SECRET = "PLAINTEXT-never-stored-0451"
ATTRIBUTES = {
    "note": {"DataType": "String", "StringValue": f"{SECRET}-attr"},
    "n": {"DataType": "Number", "StringValue": "4510451"},
    "raw": {"DataType": "Binary", "BinaryValue": f"{SECRET}-bin".encode()},
}
CONFLICT = ("You can use one type of server-side encryption (SSE) at one time. You can either "
            "enable KMS SSE or SQS SSE.")


def _all(sqs: Any, url: str) -> dict[str, str]:
    return dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])


def _items(aws: Clients) -> list[dict[str, Any]]:
    return list(aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"])


def _error(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = raised.value.response["Error"]
    return str(error["Code"]), str(error["Message"])


# -- attributes -------------------------------------------------------------------------------
def test_new_queue_has_sqs_managed_sse_on_and_no_kms_attributes(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    attributes = _all(sqs, url)
    assert attributes["SqsManagedSseEnabled"] == "true"
    assert "KmsMasterKeyId" not in attributes
    assert "KmsDataKeyReusePeriodSeconds" not in attributes


def test_kms_key_turns_sqs_managed_sse_off_with_the_default_reuse_period(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="kms", Attributes={"KmsMasterKeyId": "alias/aws/sqs"})[
        "QueueUrl"]
    attributes = _all(sqs, url)
    assert attributes["KmsMasterKeyId"] == "alias/aws/sqs"
    assert attributes["SqsManagedSseEnabled"] == "false"
    assert attributes["KmsDataKeyReusePeriodSeconds"] == "300"


def test_both_kinds_of_sse_at_once_are_refused_on_create(sqs: Any) -> None:
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName="both", Attributes={
            "SqsManagedSseEnabled": "true", "KmsMasterKeyId": "alias/aws/sqs"})
    assert _error(raised) == ("InvalidAttributeName", CONFLICT)
    assert "QueueUrls" not in sqs.list_queues()


def test_both_kinds_of_sse_at_once_are_refused_on_set_and_nothing_changes(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    with pytest.raises(ClientError) as raised:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={
            "KmsMasterKeyId": "testKeyId", "SqsManagedSseEnabled": "true",
            "VisibilityTimeout": "99"})
    assert _error(raised) == ("InvalidAttributeName", CONFLICT)
    attributes = _all(sqs, url)
    assert "KmsMasterKeyId" not in attributes
    assert attributes["VisibilityTimeout"] == "30"


def test_switching_between_sse_kms_and_sse_sqs(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    # SSE-SQS -> SSE-KMS: the key turns SqsManagedSseEnabled off
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "alias/orders"})
    attributes = _all(sqs, url)
    assert (attributes["SqsManagedSseEnabled"], attributes["KmsMasterKeyId"]) == (
        "false", "alias/orders")
    # SSE-KMS -> SSE-SQS: the key goes
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"SqsManagedSseEnabled": "true"})
    attributes = _all(sqs, url)
    assert attributes["SqsManagedSseEnabled"] == "true"
    assert "KmsMasterKeyId" not in attributes
    # and off altogether
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"SqsManagedSseEnabled": "false"})
    assert _all(sqs, url)["SqsManagedSseEnabled"] == "false"


def test_sqs_managed_sse_false_with_a_kms_key_is_accepted(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="q", Attributes={
        "SqsManagedSseEnabled": "false", "KmsMasterKeyId": "k1",
        "KmsDataKeyReusePeriodSeconds": "60"})["QueueUrl"]
    attributes = _all(sqs, url)
    assert (attributes["SqsManagedSseEnabled"], attributes["KmsMasterKeyId"],
            attributes["KmsDataKeyReusePeriodSeconds"]) == ("false", "k1", "60")


@pytest.mark.parametrize("value", ["60", "86400", "300"])
def test_reuse_period_limits_are_accepted(sqs: Any, value: str) -> None:
    url = sqs.create_queue(QueueName="q", Attributes={
        "KmsMasterKeyId": "k", "KmsDataKeyReusePeriodSeconds": value})["QueueUrl"]
    assert _all(sqs, url)["KmsDataKeyReusePeriodSeconds"] == value
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsDataKeyReusePeriodSeconds": value})


@pytest.mark.parametrize("value", ["59", "86401", "0", "-233", "abc", "1.5", ""])
def test_reuse_period_out_of_range_is_refused(sqs: Any, value: str) -> None:
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName="q", Attributes={"KmsDataKeyReusePeriodSeconds": value})
    code, message = _error(raised)
    assert code == "InvalidAttributeValue"
    assert message.startswith(
        "Invalid value for the parameter KmsDataKeyReusePeriodSeconds.")
    url = sqs.create_queue(QueueName="q2")["QueueUrl"]
    with pytest.raises(ClientError) as raised:
        sqs.set_queue_attributes(QueueUrl=url,
                                 Attributes={"KmsDataKeyReusePeriodSeconds": value})
    assert _error(raised)[0] == "InvalidAttributeValue"


@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_sqs_managed_sse_must_be_true_or_false(sqs: Any, value: str) -> None:
    with pytest.raises(ClientError) as raised:
        sqs.create_queue(QueueName="q", Attributes={"SqsManagedSseEnabled": value})
    code, message = _error(raised)
    assert code == "InvalidAttributeValue"
    assert message.startswith("Invalid value for the parameter SqsManagedSseEnabled.")


def test_attributes_can_be_asked_for_by_name(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="q", Attributes={"KmsMasterKeyId": "k"})["QueueUrl"]
    asked = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled"])["Attributes"]
    assert asked == {"KmsMasterKeyId": "k", "KmsDataKeyReusePeriodSeconds": "300",
                     "SqsManagedSseEnabled": "false"}


# -- messages -----------------------------------------------------------------------------
def _send_secret(sqs: Any, url: str) -> dict[str, Any]:
    return dict(sqs.send_message(QueueUrl=url, MessageBody=f"{SECRET}-body",
                                 MessageAttributes=ATTRIBUTES,
                                 MessageSystemAttributes={"AWSTraceHeader": {
                                     "DataType": "String", "StringValue": "Root=1-4510451"}}))


def _assert_no_plaintext(aws: Clients) -> None:
    raw = json.dumps(_items(aws), default=str)
    assert SECRET not in raw
    assert "4510451" not in raw


@pytest.mark.parametrize("attributes", [{}, {"KmsMasterKeyId": "alias/orders"}])
def test_encrypted_queue_stores_ciphertext_and_returns_exact_digests(
    sqs: Any, aws: Clients, attributes: dict[str, str],
) -> None:
    # GIVEN an SSE-SQS queue, or an SSE-KMS one
    url = sqs.create_queue(QueueName="secret", Attributes=attributes)["QueueUrl"]
    # WHEN a message with attributes is sent
    sent = _send_secret(sqs, url)
    # THEN the digests are those of the plaintext
    assert sent["MD5OfMessageBody"] == hashlib.md5(f"{SECRET}-body".encode()).hexdigest()
    # AND the item holds no plaintext, but the wrapped data key
    _assert_no_plaintext(aws)
    (item,) = _items(aws)
    assert item["env"]["S"].startswith("1|local:")
    # AND the receiver gets the plaintext back, with matching digests (botocore checks)
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                                     MessageSystemAttributeNames=["All"])["Messages"]
    assert message["Body"] == f"{SECRET}-body"
    assert message["MessageAttributes"] == ATTRIBUTES
    assert message["Attributes"]["AWSTraceHeader"] == "Root=1-4510451"
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]


def test_unencrypted_queue_stores_the_body_as_sent(sqs: Any, aws: Clients) -> None:
    url = sqs.create_queue(QueueName="open", Attributes={"SqsManagedSseEnabled": "false"})[
        "QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="in clear")
    (item,) = _items(aws)
    assert item["body"]["S"] == "in clear"
    assert "env" not in item


def test_messages_sent_before_encryption_was_turned_on_still_read(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="q", Attributes={"SqsManagedSseEnabled": "false"})[
        "QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"SqsManagedSseEnabled": "true"})
    sqs.send_message(QueueUrl=url, MessageBody="after")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"SqsManagedSseEnabled": "false"})
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in got) == ["after", "before"]


def test_fifo_queue_messages_are_encrypted(sqs: Any, aws: Clients) -> None:
    url = sqs.create_queue(QueueName="f.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody=f"{SECRET}-fifo", MessageGroupId="g")
    # a duplicate (content-based, from the plaintext) gets the first message's id
    again = sqs.send_message(QueueUrl=url, MessageBody=f"{SECRET}-fifo", MessageGroupId="g")
    assert again["MessageId"] == sent["MessageId"]
    assert SECRET not in json.dumps(_items(aws), default=str)
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    assert (message["MessageId"], message["Body"]) == (sent["MessageId"], f"{SECRET}-fifo")


def test_dead_letter_move_keeps_the_ciphertext_and_the_dlq_reads_it(
    sqs: Any, aws: Clients, clock: FakeClock,
) -> None:
    # GIVEN an encrypted source redriving into an encrypted DLQ after one receive
    dlq = sqs.create_queue(QueueName="dead")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 1})
    source = sqs.create_queue(QueueName="work", Attributes={
        "RedrivePolicy": policy, "VisibilityTimeout": "5"})["QueueUrl"]
    sent = _send_secret(sqs, source)
    assert len(sqs.receive_message(QueueUrl=source)["Messages"]) == 1
    clock.advance(5)
    # WHEN it is received again THEN it moves
    assert "Messages" not in sqs.receive_message(QueueUrl=source)
    # AND the DLQ's copy is still ciphertext, and reads back whole with the same id
    _assert_no_plaintext(aws)
    (moved,) = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    assert (moved["MessageId"], moved["Body"]) == (sent["MessageId"], f"{SECRET}-body")
    assert moved["MessageAttributes"] == ATTRIBUTES


def test_redrive_reseals_for_the_destination_under_the_new_id(
    sqs: Any, aws: Clients, clock: FakeClock,
) -> None:
    # GIVEN a message in an SSE-SQS DLQ and an SSE-KMS destination queue
    dlq = sqs.create_queue(QueueName="dead")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    sqs.create_queue(QueueName="work", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})
    target = sqs.create_queue(QueueName="target", Attributes={
        "KmsMasterKeyId": "alias/target"})["QueueUrl"]
    target_arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    sent = _send_secret(sqs, dlq)
    # WHEN a move task redrives it
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=target_arn)
    assert runtime.services_for().move_tasks.advance() == 1
    # THEN the stored copy is sealed for the target with its key, no plaintext anywhere
    _assert_no_plaintext(aws)
    (item,) = _items(aws)
    assert item["env"]["S"].startswith("1|local:alias/target|")
    assert item["env"]["S"].endswith("|000000000000/target")
    # AND it reads back under its new id with the same body and attributes
    (moved,) = sqs.receive_message(QueueUrl=target, MessageAttributeNames=["All"])["Messages"]
    assert moved["MessageId"] != sent["MessageId"]
    assert moved["Body"] == f"{SECRET}-body"
    assert moved["MessageAttributes"] == ATTRIBUTES


def test_admin_peek_shows_plaintext(dmq: Client, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="peeked")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="look at me")
    response = admin_call(dmq, "GET", "/admin/queues/000000000000/peeked/messages")
    assert response.status_code == 200
    assert [m["body"] for m in json.loads(response.body)["messages"]] == ["look at me"]


# -- AWS KMS ------------------------------------------------------------------------------
@pytest.fixture
def kms_settings() -> Settings:
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, sse_keys="kms",
                    sse_managed_key_id="alias/dmq-sse")


@pytest.fixture
def kms_app(aws: Clients, kms_settings: Settings, clock: FakeClock) -> Iterator[Client]:
    """The app with its data keys from (moto's) KMS."""
    runtime.configure(kms_settings, clock)
    with Client(app) as client:
        yield client
    runtime.configure(None)


@pytest.fixture
def kms_sqs(kms_app: Client) -> Any:
    return sqs_client(kms_app, "us-east-1")


def test_kms_wraps_the_data_keys_of_kms_and_managed_queues(kms_sqs: Any, aws: Clients) -> None:
    # GIVEN a customer key, and DMQ's managed key under its alias
    kms = boto3.client("kms", region_name="us-east-1")
    customer = kms.create_key()["KeyMetadata"]["Arn"]
    managed = kms.create_key()["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName="alias/dmq-sse", TargetKeyId=managed)
    by_kms = kms_sqs.create_queue(QueueName="by-kms", Attributes={
        "KmsMasterKeyId": customer})["QueueUrl"]
    by_sqs = kms_sqs.create_queue(QueueName="by-sqs")["QueueUrl"]
    # WHEN messages are sent to both
    for url in (by_kms, by_sqs):
        _send_secret(kms_sqs, url)
    # THEN each item holds a KMS-wrapped data key naming the key's ARN, and no plaintext
    _assert_no_plaintext(aws)
    refs = sorted(i["env"]["S"].split("|")[1] for i in _items(aws))
    assert refs == sorted([f"kms:{customer}", f"kms:arn:aws:kms:us-east-1:123456789012:key/"
                           f"{managed}"])
    # AND both read back
    for url in (by_kms, by_sqs):
        (message,) = kms_sqs.receive_message(QueueUrl=url)["Messages"]
        assert message["Body"] == f"{SECRET}-body"


def test_a_kms_key_that_does_not_exist_fails_the_send_with_kms_not_found(kms_sqs: Any) -> None:
    url = kms_sqs.create_queue(QueueName="nokey", Attributes={
        "KmsMasterKeyId": "alias/not-there"})["QueueUrl"]
    with pytest.raises(ClientError) as raised:
        kms_sqs.send_message(QueueUrl=url, MessageBody="x")
    # botocore reports the legacy code of x-amzn-query-error (the __type is KmsNotFound)
    assert raised.value.response["Error"]["Code"] == "KMS.NotFoundException"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "Messages" not in kms_sqs.receive_message(QueueUrl=url)


def test_deploy_makes_the_managed_key_once_and_configures_kms(tmp_path: Path) -> None:
    # GIVEN a stage's Chalice config and a region without DMQ's managed key
    config = tmp_path / "config.json"
    shutil.copy(ROOT / ".chalice" / "config.json", config)
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        ssm = boto3.client("ssm", region_name="us-east-1")
        outputs = {"MessagesStreamArn": "arn:m", "QueuesStreamArn": "arn:q"}
        # WHEN the stage is configured twice
        deploy.update_config(config, "dev", outputs, ssm, kms)
        deploy.update_config(config, "dev", outputs, ssm, kms)
        # THEN one key exists under the alias, and the stage uses KMS with it
        aliases = [a for a in kms.list_aliases()["Aliases"] if a["AliasName"] == "alias/dmq-sse"]
        assert len(aliases) == 1 and len(kms.list_keys()["Keys"]) == 1
    env = json.loads(config.read_text())["stages"]["dev"]["environment_variables"]
    assert (env["DMQ_SSE_KEYS"], env["DMQ_SSE_MANAGED_KEY_ID"]) == ("kms", "alias/dmq-sse")
    # AND the functions may make and open data keys
    policy = json.loads((ROOT / ".chalice" / "policy-dev.json").read_text())
    assert any(set(s["Action"]) == {"kms:GenerateDataKey", "kms:Decrypt"}
               for s in policy["Statement"])


def test_settings_choose_kms_on_lambda_and_the_key_file_locally(tmp_path: Path) -> None:
    local = Settings.from_env({"DMQ_DATA_DIR": str(tmp_path)})
    assert (local.sse_keys, local.sse_managed_key_id) == ("local", "dmq/sse-sqs")
    assert local.sse_key_path == str(tmp_path / "keys" / "sse.key")
    assert Settings.from_env({}).sse_key_path is None  # no data folder: a key in memory
    deployed = Settings.from_env({"AWS_LAMBDA_FUNCTION_NAME": "f", "DMQ_RECEIPT_KEY": "secret"})
    assert (deployed.sse_keys, deployed.sse_managed_key_id) == ("kms", "alias/dmq-sse")


# -- the Query protocol ------------------------------------------------------------------
def test_query_protocol_refuses_both_sse_kinds_and_reports_kms_errors_by_legacy_code(
    kms_app: Client,
) -> None:
    client = kms_app
    status, _, root = post(client, Action="CreateQueue", QueueName="both", **{
        "Attribute.1.Name": "SqsManagedSseEnabled", "Attribute.1.Value": "true",
        "Attribute.2.Name": "KmsMasterKeyId", "Attribute.2.Value": "alias/aws/sqs"})
    assert status == 400
    assert error_of(root) == ("Sender", "InvalidAttributeName", CONFLICT)
    status, _, root = post(client, Action="CreateQueue", QueueName="nokey", **{
        "Attribute.1.Name": "KmsMasterKeyId", "Attribute.1.Value": "alias/not-there"})
    assert status == 200
    status, _, root = post(client, "/000000000000/nokey", Action="SendMessage",
                           MessageBody="x")
    assert status == 400
    assert error_of(root)[:2] == ("Sender", "KMS.NotFoundException")


def test_local_keys_on_lambda_need_a_shared_key_file() -> None:
    lambda_env = {"AWS_LAMBDA_FUNCTION_NAME": "f", "DMQ_RECEIPT_KEY": "secret",
                  "DMQ_SSE_KEYS": "local"}
    with pytest.raises(ConfigurationError, match="DMQ_SSE_KEY_FILE"):
        Settings.from_env(lambda_env)
    shared = Settings.from_env({**lambda_env, "DMQ_SSE_KEY_FILE": "/mnt/keys/sse.key"})
    assert shared.sse_key_path == "/mnt/keys/sse.key"
