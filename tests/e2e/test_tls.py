"""GIVEN `python -m dmqlocal` with TLS on (what `make run TLS=1` starts) WHEN boto3 and the
AWS CLI trust the printed CA file THEN they work over HTTPS and queue URLs say https; a
client that does not trust it fails certificate verification; a given certificate is served
instead of a generated one; and a certificate that cannot be used stops the start."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, SSLError

from dmqlocal.tls import local_certificates
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

AWS = Path(sys.executable).parent / "aws"
CLI_TIMEOUT_S = 60
CA_LINE = re.compile(r"its CA is (\S+) ")
NO_RETRIES = Config(connect_timeout=5, read_timeout=30, retries={"total_max_attempts": 1})


def _started(**env: str) -> DmqProcess:
    dmq = launch(DMQ_STORE="memory", **env)
    if not dmq.wait_ready(START_TIMEOUT_S):
        dmq.stop(STOP_TIMEOUT_S)
        pytest.fail(f"DMQ did not start:\n{dmq.output}")
    return dmq


def _stopped(dmq: DmqProcess) -> None:
    assert dmq.stop(STOP_TIMEOUT_S) == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


@pytest.fixture(scope="module")
def tls_server() -> Iterator[tuple[DmqProcess, str]]:
    """DMQ with DMQ_TLS=1 (a generated certificate) and the CA file it printed."""
    dmq = _started(DMQ_TLS="1")
    match = CA_LINE.search(dmq.output)
    assert match, dmq.output
    yield dmq, match.group(1)
    _stopped(dmq)


def _sqs(port: int, verify: Any, host: str = "127.0.0.1") -> Any:
    return boto3.client("sqs", endpoint_url=f"https://{host}:{port}", region_name="us-east-1",
                        aws_access_key_id="any-key", aws_secret_access_key="any-secret",
                        verify=verify, config=NO_RETRIES)


def test_boto3_trusting_the_ca_file_works_over_https(tls_server: tuple[DmqProcess, str]) -> None:
    dmq, ca = tls_server
    assert f"DMQ is listening on https://127.0.0.1:{dmq.port}" in dmq.output
    assert Path(ca).parent.name == "tls" and Path(ca).is_file()
    for host in ("127.0.0.1", "localhost"):
        sqs = _sqs(dmq.port, ca, host)
        name = f"tls-{uuid.uuid4().hex[:8]}"
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        assert url == f"https://{host}:{dmq.port}/000000000000/{name}"
        assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
        sqs.send_message(QueueUrl=url, MessageBody="over tls")
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in got] == ["over tls"]


def test_boto3_without_the_ca_fails_certificate_verification(
        tls_server: tuple[DmqProcess, str]) -> None:
    dmq, ca = tls_server
    with pytest.raises(SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        _sqs(dmq.port, None).list_queues()
    plain = boto3.client("sqs", endpoint_url=f"http://127.0.0.1:{dmq.port}",
                         region_name="us-east-1", aws_access_key_id="any-key",
                         aws_secret_access_key="any-secret", config=NO_RETRIES)
    with pytest.raises(ConnectionClosedError):  # plain HTTP to the HTTPS port: no answer
        plain.list_queues()
    assert _sqs(dmq.port, ca).list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200


def _aws(port: int, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DMQ_"))}
    env.update(AWS_ACCESS_KEY_ID="dummy-key", AWS_SECRET_ACCESS_KEY="dummy-secret",
               AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="",
               AWS_MAX_ATTEMPTS="1")
    return subprocess.run(
        [str(AWS), "sqs", *args, "--endpoint-url", f"https://127.0.0.1:{port}",
         "--region", "us-east-1", "--output", "json"],
        env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)


def test_the_aws_cli_with_ca_bundle_works_and_without_it_fails(
        tls_server: tuple[DmqProcess, str], tmp_path: Path) -> None:
    dmq, ca = tls_server
    assert AWS.exists(), f"the AWS CLI is not installed next to the interpreter: {AWS}"
    name = f"tls-cli-{uuid.uuid4().hex[:8]}"
    made = _aws(dmq.port, tmp_path, "create-queue", "--queue-name", name, "--ca-bundle", ca)
    assert made.returncode == 0, made.stderr
    assert f'"https://127.0.0.1:{dmq.port}/000000000000/{name}"' in made.stdout
    refused = _aws(dmq.port, tmp_path, "list-queues")
    assert refused.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr


def test_a_given_certificate_is_served(tmp_path: Path) -> None:
    own = local_certificates(tmp_path / "own")  # stands for the user's certificate authority
    data = tmp_path / "data"
    dmq = _started(DMQ_TLS_CERT=str(own.cert), DMQ_TLS_KEY=str(own.key), DMQ_DATA_DIR=str(data))
    try:
        assert "its CA is" not in dmq.output  # nothing generated, nothing to point at
        assert not (data / "tls").exists()
        sqs = _sqs(dmq.port, str(own.ca))
        url = sqs.create_queue(QueueName="given-cert")["QueueUrl"]
        assert url.startswith(f"https://127.0.0.1:{dmq.port}/")
    finally:
        _stopped(dmq)


def test_an_unusable_certificate_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    unusable = {"DMQ_TLS_CERT": str(tmp_path / "cert.pem"),
                "DMQ_TLS_KEY": str(tmp_path / "key.pem")}
    for env, said in ((unusable, "error: cannot use the certificate"),
                      ({"DMQ_TLS_CERT": str(tmp_path / "cert.pem")},
                       "error: give both a certificate and its key")):
        dmq = launch(DMQ_STORE="memory", **env)
        try:
            code = dmq.process.wait(timeout=START_TIMEOUT_S)
        finally:
            dmq.stop(STOP_TIMEOUT_S)
        assert code == 2, dmq.output
        assert said in dmq.output, dmq.output
