"""Who is asking and where: account, region (from SigV4) and the base URL for queue URLs.

Queue URLs name the queue's region when it is not the server's own (`DMQ_REGION`):
`<base>/queue/<region>/<account>/<name>`, LocalStack's path style, which every QueueUrl
parser and the routes read; unless the base names that region already (DMQ_PUBLIC_URL's
`{region}`, a regional host). The server's own region keeps `<base>/<account>/<name>`, and
that form still names the region a request is signed for, so URLs given out before stay
good."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cached_property

from chalicelib.domain.queues import QueueRecord
from chalicelib.frontend.queue_urls import QueueTarget, could_be_queue, is_region, region_of_base
from chalicelib.service.exceptions import QueueDoesNotExistError, SignatureDoesNotMatchError
from chalicelib.service.identity import Caller

__all__ = ["RequestContext", "context_from_headers", "could_be_queue", "region_from_headers"]

# The region of the credential scope, whatever it holds (its shape is checked apart).
_CREDENTIAL = re.compile(r"Credential=[^/,\s]+/\d{8}/([^/,\s]*)/")
# The SDKs' amz-sdk-invocation-id is a UUID; anything else is not one of theirs.
_INVOCATION_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
MAX_QUEUE_NAME = 85
# A Host header DMQ puts into the queue URLs it returns: a name or an address, a port.
_HOST = re.compile(r"(?:[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")


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
    # The queue the request's QueueUrl names, parsed once by the protocol adapter (None:
    # it names none, or none well; `queue_parts` then refuses it).
    queue: QueueTarget | None = None
    # The record of that queue, once routing looked it up (`looked_up`; None: there is no
    # such queue), so that the action does not look it up again.
    queue_record: QueueRecord | None = None
    looked_up: bool = False
    # The server's own region (DMQ_REGION), whose queue URLs need not name it ("": none
    # to tell apart).
    home_region: str = ""

    def queue_url(self, account: str, name: str) -> str:
        """`<scheme>://<host>/<account>/<name>`, or `<scheme>://<host>/queue/<region>/
        <account>/<name>` for a queue of another region than the server's."""
        if self.url_region:
            return f"{self.base_url}/queue/{self.url_region}/{account}/{name}"
        return f"{self.base_url}/{account}/{name}"

    @cached_property
    def url_region(self) -> str | None:
        """The region the queue URLs it returns name in their path: the request's, unless
        their base names it already, or names none and it is the server's own."""
        said = region_of_base(self.base_url)
        if said == self.region or (said is None and self.region == (self.home_region
                                                                    or self.region)):
            return None
        return self.region

    def queue_parts(self) -> tuple[str, str]:
        """(account, name) the QueueUrl names, a bare name in the caller's account;
        QueueDoesNotExist when it names none well."""
        if self.queue is None:
            raise QueueDoesNotExistError()
        return self.queue.parts(self.account)

    def queue_parts_or_none(self) -> tuple[str, str] | None:
        """(account, name) the QueueUrl names, or None."""
        return self.queue.parts(self.account) if self.queue is not None else None


def region_from_headers(headers: Mapping[str, str], default: str,
                        query: Mapping[str, str] | None = None) -> str:
    """The region in the SigV4 credential scope (of the Authorization header, else of a
    presigned request's X-Amz-Credential in `query`), or the default when unsigned."""
    match = _CREDENTIAL.search(headers.get("authorization", ""))
    if match is None and query is not None and query.get("X-Amz-Credential"):
        match = _CREDENTIAL.search(f"Credential={query['X-Amz-Credential']}/")
    return match.group(1) if match and match.group(1) else default


def check_signed_region(region: str, served: Collection[str], any_region: bool = False) -> None:
    """A request signed for a region must be signed for one this deployment serves (an
    unsigned request, region "", goes to the default region), or, where any region is
    served (the local server), for one shaped as a region name. Otherwise it is refused
    as AWS refuses a credential scoped to a region the endpoint does not serve, rather
    than served somewhere the caller did not ask for."""
    if not region or region in served or (any_region and is_region(region)):
        return
    shown = region[:64]
    if any_region:
        raise SignatureDoesNotMatchError(
            f"Credential should be scoped to a valid region, not '{shown}'. ")
    raise SignatureDoesNotMatchError(
        f"Credential should be scoped to a valid region, not '{shown}'. This DMQ "
        f"serves {', '.join(served)} (DMQ_REGIONS).")


def trace_header_from_headers(headers: Mapping[str, str]) -> str | None:
    """The X-Amzn-Trace-Id header (headers given with lower-case names), if non-empty."""
    value = headers.get("x-amzn-trace-id", "").strip()
    return value or None


def context_from_headers(headers: Mapping[str, str], account: str, region: str,
                         caller: Caller | None = None, secure: bool = False,
                         queue: QueueTarget | None = None,
                         public_url: str | None = None, host: str = "",
                         home_region: str = "") -> RequestContext:
    """The context of a request (headers with lower-case names) served in `region`, for
    a deployment whose account is given: the same for every protocol. With a caller, the
    account is the caller's (from its credential, never from the URL). `secure` says the
    request came over TLS, as its transport establishes it (`transport.py`), never as a
    header of the client's says. `queue` is what its QueueUrl names; `public_url` the
    fixed form of the queue URLs DMQ returns (DMQ_PUBLIC_URL), if one is set; `host` the
    host a trusted proxy says the client used (else its Host header counts);
    `home_region` the server's own region, whose queue URLs need not name it."""
    return RequestContext(
        account=caller.account if caller is not None else account,
        region=region,
        base_url=(public_base_url(public_url, region) if public_url
                  else base_url_from_headers(headers, secure, host)),
        trace_header=trace_header_from_headers(headers),
        caller=caller,
        invocation_id=invocation_id_from_headers(headers),
        queue=queue,
        home_region=home_region,
    )


def invocation_id_from_headers(headers: Mapping[str, str]) -> str | None:
    """The amz-sdk-invocation-id header (lower-case names), if shaped as the SDKs send it."""
    value = headers.get("amz-sdk-invocation-id", "").strip()
    return value if _INVOCATION_ID.fullmatch(value) else None


def base_url_from_headers(headers: Mapping[str, str], secure: bool = False,
                          host: str = "") -> str:
    """Scheme (https when the transport is TLS) and the host and port the client used
    (`host` when a trusted proxy named it, else the Host header; `localhost` when there
    is none, or one that is not a host name or address with an optional port)."""
    host = (host or headers.get("host", "")).strip()
    if not _HOST.fullmatch(host):
        host = "localhost"
    return f"{'https' if secure else 'http'}://{host}"


def public_base_url(public_url: str, region: str) -> str:
    """The fixed form of queue URLs (DMQ_PUBLIC_URL), its `{region}` filled in."""
    return public_url.replace("{region}", region).rstrip("/")
