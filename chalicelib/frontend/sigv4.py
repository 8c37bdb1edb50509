"""SigV4 verification of an incoming request, header form and query-string (presigned) form.

The canonical request, the string to sign and the signature are computed by botocore's own
`SigV4Auth` (with the signed headers, date and payload hash the request names), and the
signature is compared in constant time. Errors are SQS's: IncompleteSignature for a
signature missing a part, RequestExpired for a date outside the allowed skew or a presigned
URL past its expiry, SignatureDoesNotMatch when the signature does not hold.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials
from botocore.utils import percent_encode

from chalicelib.service.exceptions import (
    IncompleteSignatureError,
    RequestExpiredError,
    SignatureDoesNotMatchError,
)
from chalicelib.service.identity import SIGNATURE_MISMATCH

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_S = 300  # 5 minutes each way
MAX_EXPIRES_S = 604_800  # a presigned URL lives at most 7 days
AMZ_DATE = "%Y%m%dT%H%M%SZ"
_AMZ_DATE = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_AUTH_PART = re.compile(r"\s*([A-Za-z]+)=([^,\s]*)\s*,?")
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class SignedRequest:
    """What signature verification reads of an HTTP request (header names lower-case, the
    query string decoded into pairs)."""

    method: str
    path: str
    query: Sequence[tuple[str, str]]
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Signature:
    """The parts of a SigV4 signature the request carries."""

    access_key_id: str
    date: str  # YYYYMMDD of the credential scope
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    amz_date: str
    presigned: bool
    expires_s: int | None = None


def _query(request: SignedRequest) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in request.query:
        found.setdefault(key, value)
    return found


def is_signed(request: SignedRequest) -> bool:
    """True when the request carries a signature of either form (complete or not)."""
    return "authorization" in request.headers or "X-Amz-Signature" in _query(request) or (
        "X-Amz-Credential" in _query(request))


def access_key_of(request: SignedRequest) -> str | None:
    """The access key id the request names, read leniently (the open mode's tenant)."""
    credential = _query(request).get("X-Amz-Credential")
    if credential is None:
        match = re.search(r"Credential=([^/,\s]*)", request.headers.get("authorization", ""))
        credential = match.group(1) if match else None
    return credential.split("/", 1)[0] if credential else None


def _scope(credential: str, where: str) -> tuple[str, str, str, str]:
    parts = credential.split("/")
    if len(parts) != 5 or not all(parts) or parts[4] != "aws4_request":
        raise IncompleteSignatureError(
            f"{where} Credential is malformed: it is <access key id>/<date>/<region>/"
            f"<service>/aws4_request, not '{credential}'.")
    return parts[0], parts[1], parts[2], parts[3]


def _header_signature(request: SignedRequest) -> Signature:
    header = request.headers["authorization"].strip()
    algorithm, _, rest = header.partition(" ")
    if algorithm != ALGORITHM:
        raise IncompleteSignatureError(f"Unsupported AWS 'algorithm': '{algorithm}'.")
    parts = {k: v for k, v in _AUTH_PART.findall(rest)}
    missing = [f"Authorization header requires '{name}' parameter."
               for name in ("Credential", "Signature", "SignedHeaders") if not parts.get(name)]
    amz_date = request.headers.get("x-amz-date", "")
    if not amz_date:
        missing.append("Authorization header requires existence of either a 'X-Amz-Date' "
                       "or a 'Date' header.")
    if missing:
        raise IncompleteSignatureError(" ".join(missing) + f" Authorization={header}")
    key, date, region, service = _scope(parts["Credential"], "Authorization header")
    return Signature(key, date, region, service, tuple(parts["SignedHeaders"].split(";")),
                     parts["Signature"], amz_date, presigned=False)


def _query_signature(request: SignedRequest) -> Signature:
    query = _query(request)
    names = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-SignedHeaders",
             "X-Amz-Date", "X-Amz-Expires")
    missing = [name for name in names if not query.get(name)]
    if missing:
        raise IncompleteSignatureError(
            "AWS query-string parameters must include " +
            ", ".join(f"'{name}'" for name in missing) + ". Re-examine the query-string "
            "parameters.")
    if query["X-Amz-Algorithm"] != ALGORITHM:
        raise IncompleteSignatureError(
            f"Unsupported AWS 'algorithm': '{query['X-Amz-Algorithm']}'.")
    expires = query["X-Amz-Expires"]
    if not (expires.isascii() and expires.isdigit()) or not 0 < int(expires) <= MAX_EXPIRES_S:
        raise IncompleteSignatureError(
            f"X-Amz-Expires must be from 1 to {MAX_EXPIRES_S} seconds, not '{expires}'.")
    key, date, region, service = _scope(query["X-Amz-Credential"], "X-Amz-Credential")
    return Signature(key, date, region, service,
                     tuple(query["X-Amz-SignedHeaders"].split(";")), query["X-Amz-Signature"],
                     query["X-Amz-Date"], presigned=True, expires_s=int(expires))


def parse(request: SignedRequest) -> Signature | None:
    """The request's signature (None when unsigned); IncompleteSignature when a part SigV4
    needs is missing."""
    if "authorization" in request.headers:
        return _header_signature(request)
    if "X-Amz-Signature" in _query(request) or "X-Amz-Credential" in _query(request):
        return _query_signature(request)
    return None


def _epoch(amz_date: str) -> int:
    if not _AMZ_DATE.fullmatch(amz_date):
        raise IncompleteSignatureError(
            f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'. See "
            "http://en.wikipedia.org/wiki/ISO_8601")
    try:
        return calendar.timegm(time.strptime(amz_date, AMZ_DATE))
    except ValueError as exc:
        raise IncompleteSignatureError(
            f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'.") from exc


def _stamp(epoch: float) -> str:
    return time.strftime(AMZ_DATE, time.gmtime(epoch))


def check_time(signature: Signature, now: float) -> None:
    """The request's date must be within 5 minutes of now; a presigned URL must also be
    within its X-Amz-Expires."""
    signed_at = _epoch(signature.amz_date)
    if signature.presigned and signature.expires_s is not None:
        if now > signed_at + signature.expires_s:
            raise RequestExpiredError(
                f"Request has expired. X-Amz-Date {signature.amz_date} with X-Amz-Expires "
                f"{signature.expires_s} ended at {_stamp(signed_at + signature.expires_s)}; "
                f"it is now {_stamp(now)}.")
        if signed_at > now + MAX_SKEW_S:
            raise RequestExpiredError(
                f"Signature not yet current: {signature.amz_date} is still later than "
                f"{_stamp(now + MAX_SKEW_S)} ({_stamp(now)} + 5 min.)")
        return
    if signed_at < now - MAX_SKEW_S:
        raise RequestExpiredError(
            f"Signature expired: {signature.amz_date} is now earlier than "
            f"{_stamp(now - MAX_SKEW_S)} ({_stamp(now)} - 5 min.)")
    if signed_at > now + MAX_SKEW_S:
        raise RequestExpiredError(
            f"Signature not yet current: {signature.amz_date} is still later than "
            f"{_stamp(now + MAX_SKEW_S)} ({_stamp(now)} + 5 min.)")


class _Verifier(SigV4Auth):
    """botocore's SigV4 with what the incoming request names: its signed headers, its
    query string (less X-Amz-Signature) and the hash of the body it carries."""

    def __init__(self, secret: str, signature: Signature, request: SignedRequest) -> None:
        super().__init__(Credentials(signature.access_key_id, secret), signature.service,
                         signature.region)
        self._signature = signature
        self._request = request

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        headers = HTTPHeaders()
        for name in self._signature.signed_headers:
            if name in self._request.headers:  # a signed header the request lacks: no match
                headers[name] = self._request.headers[name]
        return headers

    def canonical_query_string(self, request: AWSRequest) -> str:
        pairs = sorted((percent_encode(k), percent_encode(v)) for k, v in self._request.query
                       if k != "X-Amz-Signature")
        return "&".join(f"{k}={v}" for k, v in pairs)

    def payload(self, request: AWSRequest) -> str:
        return hashlib.sha256(self._request.body).hexdigest() if self._request.body else (
            EMPTY_SHA256)


def expected_signature(request: SignedRequest, signature: Signature, secret: str) -> str:
    """The signature the request should carry, computed by botocore's SigV4 code."""
    stated = request.headers.get("x-amz-content-sha256")
    headers = {"X-Amz-Content-SHA256": stated} if stated is not None else {}
    host = request.headers.get("host", "localhost")
    url = "http://" + host + quote(request.path, safe="/~")
    aws_request = AWSRequest(method=request.method.upper(), url=url, headers=headers)
    aws_request.context["timestamp"] = signature.amz_date
    verifier = _Verifier(secret, signature, request)
    canonical = verifier.canonical_request(aws_request)
    return str(verifier.signature(verifier.string_to_sign(aws_request, canonical), aws_request))


def check_payload_hash(request: SignedRequest) -> None:
    """A request that states its body's SHA-256 (x-amz-content-sha256) must carry that
    body; the signature covers the stated hash."""
    stated = request.headers.get("x-amz-content-sha256")
    if stated is None:
        return
    actual = hashlib.sha256(request.body).hexdigest()
    if not hmac.compare_digest(stated.lower().encode(), actual.encode()):
        raise SignatureDoesNotMatchError(
            "The provided 'x-amz-content-sha256' header does not match what was computed.")


def wall_clock() -> float:
    """Now, in epoch seconds: signatures are dated by the wall clock."""
    return time.time()


def verify(request: SignedRequest, signature: Signature, secret: str,
           now: Callable[[], float] | None = None) -> None:
    """Raise the SQS error a bad signature gets: RequestExpired, SignatureDoesNotMatch."""
    check_time(signature, (now or wall_clock)())
    if "host" not in signature.signed_headers:
        raise SignatureDoesNotMatchError(
            "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
    if signature.date != signature.amz_date[:8]:
        raise SignatureDoesNotMatchError(
            f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
            f"date from HTTP: '{signature.date}' != '{signature.amz_date[:8]}', from "
            f"ISO-8601 string '{signature.amz_date}'.")
    check_payload_hash(request)
    expected = expected_signature(request, signature, secret)
    if not hmac.compare_digest(expected.encode(), signature.signature.encode()):
        raise SignatureDoesNotMatchError(SIGNATURE_MISMATCH)
