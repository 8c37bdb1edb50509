"""Who is asking and where: account, region (from SigV4) and the base URL for queue URLs."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from chalicelib.service.exceptions import QueueDoesNotExistError, SignatureDoesNotMatchError

_CREDENTIAL = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")


@dataclass(frozen=True)
class RequestContext:
    """The caller's account, the request's region and the URL it reached DMQ at."""

    account: str
    region: str
    base_url: str

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


def base_url_from_headers(headers: Mapping[str, str]) -> str:
    """Scheme and host the client used (API Gateway sets X-Forwarded-Proto)."""
    scheme = headers.get("x-forwarded-proto", "http").split(",")[0].strip()
    host = headers.get("host", "localhost")
    return f"{scheme}://{host}"


def parse_queue_url(url: str) -> tuple[str, str]:
    """(account, name) from a queue URL; anything else is QueueDoesNotExist."""
    path = urlparse(url).path if "://" in url else url
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2:
        raise QueueDoesNotExistError()
    return parts[-2], parts[-1]
