"""GIVEN a queue whose policy lets another account send only over TLS WHEN that account
sends over plain HTTP claiming `X-Forwarded-Proto: https` (or `Forwarded: proto=https`)
THEN it is denied, and queue URLs say http: forwarded headers count only from a configured
proxy; the local server hands the app what the connection really is (TLS or not, the peer's
address) and drops a client's forwarded headers; on API Gateway the gateway's own header
counts."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice import Chalice
from chalice.test import Client

from app import runtime
from chalicelib.frontend.transport import LOCAL_MARK, transport_of
from chalicelib.settings import Settings
from dmqlocal.server import LocalServer
from dmqlocal.tls import local_certificates, server_context
from tests.admin_signing import client
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, launch

OWNER, SENDER = "222222222222", "111111111111"  # open mode: a 12-digit key acts as it
SPOOFS = [{"X-Forwarded-Proto": "https"}, {"Forwarded": "for=203.0.113.9;proto=https"}]


def _tls_only_policy(arn: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{SENDER}:root"},
        "Action": "sqs:SendMessage", "Resource": arn,
        "Condition": {"Bool": {"aws:SecureTransport": "true"}}}]})


def _with_headers(made: Any, headers: dict[str, str]) -> Any:
    def add(request: Any, **kwargs: Any) -> None:
        for name, value in headers.items():
            request.headers[name] = value

    made.meta.events.register_first("before-sign.sqs", add)
    return made


def _tls_only_queue(owner: Any) -> str:
    url = str(owner.create_queue(QueueName="tls-only")["QueueUrl"])
    arn = owner.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    owner.set_queue_attributes(QueueUrl=url, Attributes={
        "Policy": _tls_only_policy(arn["Attributes"]["QueueArn"])})
    return url


@pytest.mark.parametrize("spoof", SPOOFS, ids=["x-forwarded-proto", "forwarded"])
def test_a_spoofed_https_header_over_plain_http_is_denied(
        dmq: Client, spoof: dict[str, str]) -> None:
    url = _tls_only_queue(client(dmq, OWNER, "s"))
    sender = _with_headers(client(dmq, SENDER, "s"), spoof)
    with pytest.raises(ClientError) as denied:
        sender.send_message(QueueUrl=url, MessageBody="over plain http")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    made = sender.create_queue(QueueName="mine")["QueueUrl"]
    assert made.startswith("http://"), made


def test_behind_a_trusted_proxy_its_header_counts(dmq: Client) -> None:
    runtime.configure(replace(runtime.settings, trusted_proxies=("127.0.0.0/8",)),
                      runtime.clock)
    url = _tls_only_queue(client(dmq, OWNER, "s"))
    sender = _with_headers(client(dmq, SENDER, "s"), SPOOFS[0])
    assert sender.send_message(QueueUrl=url, MessageBody="via the proxy")["MessageId"]
    assert sender.create_queue(QueueName="mine")["QueueUrl"].startswith("https://")


def test_the_transport_rules() -> None:
    spoofed = {"x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.9"}
    local = {"identity": {"sourceIp": "192.0.2.1"}, LOCAL_MARK: {"secure": False}}
    assert transport_of(spoofed, local, False, ()) == transport_of({}, local, False, ())
    assert not transport_of(spoofed, local, False, ()).secure
    tls = {**local, LOCAL_MARK: {"secure": True}}
    assert transport_of({}, tls, False, ()).secure
    proxied = transport_of({"x-forwarded-proto": "https",
                            "x-forwarded-for": "203.0.113.9, 10.0.0.2"}, local, False,
                           ("192.0.2.0/24", "10.0.0.0/8"))
    assert proxied.secure and proxied.client == "203.0.113.9"
    gateway = {"identity": {"sourceIp": "198.51.100.4"}}
    assert transport_of({"x-forwarded-proto": "https"}, gateway, True, ()).secure
    assert not transport_of({"x-forwarded-proto": "https"}, gateway, False, ()).secure
    assert Settings.from_env({"DMQ_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"}
                             ).trusted_proxies == ("10.0.0.0/8", "192.0.2.7")


def _echo_app() -> Chalice:
    echo = Chalice(app_name="transport-echo")

    @echo.route("/", methods=["POST"], content_types=["application/json"])
    def facts() -> dict[str, Any]:
        request = echo.current_request
        assert request is not None
        found = transport_of({k.lower(): v for k, v in request.headers.items()},
                             request.context, False, ())
        return {"secure": found.secure, "client": found.client,
                "headers": sorted(k.lower() for k in request.headers)}

    return echo


def _post(port: int, headers: dict[str, str], context: ssl.SSLContext | None = None) -> Any:
    conn = (http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
            if context else http.client.HTTPConnection("127.0.0.1", port, timeout=10))
    try:
        conn.request("POST", "/", body=b"{}", headers={"Content-Type": "application/json",
                                                       **headers})
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[LocalServer, LocalServer, Path]]:
    plain = LocalServer(_echo_app(), "127.0.0.1", 0)
    files = local_certificates(tmp_path)
    tls = LocalServer(_echo_app(), "127.0.0.1", 0, tls=server_context(files))
    plain.start()
    tls.start()
    yield plain, tls, tmp_path / "tls" / "ca.pem"
    plain.stop()
    tls.stop()


def test_the_local_server_states_the_real_connection(
        servers: tuple[LocalServer, LocalServer, Path]) -> None:
    plain, tls, ca = servers
    spoof = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9",
             "Forwarded": "proto=https"}
    over_http = _post(plain.port, spoof)
    assert over_http["secure"] is False and over_http["client"] == "127.0.0.1"
    assert not {"x-forwarded-proto", "x-forwarded-for", "forwarded"} & set(
        over_http["headers"])
    over_tls = _post(tls.port, {"X-Forwarded-Proto": "http"},
                     ssl.create_default_context(cafile=str(ca)))
    assert over_tls["secure"] is True and over_tls["client"] == "127.0.0.1"


@pytest.mark.e2e
def test_over_http_the_real_server_denies_the_spoofed_tls_send(tmp_path: Path) -> None:
    server = launch(DMQ_DATA_DIR=str(tmp_path / "data"), DMQ_STORE="memory")
    try:
        assert server.wait_ready(START_TIMEOUT_S), server.output

        def sqs(key: str) -> Any:
            return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                                aws_access_key_id=key, aws_secret_access_key="s",
                                config=Config(retries={"total_max_attempts": 1}))

        url = _tls_only_queue(sqs(OWNER))
        for spoof in SPOOFS:
            with pytest.raises(ClientError) as denied:
                _with_headers(sqs(SENDER), spoof).send_message(QueueUrl=url, MessageBody="x")
            assert denied.value.response["Error"]["Code"] == "AccessDenied"
    finally:
        assert server.stop(STOP_TIMEOUT_S) == 0, server.output
