"""GIVEN access keys stored by DMQ WHEN their secrets are written THEN they are encrypted:
with KMS when DMQ_KEYS_KMS_KEY_ID names a key (the encryption context binds the access key
id), else with AES-256-GCM under a key file in the data folder (mode 0600, kept across
restarts, the access key id as additional data)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import boto3
import pytest
from chalice.test import Client
from cryptography.exceptions import InvalidTag

from chalicelib.aws import Clients
from chalicelib.encryption.secret_cipher import CONTEXT_KEY, LocalCipher
from chalicelib.settings import Settings
from tests.admin_signing import admin_call, client
from tests.key_loaders import file_key

ROOT, ROOT_SECRET = "AKIAKMSROOTKMSROOTKM", "kms-root-secret"


def test_kms_encrypts_the_secrets_and_requests_verify_through_it(aws: Clients,
                                                                   clock: Any) -> None:
    from app import app, runtime

    kms = boto3.client("kms", region_name="us-east-1")
    key_id = kms.create_key(Description="dmq access keys")["KeyMetadata"]["KeyId"]
    runtime.configure(Settings(metadata_cache_seconds=0.0, auth="required",
                               root_access_key_id=ROOT, root_secret_access_key=ROOT_SECRET,
                               keys_kms_key_id=key_id), clock)
    try:
        with Client(app) as dmq:
            made = json.loads(admin_call(dmq, "POST", "/admin/keys", json.dumps(
                {"account": "121212121212", "user": "kms-user"}).encode(), key=ROOT,
                secret=ROOT_SECRET).body)
            user = client(dmq, made["accessKeyId"], made["secretAccessKey"])
            assert user.create_queue(QueueName="k")["QueueUrl"].endswith("/121212121212/k")
    finally:
        runtime.configure(None)
    item = aws.dynamodb.get_item(TableName="dmq-control", Key={
        "key": {"S": f"accesskey#{made['accessKeyId']}"}})["Item"]
    blob = item["secret"]["B"]
    assert made["secretAccessKey"].encode() not in blob
    plain = kms.decrypt(CiphertextBlob=blob, EncryptionContext={
        CONTEXT_KEY: made["accessKeyId"]})["Plaintext"]
    assert plain == made["secretAccessKey"].encode()
    with pytest.raises(kms.exceptions.InvalidCiphertextException):
        kms.decrypt(CiphertextBlob=blob, EncryptionContext={CONTEXT_KEY: "AKIAOTHER"})


def test_the_local_key_file_is_private_kept_and_binds_the_key_id(tmp_path: Path) -> None:
    path = tmp_path / "data" / "access-keys.key"
    first = LocalCipher(file_key(path))
    blob = first.encrypt(b"the-secret", "AKIAONE")
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_bytes()) == 32 and b"the-secret" not in blob
    again = LocalCipher(file_key(path))  # a restart reads the same key
    assert again.decrypt(blob, "AKIAONE") == b"the-secret"
    with pytest.raises(InvalidTag):
        again.decrypt(blob, "AKIATWO")
    tampered = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(InvalidTag):
        again.decrypt(tampered, "AKIAONE")
    path.write_bytes(b"short")
    with pytest.raises(ValueError, match="32-byte"):
        LocalCipher(file_key(path)).encrypt(b"x", "AKIAONE")


def test_without_a_key_file_the_key_derives_from_the_receipt_key() -> None:
    blob = LocalCipher(None, "stage-receipt-key").encrypt(b"s", "AKIAONE")
    assert LocalCipher(None, "stage-receipt-key").decrypt(blob, "AKIAONE") == b"s"
    with pytest.raises(InvalidTag):
        LocalCipher(None, "another-stage-key").decrypt(blob, "AKIAONE")
