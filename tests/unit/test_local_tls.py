"""GIVEN the local server's TLS support WHEN it generates, reuses or is given a certificate
THEN the CA file verifies the server for 127.0.0.1 and localhost, the key stays private,
files are reused until near expiry, and a client that does not trust the CA, or speaks plain
HTTP, is refused without stopping the server."""

from __future__ import annotations

import datetime
import http.client
import json
import socket
import ssl
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from chalice import Chalice
from cryptography import x509

from dmqlocal.server import HttpLimits, LocalServer
from dmqlocal.tls import (
    RENEW_BEFORE,
    SERVER_DAYS,
    TlsConfigurationError,
    given_certificates,
    local_certificates,
    server_context,
)


def _app() -> Chalice:
    app = Chalice(app_name="tls-test")

    @app.route("/", methods=["POST"], content_types=["application/x-amz-json-1.0"])
    def echo() -> dict[str, str]:
        request = app.current_request
        assert request is not None
        return {"proto": request.headers.get("x-forwarded-proto", "")}

    return app


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def server(tls_dir: Path) -> Iterator[LocalServer]:
    files = local_certificates(tls_dir)
    local = LocalServer(_app(), "127.0.0.1", 0,
                        limits=HttpLimits(idle_timeout_s=2.0, request_timeout_s=1.0),
                        tls=server_context(files))
    local.start()
    yield local
    local.stop()


def _post(host: str, port: int, context: ssl.SSLContext) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPSConnection(host, port, context=context, timeout=5)
    try:
        conn.request("POST", "/", body=b"{}",
                     headers={"Content-Type": "application/x-amz-json-1.0"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_generated_files_are_under_the_data_folder_and_the_key_is_private(
        tls_dir: Path, server: LocalServer) -> None:
    files = local_certificates(tls_dir)
    assert files.ca == tls_dir / "tls" / "ca.pem"
    assert files.cert == tls_dir / "tls" / "server.pem"
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert {str(a) for a in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())  # type: ignore[union-attr]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True


def test_the_files_are_reused_while_valid(tls_dir: Path, server: LocalServer) -> None:
    before = {p.name: p.read_bytes() for p in (tls_dir / "tls").iterdir()}
    local_certificates(tls_dir)
    assert {p.name: p.read_bytes() for p in (tls_dir / "tls").iterdir()} == before


def test_a_certificate_near_expiry_or_a_mismatched_key_is_made_again(tmp_path: Path) -> None:
    first = local_certificates(tmp_path)
    ca_before = first.ca.read_bytes()  # type: ignore[union-attr]
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=SERVER_DAYS)
    local_certificates(tmp_path, now=later - RENEW_BEFORE + datetime.timedelta(hours=1))
    assert first.ca.read_bytes() != ca_before  # type: ignore[union-attr]
    # A crash between writes: the key of one generation beside the certificate of another.
    key_before = first.key.read_bytes()
    other = local_certificates(tmp_path / "other")
    first.key.write_bytes(other.key.read_bytes())
    local_certificates(tmp_path)
    assert first.key.read_bytes() not in (key_before, other.key.read_bytes())
    server_context(first)  # the pair matches again


def test_a_client_trusting_the_ca_reaches_the_server_by_ip_and_by_name(
        tls_dir: Path, server: LocalServer) -> None:
    assert server.url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=str(tls_dir / "tls" / "ca.pem"))
    for host in ("127.0.0.1", "localhost"):
        status, body = _post(host, server.port, context)
        assert (status, body) == (200, {"proto": "https"})


def test_an_untrusting_client_and_a_plain_http_client_are_refused_and_the_server_goes_on(
        tls_dir: Path, server: LocalServer) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _post("127.0.0.1", server.port, ssl.create_default_context())
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        assert sock.recv(1024) == b""  # not a TLS handshake: closed without an answer
    context = ssl.create_default_context(cafile=str(tls_dir / "tls" / "ca.pem"))
    assert _post("127.0.0.1", server.port, context)[0] == 200


def test_a_silent_client_is_dropped_after_the_request_time_limit(server: LocalServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        assert sock.recv(1024) == b""  # no handshake within 1 s: closed


def test_a_given_certificate_needs_both_files_that_exist(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigurationError, match="both"):
        given_certificates(str(tmp_path / "cert.pem"), "")
    with pytest.raises(TlsConfigurationError, match="no such file"):
        given_certificates(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    files = given_certificates(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    with pytest.raises(TlsConfigurationError, match="cannot use the certificate"):
        server_context(files)


def test_a_badly_framed_request_over_tls_still_gets_its_sqs_error(
        tls_dir: Path, server: LocalServer) -> None:
    context = ssl.create_default_context(cafile=str(tls_dir / "tls" / "ca.pem"))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                     b"Content-Length: 2\r\n\r\n{}")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"Connection: close" in head
    assert json.loads(body)["__type"].startswith("com.amazonaws.sqs#")


def test_requests_sent_together_over_tls_are_all_answered(
        tls_dir: Path, server: LocalServer) -> None:
    # One TLS record carries the end of the first request and all of the second: once
    # the first is read, the second is decrypted already and the socket shows nothing.
    def request(body: bytes) -> bytes:
        return (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    context = ssl.create_default_context(cafile=str(tls_dir / "tls" / "ca.pem"))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        for size in (10_000, 9_000, 2):
            sock.sendall(request(b" " * (size - 2) + b"{}") + request(b"{}"))
            answers = b""
            while answers.count(b"HTTP/1.1 200 ") < 2:
                chunk = sock.recv(4096)
                assert chunk, f"closed after {answers!r}"
                answers += chunk
