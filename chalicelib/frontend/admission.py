"""The front door of SQS requests: who is calling, and whether their account may be served
now (docs/throttling.md, "Fair share").

A request is admitted as soon as its account is known, before its body is parsed or any
store is read for it: the signature is verified (in the required mode; about 70 us), then
the account's concurrency share and its request rate are checked. So a refusal costs a
verification and an error answer, not the request. The account charged is the one the
verified credential acts as, never one an unsigned request names: a stranger cannot spend
a victim's budget.

The local server admits a request before it hands it to the Chalice app; the app (on
Lambda, the only door) admits what arrives unadmitted. Either way the ticket is kept for
the request (`current()`), so that nothing is verified or charged twice.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from chalicelib import observability
from chalicelib.domain import fair_share
from chalicelib.domain.fair_share import ConcurrencyShare
from chalicelib.frontend import authn
from chalicelib.frontend.sigv4 import SignedRequest
from chalicelib.service.exceptions import RateThrottledError
from chalicelib.service.identity import Caller, Identities
from chalicelib.service.throttling import Throttle


@dataclass(frozen=True)
class Ticket:
    """An admitted request: its caller, or the error its authentication ended in (left
    for the protocol to answer in its place, in its shape)."""

    caller: Caller | None
    error: Exception | None = None
    charged: bool = False  # the account's bucket was counted at the door

    def authenticate(self) -> Caller:
        """The caller, or the authentication error raised again."""
        if self.caller is None:
            raise self.error or RuntimeError("no caller")
        return self.caller


_CURRENT: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar(
    "dmq_ticket", default=None)


def current() -> Ticket | None:
    """The ticket of the request this thread serves, if it was admitted."""
    return _CURRENT.get()


class Admission:
    """Authenticates a request and charges its account, once per request."""

    def __init__(self, identities: Callable[[], Identities],
                 throttle_for: Callable[[str], Throttle | None],
                 share: ConcurrencyShare) -> None:
        self._identities = identities
        self._throttle_for = throttle_for
        self.share = share

    @contextmanager
    def admitted(self, request: SignedRequest, region: str) -> Iterator[Ticket]:
        """The request's ticket for as long as it is served; RateThrottledError (raised on
        entry, before anything else is done) when its account is over its share or rate.
        A request admitted already (by the local server) keeps its ticket."""
        known = _CURRENT.get()
        if known is not None:
            yield known
            return
        refused: Ticket | None = None
        try:
            caller = authn.authenticate(self._identities(), request)
        except Exception as exc:  # noqa: BLE001 - answered by the protocol, in its shape
            refused = Ticket(None, exc)
        if refused is not None:
            yield from self._serve(refused)
            return
        account = caller.account
        if not self.share.enter(account):
            observability.add_count("ThrottledRequests")
            raise RateThrottledError(
                f"Too many requests of account {account} in progress (at most "
                f"{self.share.limit} at once, the others waiting their turn for "
                f"{self.share.wait_s:g} s); retry with backoff.")
        try:
            charged = self._charge(account, region)
            with fair_share.holding(self.share, account):
                yield from self._serve(Ticket(caller, charged=charged))
        finally:
            self.share.leave(account)

    def _charge(self, account: str, region: str) -> bool:
        """Count the request against the account's bucket in the region it is signed for
        (RateThrottledError when empty); False when no bucket applies here."""
        throttle = self._throttle_for(region)
        if throttle is None or not throttle.account_limit.enabled:
            return False
        throttle.admit_account(account)
        return True

    @staticmethod
    def _serve(ticket: Ticket) -> Iterator[Ticket]:
        token = _CURRENT.set(ticket)
        try:
            yield ticket
        finally:
            _CURRENT.reset(token)
