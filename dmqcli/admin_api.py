"""DMQ's admin API (`/admin/...`) over HTTP, signed with SigV4 for API Gateway
(`execute-api`) with the caller's AWS credentials, which the admin routes require."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any

from dmqcli.errors import CONNECT_HINT, CliError, unreachable

if TYPE_CHECKING:
    from botocore.credentials import Credentials

TIMEOUT_S = 60.0  # a table export scans every table


def signed_headers(credentials: Credentials | None, region: str, method: str, url: str,
                   body: bytes) -> dict[str, str]:
    """The SigV4 headers for an admin request (none without credentials)."""
    if credentials is None:
        return {}
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method=method, url=url, data=body)
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    return dict(request.headers.items())


def parse_error(status: int, text: str, route: str,
                error_type: str | None = None) -> tuple[str | None, str]:
    """The server's error code (when it gave one) and its line `code: message (HTTP
    status)`, whatever shape it came in (API Gateway's own errors carry their code in the
    `x-amzn-ErrorType` header)."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        if status == 404:
            return None, f"{route}: this endpoint has no such route (HTTP 404)"
        return None, f"HTTP {status}: {text.strip()[:300] or 'no body'}"
    code = str(body.get("code") or body.get("Code") or body.get("__type")
               or (error_type or "").partition(":")[0] or "Error").rpartition("#")[2]
    message = body.get("message") or body.get("Message") or json.dumps(body)[:300]
    return code, f"{code}: {message} (HTTP {status})"


def _error_line(status: int, text: str, route: str, error_type: str | None = None) -> str:
    """The server's error as one line (see parse_error)."""
    return parse_error(status, text, route, error_type)[1]


class AdminApi:
    """Calls the admin routes of one endpoint; each call returns the route's JSON."""

    def __init__(self, endpoint: str, region: str, credentials: Credentials | None,
                 ca: str | None = None, connect_hint: str = CONNECT_HINT) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.region = region
        self.credentials = credentials
        self.connect_hint = connect_hint
        # An https endpoint is verified with the local server's CA file when it has one,
        # else with the system's (which SSL_CERT_FILE can point elsewhere).
        self._ssl = ssl.create_default_context(cafile=ca) if ca else None

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             query: dict[str, str] | None = None) -> Any:
        """One request; an HTTP error or no answer becomes a CliError."""
        url = self.endpoint + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else b""
        headers = signed_headers(self.credentials, self.region, method, url, data)
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data if body is not None else None,
                                         headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S,
                                        context=self._ssl) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            code, line = parse_error(exc.code, detail, f"{method} {path}",
                                     exc.headers.get("x-amzn-ErrorType"))
            raise CliError(line, code=code, admin=True) from None
        except (urllib.error.URLError, OSError) as exc:
            raise unreachable(self.endpoint, getattr(exc, "reason", exc),
                              self.connect_hint) from None
        try:
            return json.loads(text) if text else {}
        except ValueError:
            raise CliError(f"{url} answered something other than JSON: is it DMQ?") from None

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        """GET a route."""
        return self.call("GET", path, query=query)

    def post(self, path: str, body: dict[str, Any] | None = None,
             query: dict[str, str] | None = None) -> Any:
        """POST to a route (an empty JSON object when no body is given)."""
        return self.call("POST", path, body if body is not None else {}, query)

    def put(self, path: str, body: dict[str, Any]) -> Any:
        """PUT a route."""
        return self.call("PUT", path, body)

    def delete(self, path: str) -> Any:
        """DELETE a route."""
        return self.call("DELETE", path)


def without_route(error: CliError, hint: str) -> CliError:
    """The error with a hint added when the endpoint does not serve the route at all: the
    local server answers 404, API Gateway 403 MissingAuthenticationToken."""
    if "HTTP 404" in error.message or "MissingAuthenticationToken" in error.message:
        return CliError(f"{error.message} ({hint})", error.status, error.code, error.admin)
    return error


def quote(segment: str) -> str:
    """One path segment, escaped."""
    return urllib.parse.quote(segment, safe="")
