"""Who is asking and where: account, region (from SigV4) and the base URL for queue URLs."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from chalicelib.service.exceptions import QueueDoesNotExistError, SignatureDoesNotMatchError
from chalicelib.service.identity import Caller

_CREDENTIAL = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
# What a queue name and an account id can be; anything else names no queue, and is never
# looked up (DynamoDB refuses keys over 2 KB: a huge name would be a store fault, a 503).
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}(\.fifo)?")
_ACCOUNT = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The SDKs' amz-sdk-invocation-id is a UUID; anything else is not one of theirs.
_INVOCATION_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
MAX_QUEUE_NAME = 85


@dataclass(frozen=True)
class RequestContext:
    """The caller's account, the request's region and the URL it reached DMQ at."""

    account: str
    region: str
    base_url: str
    # The X-Ray trace header (X-Amzn-Trace-Id) the request came with, if any.
    trace_header: str | None = None
    # The authenticated caller (None: not authenticated, e.g. DMQ's own work).
    caller: Caller | None = None
    # The SDK's amz-sdk-invocation-id: the same across the retries of one call (request
    # deduplication of sends to standard queues, docs/request-dedup.md).
    invocation_id: str | None = None

    def queue_url(self, account: str, name: str) -> str:
        """`<scheme>://<host>/<account>/<name>`."""
        return f"{self.base_url}/{account}/{name}"


def region_from_headers(headers: Mapping[str, str], default: str) -> str:
    """The region in the SigV4 credential scope, or the default when unsigned."""
    match = _CREDENTIAL.search(headers.get("authorization", ""))
    return match.group(1) if match else default


def check_signed_region(region: str, served: Collection[str]) -> None:
    """A request signed for a region must be signed for one this deployment serves (an
    unsigned request, region "", goes to the default region). Otherwise it is refused as
    AWS refuses a credential scoped to a region the endpoint does not serve, rather than
    served somewhere the caller did not ask for."""
    if region and region not in served:
        raise SignatureDoesNotMatchError(
            f"Credential should be scoped to a valid region, not '{region}'. This DMQ "
            f"serves {', '.join(served)} (DMQ_REGIONS)."
        )


def trace_header_from_headers(headers: Mapping[str, str]) -> str | None:
    """The X-Amzn-Trace-Id header (headers given with lower-case names), if non-empty."""
    value = headers.get("x-amzn-trace-id", "").strip()
    return value or None


def context_from_headers(headers: Mapping[str, str], account: str, region: str,
                         caller: Caller | None = None, secure: bool = False) -> RequestContext:
    """The context of a request (headers with lower-case names) to a deployment whose
    account and default region are given: the same for every protocol. With a caller,
    the account is the caller's (from its credential, never from the URL). `secure` says
    the request came over TLS, as its transport establishes it (`transport.py`), never
    as a header of the client's says."""
    return RequestContext(
        account=caller.account if caller is not None else account,
        region=region_from_headers(headers, region),
        base_url=base_url_from_headers(headers, secure),
        trace_header=trace_header_from_headers(headers),
        caller=caller,
        invocation_id=invocation_id_from_headers(headers),
    )


def invocation_id_from_headers(headers: Mapping[str, str]) -> str | None:
    """The amz-sdk-invocation-id header (lower-case names), if shaped as the SDKs send it."""
    value = headers.get("amz-sdk-invocation-id", "").strip()
    return value if _INVOCATION_ID.fullmatch(value) else None


def base_url_from_headers(headers: Mapping[str, str], secure: bool = False) -> str:
    """Scheme (https when the transport is TLS) and host the client used."""
    host = headers.get("host", "localhost")
    return f"{'https' if secure else 'http'}://{host}"


def could_be_queue(account: str, name: str) -> bool:
    """True when an account id and a queue name are shaped as they can be."""
    return bool(_ACCOUNT.fullmatch(account) and _QUEUE_NAME.fullmatch(name))


def parse_queue_url(url: str) -> tuple[str, str]:
    """(account, name) from a queue URL; anything else is QueueDoesNotExist."""
    try:
        path = urlparse(url).path if "://" in url else url
    except ValueError as exc:  # e.g. a malformed IPv6 host
        raise QueueDoesNotExistError() from exc
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2 or not could_be_queue(parts[-2], parts[-1]):
        raise QueueDoesNotExistError()
    return parts[-2], parts[-1]
