"""GIVEN push subscriptions whose endpoints an attacker chooses
WHEN they name DMQ's own port, the store's, the cloud's metadata service or a private
network, resolve to one of those after the check (DNS rebinding), or answer with a redirect
THEN creating them is refused with a clear error, delivery refuses them too, the connection
goes to the address that was checked (TLS still verified for the name), and a redirect is a
failed delivery that is never followed."""

from __future__ import annotations

import functools
import http.server
import json
import re
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chalice.test import Client

from chalicelib.push import endpoint as push_http
from chalicelib.push import targets
from chalicelib.push.destinations import DestinationPolicy
from chalicelib.settings import ConfigurationError, Settings
from dmqlocal.tls import local_certificates, server_context
from tests.admin_signing import admin_call

ACCOUNT = "000000000000"
LOOPBACK = DestinationPolicy.of(["127.0.0.0/8", "::1/128"])
EVENT = {"Records": [{"messageId": "m1", "body": "x"}]}


class _Receiver(http.server.BaseHTTPRequestHandler):
    """Records each request (path and Host) and answers as told."""

    seen: list[tuple[str, str, str]]
    answer: tuple[int, dict[str, str]] = (200, {})

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).seen.append((self.command, self.path, self.headers.get("Host", "")))
        status, headers = type(self).answer
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET = _record

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[int, type[_Receiver]]]:
    """A loopback HTTP endpoint (its port and its handler class, which records)."""
    handler = type("Receiver", (_Receiver,), {"seen": [], "answer": (200, {})})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1]), handler
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


# -- the policy ------------------------------------------------------------------------------
@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.255.0.9", "::1", "0.0.0.0", "::",
    "169.254.169.254", "fd00:ec2::254", "fe80::1%eth0",
    "10.0.0.5", "172.16.3.4", "192.168.1.1", "100.64.0.1", "fc00::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::", "224.0.0.251",
    "255.255.255.255", "198.18.0.1"])
def test_non_public_addresses_are_refused_by_default(address: str) -> None:
    why = DestinationPolicy().refusal(address)
    assert why is not None and "DMQ_PUSH_ALLOWED_NETWORKS" in why


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert DestinationPolicy().refusal(address) is None


def test_the_operator_allows_networks_explicitly() -> None:
    policy = DestinationPolicy.of(["127.0.0.0/8", "10.1.0.0/16"])
    assert policy.refusal("127.0.0.1") is None and policy.refusal("10.1.2.3") is None
    assert policy.refusal("::ffff:127.0.0.1") is None  # the IPv4 address it reaches
    assert policy.refusal("10.2.0.1") is not None and policy.refusal("169.254.169.254")


def test_the_allowed_networks_setting_is_parsed_and_checked() -> None:
    settings = Settings.from_env({"DMQ_PUSH_ALLOWED_NETWORKS": "127.0.0.0/8, ::1"})
    assert settings.push_allowed_networks == ("127.0.0.0/8", "::1")
    assert Settings.from_env({}).push_allowed_networks == ()
    with pytest.raises(ConfigurationError, match="DMQ_PUSH_ALLOWED_NETWORKS"):
        Settings.from_env({"DMQ_PUSH_ALLOWED_NETWORKS": "localhost"})


# -- at subscription time ---------------------------------------------------------------------
def _subscribe(dmq: Client, endpoint: str) -> Any:
    return admin_call(dmq, "POST", f"/admin/queues/{ACCOUNT}/hooked/subscriptions",
                      json.dumps({"Endpoint": endpoint}).encode())


@pytest.mark.parametrize("endpoint", [
    "http://127.0.0.1:9324/", "http://localhost:8000/hook", "http://[::1]:8000/",
    "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/",
    "https://10.0.0.8/hook", "http://0.0.0.0:9324/", "http://[::ffff:127.0.0.1]:8000/"])
def test_subscribing_an_internal_endpoint_is_refused_with_a_clear_error(
        sqs: Any, dmq: Client, endpoint: str) -> None:
    sqs.create_queue(QueueName="hooked")
    response = _subscribe(dmq, endpoint)
    assert response.status_code == 400, response.body
    assert response.json_body["code"] == "InvalidParameterValue"
    message = response.json_body["message"]
    assert "not allowed" in message and "DMQ_PUSH_ALLOWED_NETWORKS" in message
    listed = admin_call(dmq, "GET", f"/admin/queues/{ACCOUNT}/hooked/subscriptions").json_body
    assert listed["subscriptions"] == []


@pytest.mark.parametrize("settings", [
    Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
             push_allowed_networks=("127.0.0.0/8",))])
def test_an_allowed_network_can_be_subscribed(sqs: Any, dmq: Client) -> None:
    sqs.create_queue(QueueName="hooked")
    assert _subscribe(dmq, "http://127.0.0.1:8000/hook").status_code == 200
    assert _subscribe(dmq, "http://169.254.169.254/").status_code == 400  # not that one


def test_a_public_or_unresolvable_name_can_be_subscribed(sqs: Any, dmq: Client) -> None:
    # A name that does not resolve now is checked again at each delivery.
    sqs.create_queue(QueueName="hooked")
    assert _subscribe(dmq, "https://hooks.example.invalid/orders").status_code == 200


# -- at delivery time ---------------------------------------------------------------------------
def test_delivery_refuses_an_internal_endpoint_and_never_connects(
        receiver: tuple[int, type[_Receiver]]) -> None:
    # GIVEN an endpoint on loopback (as one subscribed before the policy, or whose name
    # now resolves there) WHEN a batch is delivered under the default policy
    port, handler = receiver
    got = targets.call_endpoint(f"http://127.0.0.1:{port}/hook", EVENT, 5, DestinationPolicy())
    # THEN the batch fails, saying why, and nothing reached the endpoint
    assert not got.ok and "destination refused" in (got.error or "")
    assert handler.seen == []


def test_a_name_is_resolved_once_and_the_checked_address_is_connected_to(
        receiver: tuple[int, type[_Receiver]], monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a name whose first answer is allowed and whose later answers would point at the
    # metadata service (DNS rebinding)
    port, handler = receiver
    lookups: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":  # an address literal stays itself
            return real(host, *args, **kwargs)
        lookups.append(host)
        target = "127.0.0.1" if len(lookups) == 1 else "169.254.169.254"
        return real(target, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    # WHEN a batch is delivered
    got = targets.call_endpoint(f"http://rebind.test:{port}/hook?x=1", EVENT, 5, LOOPBACK)
    # THEN it went to the address checked, named by its host, after a single lookup
    assert got.ok, got.error
    assert lookups == ["rebind.test"]
    assert handler.seen == [("POST", "/hook?x=1", f"rebind.test:{port}")]


def test_a_name_with_one_internal_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 80)),
               (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", 80))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: answers)
    with pytest.raises(push_http.DestinationRefusedError,
                       match=re.escape("mixed.test resolves to 10.0.0.1")):
        push_http.checked_addresses("mixed.test", 80, DestinationPolicy())


@pytest.mark.parametrize("location", ["ftp://127.0.0.1/x", "/elsewhere",
                                      "http://169.254.169.254/latest/meta-data/"])
def test_a_redirect_fails_the_batch_and_is_never_followed(
        receiver: tuple[int, type[_Receiver]], location: str) -> None:
    port, handler = receiver
    handler.answer = (302, {"Location": location})
    got = targets.call_endpoint(f"http://127.0.0.1:{port}/hook", EVENT, 5, LOOPBACK)
    assert not got.ok and "HTTP 302" in (got.error or "") and "redirect" in (got.error or "")
    assert [path for _, path, _ in handler.seen] == ["/hook"]  # nothing else was asked


def test_tls_is_verified_for_the_name_and_sends_it_as_sni_and_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an HTTPS endpoint for "localhost" whose CA the process trusts
    files = local_certificates(tmp_path)
    # The process trusts the test CA: given to the default context directly, since OpenSSL
    # may have read SSL_CERT_FILE before (another test in the same process).
    trusting = functools.partial(ssl.create_default_context, cafile=str(files.ca))
    monkeypatch.setattr(push_http.ssl, "create_default_context", trusting)
    handler = type("Receiver", (_Receiver,), {"seen": [], "answer": (200, {})})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = server_context(files)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment]
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = int(server.server_address[1])
    try:
        # WHEN a batch is delivered by name THEN it arrives, SNI and Host naming the host
        got = targets.call_endpoint(f"https://localhost:{port}/tls", EVENT, 5, LOOPBACK)
        assert got.ok, got.error
        assert names == ["localhost"] and handler.seen == [("POST", "/tls", f"localhost:{port}")]
        # AND by an address the certificate does not name, verification fails the batch
        real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: real(
            "127.0.0.1" if host == "other.test" else host, *a, **k))
        bad = targets.call_endpoint(f"https://other.test:{port}/tls", EVENT, 5, LOOPBACK)
        assert not bad.ok and len(handler.seen) == 1
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_tls_context_verifies_certificates() -> None:
    context = push_http._PinnedHTTPS("h", 443, "127.0.0.1", 1)._tls
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
