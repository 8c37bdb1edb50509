"""The local server's front door: SQS requests are admitted (`chalicelib.frontend.admission`)
before Chalice's local gateway builds an event for them, so that a request refused for its
account's share or rate costs a signature check and a short answer, not the app.

A refusal for the account's rate is sent when the bucket's next token is due (at most
`MAX_HOLD_S` later), not at once: a client that floods without backing off then waits on a
sleeping thread instead of making the server refuse it again and again.

What is admitted here is served by the app under the same ticket (it is kept for the
thread), so the app neither verifies the signature again nor charges the account twice.
Requests to other paths (the admin API, the console, local routes) pass untouched.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from urllib.parse import parse_qsl

from chalicelib.frontend.context import region_from_headers
from chalicelib.frontend.refusals import refusal
from chalicelib.frontend.sigv4 import SignedRequest
from chalicelib.runtime import Runtime
from chalicelib.service import parking
from chalicelib.service.exceptions import RateThrottledError
from dmqlocal.http_errors import Reply

# The longest a refusal for an account's rate is held before it is sent.
MAX_HOLD_S = 1.0
# The app's SQS routes: `/` and a queue's URL, `/<account>/<name>` or LocalStack's
# `/queue/<region>/<account>/<name>`.
_SQS_PATH = re.compile(r"/(?:(?:queue/[a-z0-9-]{1,40}/)?[0-9]{12}/[A-Za-z0-9_.-]{1,80})?")


def is_sqs(method: str, path: str) -> bool:
    """True for a request the app serves as SQS (at `/` or at a queue's URL)."""
    return method in ("GET", "POST") and bool(_SQS_PATH.fullmatch(path))


class FrontDoor:
    """Admits SQS requests for the local server (its `gate`)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    @contextlib.contextmanager
    def __call__(self, method: str, target: str, headers: dict[str, str],
                 body: bytes) -> Iterator[Reply | None]:
        """Serve the request in its ticket's context (None), or give the refusal."""
        path, _, query = target.partition("?")
        if not is_sqs(method, path):
            yield None
            return
        pairs = parse_qsl(query, keep_blank_values=True)
        signed = SignedRequest(method, path, pairs, headers, body)
        with contextlib.ExitStack() as admitted:
            refused: Reply | None = None
            try:
                admitted.enter_context(self._runtime.admission().admitted(
                    signed, region_from_headers(headers, "")))
            except RateThrottledError as exc:
                # Held until the bucket's next token is due: a client that asks again at
                # once would be refused again, and a sleeping thread costs no CPU.
                time.sleep(min(exc.retry_after_s, MAX_HOLD_S))
                answer = refusal(exc, method, headers, dict(pairs))
                refused = (answer.status, answer.headers, answer.body.encode("utf-8"))
            else:
                # Admitted outside the app: its long polls may park (the server serves
                # them again under the same ticket, `chalicelib/service/parking.py`).
                admitted.enter_context(parking.parkable_here())
            yield refused
