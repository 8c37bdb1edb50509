"""SigV4 verification without a server: botocore signs, DMQ's verifier recomputes; odd
input is an SQS error, never an exception of another kind."""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from chalicelib.encryption.secret_cipher import LocalCipher
from chalicelib.frontend.authn import authenticate
from chalicelib.frontend.sigv4 import SignedRequest, check_time, parse, verify
from chalicelib.service.exceptions import (
    IncompleteSignatureError,
    InvalidClientTokenIdError,
    RequestExpiredError,
    SignatureDoesNotMatchError,
)
from chalicelib.service.identity import CACHE_LIMIT, Identities
from tests.admin_signing import sign
from tests.clocks import FakeClock

KEY, SECRET = "AKIAUNITUNITUNITUNIT", "unit-secret"
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5)


class _NoKeys:
    """A key store that holds nothing (the configured root is served from settings)."""

    def get(self, access_key_id: str) -> None:
        return None


def _identities() -> Identities:
    return Identities(_NoKeys(), LocalCipher(None), FakeClock(), "required",  # type: ignore[arg-type]
                      "000000000000", (KEY, SECRET), 0.0)


def _signed(body: bytes = b"Action=ListQueues", query: str = "", presign_s: int | None = None,
            key: str = KEY) -> SignedRequest:
    url = "http://dmq.test/" + (f"?{query}" if query else "")
    method, data = ("POST", body) if presign_s is None else ("GET", b"")
    signed = sign(method, url, data, {"Content-Type": "application/x-www-form-urlencoded"},
                  key=key, secret=SECRET, service="sqs", when=NOW, presign_s=presign_s)
    headers = {k.lower(): v for k, v in signed.headers.items()}
    pairs = parse_qsl(urlsplit(signed.url).query, keep_blank_values=True)
    return SignedRequest(method, "/", pairs, headers, data)


def _now() -> float:
    return NOW.replace(tzinfo=datetime.UTC).timestamp()


def test_a_botocore_signature_verifies_and_a_changed_one_does_not() -> None:
    request = _signed()
    caller = authenticate(_identities(), request, now=_now)
    assert (caller.account, caller.admin) == ("000000000000", True)
    changed = SignedRequest(request.method, request.path, request.query, request.headers,
                            b"Action=DeleteQueue")
    with pytest.raises(SignatureDoesNotMatchError):
        authenticate(_identities(), changed, now=_now)


def test_presigned_query_form_verifies() -> None:
    request = _signed(query="Action=ListQueues&QueueNamePrefix=a%20b", presign_s=30)
    signature = parse(request)
    assert signature is not None and signature.presigned and signature.expires_s == 30
    verify(request, signature, SECRET, now=_now)
    with pytest.raises(RequestExpiredError):
        verify(request, signature, SECRET, now=lambda: _now() + 31)


@pytest.mark.parametrize("key", ["AKIAÜNÏCÖDE", "ключ", "\x00"])
def test_odd_access_key_ids_are_invalid_client_token_id(key: str) -> None:
    request = _signed(key=key.encode("utf-8").decode("latin-1"))
    with pytest.raises(InvalidClientTokenIdError):
        authenticate(_identities(), request, now=_now)


@pytest.mark.parametrize("expires", ["²", "-1", "0", "604801", "1e3", ""])
def test_odd_expiry_is_incomplete_signature(expires: str) -> None:
    request = _signed(query="Action=ListQueues", presign_s=30)
    query = [(k, expires if k == "X-Amz-Expires" else v) for k, v in request.query]
    with pytest.raises(IncompleteSignatureError):
        parse(SignedRequest(request.method, request.path, query, request.headers, b""))


FULLWIDTH_2026 = "\uff12\uff10\uff12\uff16"


@pytest.mark.parametrize("date", ["2026", "20261399T000000Z", FULLWIDTH_2026 + "0102T030405Z"])
def test_odd_dates_are_incomplete_signature(date: str) -> None:
    signature = parse(_signed())
    assert signature is not None
    odd: Any = signature.__class__(**{**signature.__dict__, "amz_date": date})
    with pytest.raises(IncompleteSignatureError):
        check_time(odd, _now())


def test_forged_key_ids_are_cached_briefly_and_the_cache_stays_bounded() -> None:
    reads: list[str] = []

    class _Counting(_NoKeys):
        def get(self, access_key_id: str) -> None:
            reads.append(access_key_id)

    identities = Identities(_Counting(), LocalCipher(None), FakeClock(),  # type: ignore[arg-type]
                            "required", "000000000000", (KEY, SECRET), 60.0)
    for _ in range(3):  # an unknown id is read once per cache period
        with pytest.raises(InvalidClientTokenIdError):
            identities.lookup("AKIAFORGED")
    assert reads == ["AKIAFORGED"]
    for number in range(CACHE_LIMIT + 5):
        with pytest.raises(InvalidClientTokenIdError):
            identities.lookup(f"AKIAFLOOD{number}")
    assert len(identities._cache) <= CACHE_LIMIT
