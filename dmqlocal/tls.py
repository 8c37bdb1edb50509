"""HTTPS for the local server: a generated certificate authority and server certificate
(kept under the data folder and reused), or a certificate and key the user gives.

The generated CA signs one server certificate for `localhost`, `127.0.0.1` and `::1`.
Clients trust the CA file (boto3 `verify=`, the AWS CLI `--ca-bundle`, `AWS_CA_BUNDLE`).
The CA's private key is never written: when the server certificate nears its expiry, both
are generated again, and clients take the new CA file.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

TLS_FOLDER = "tls"
CA_FILE = "ca.pem"
CERT_FILE = "server.pem"
KEY_FILE = "server-key.pem"
CA_DAYS = 3650
SERVER_DAYS = 397  # what browsers accept for a server certificate
RENEW_BEFORE = datetime.timedelta(days=7)
DNS_NAMES = ("localhost",)
IP_ADDRESSES = ("127.0.0.1", "::1")


class TlsConfigurationError(Exception):
    """The certificate or key cannot be used; the message says which and why."""


@dataclass(frozen=True)
class TlsFiles:
    """Where the server's certificate chain and key are, and the CA clients should trust
    (None for a given certificate: its issuer is the user's to know)."""

    cert: Path
    key: Path
    ca: Path | None = None
    generated: bool = False


def local_certificates(data_dir: Path, now: datetime.datetime | None = None) -> TlsFiles:
    """The generated CA and server certificate under `<data_dir>/tls`, made on first use
    and made again when missing, unreadable or expiring within a week."""
    folder = data_dir / TLS_FOLDER
    files = TlsFiles(folder / CERT_FILE, folder / KEY_FILE, folder / CA_FILE, generated=True)
    now = now or datetime.datetime.now(datetime.UTC)
    if not _still_good(files, now):
        _generate(files, now)
    return files


def given_certificates(cert: str, key: str) -> TlsFiles:
    """A certificate (chain) and key the user gives; both must exist."""
    if not cert or not key:
        raise TlsConfigurationError(
            "give both a certificate and its key (--tls-cert and --tls-key, or DMQ_TLS_CERT "
            "and DMQ_TLS_KEY), or neither to use a generated one")
    for path in (cert, key):
        if not Path(path).is_file():
            raise TlsConfigurationError(f"{path}: no such file")
    return TlsFiles(Path(cert), Path(key))


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """A server-side context (TLS 1.2 or later) holding the certificate and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(files.cert), str(files.key))
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigurationError(
            f"cannot use the certificate {files.cert} with the key {files.key}: {exc}"
        ) from exc
    return context


def _still_good(files: TlsFiles, now: datetime.datetime) -> bool:
    """True when all three files are there, the key is the certificate's, the CA signed
    the certificate, and both are valid for more than a week."""
    try:
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        ca = x509.load_pem_x509_certificate(files.ca.read_bytes()) if files.ca else None
        key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
        if ca is None or key.public_key() != cert.public_key():
            return False
        cert.verify_directly_issued_by(ca)  # a crash between two writes leaves a mismatch
    except (OSError, ValueError, TypeError, InvalidSignature):
        return False
    return min(cert.not_valid_after_utc, ca.not_valid_after_utc) - RENEW_BEFORE > now


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "DMQ local"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _generate(files: TlsFiles, now: datetime.datetime) -> None:
    """A new CA and a server certificate it signs; the key files readable by the owner only."""
    assert files.ca is not None
    files.cert.parent.mkdir(parents=True, exist_ok=True)
    start = now - datetime.timedelta(minutes=5)  # a client clock slightly behind still agrees
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("DMQ local CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in DNS_NAMES]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in IP_ADDRESSES]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost")).issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(now + datetime.timedelta(days=SERVER_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write(files.key, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()), private=True)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
    _write(files.ca, ca_cert.public_bytes(serialization.Encoding.PEM))


def _write(path: Path, data: bytes, private: bool = False) -> None:
    """Write through a temporary file and rename, so a crash leaves the old file or the new."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)
