"""The console's pages: each request is authenticated, each form checked for its CSRF token,
and each page rendered from templates/ with Jinja2 (autoescaped). The pages call the same
services as the SQS actions and the admin API: nothing here touches a store directly.

Pages and the forms they post:
- `/console`: every queue with its live counts, a page of PAGE_SIZE at a time; depth and
  request throughput plots.
- `/console/queues/<account>/<name>`: counts and plots, peek (messages read without being
  claimed), send, purge, and for a dead-letter queue the redrive (message move tasks).
- `/console/regions`: each region's health and heartbeat, and the replication lag.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from chalicelib.clock import Clock, SystemClock
from chalicelib.domain.messages import Counts
from chalicelib.domain.move_tasks import MAX_RATE, MIN_RATE
from chalicelib.domain.queues import QueueRecord
from chalicelib.frontend.console import auth, forms, gate, plots, shapes
from chalicelib.frontend.console.csrf import CsrfTokens
from chalicelib.frontend.console.history import MINUTE_MS, SERIES, TOTAL, WINDOW_MS, History
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.frontend.services import Services
from chalicelib.service.exceptions import SqsError
from chalicelib.service.identity import Caller
from chalicelib.service.sign_in_limits import SignInLimits
from chalicelib.settings import ConfigurationError

logger = logging.getLogger("dmq.console")
LIVE_EVERY_MS = 2000
PAGE_SIZE = 100  # queues per page of the queue list
MIN_SPAN_MS = 60 * 1000  # the shortest time a plot spans
HTML = "text/html; charset=utf-8"
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
}
STATIC = {"console.css": "text/css; charset=utf-8",
          "console.js": "text/javascript; charset=utf-8"}
NOTICES = {
    "sent": "Message sent.",
    "purged": "The queue was purged: every message sent before the purge is deleted.",
    "redrive": "Redrive started: the messages move back at the task's rate.",
    "cancelled": "Redrive cancelled: the messages moved so far stay moved, the rest stay here.",
}
_MESSAGE_ID = re.compile(r"^[A-Za-z0-9-]{1,100}$")


@dataclass(frozen=True)
class WebRequest:
    """What the console reads of an HTTP request (header names in lower case)."""

    method: str
    headers: Mapping[str, str]
    query: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    prefix: str = ""  # the API Gateway stage in the path ("/api"), "" locally
    origin: str = ""  # the console's own origin: the real scheme and the Host
    client: str = ""  # the client's address, as the connection establishes it

    def form(self) -> dict[str, str]:
        """The url-encoded form in the body (first value of each field)."""
        text = self.body.decode("utf-8", errors="replace")
        return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}


@dataclass(frozen=True)
class Page:
    """An HTTP answer."""

    status: int
    body: str
    headers: dict[str, str]


class Console:
    """The console of one deployment."""

    def __init__(self, services: Callable[[], Services],
                 regions: Callable[[], dict[str, Any]],
                 check_secret: Callable[[str, str], Caller],
                 csrf_secret: Callable[[], str],
                 clock: Callable[[], Clock] = SystemClock,
                 limits: Callable[[], SignInLimits] | None = None,
                 bulk_counts: Callable[[Services, list[QueueRecord]], dict[str, Counts]]
                 | None = None) -> None:
        self._services = services
        # Reads the counts of many queues at once (None: one count per queue).
        self._bulk_counts = bulk_counts
        self._regions = regions
        self._check_secret = check_secret
        self._csrf_secret = csrf_secret
        own_limits = SignInLimits()
        self._limits = limits or (lambda: own_limits)
        self._csrf: CsrfTokens | None = None
        self._csrf_key = ""
        self._clock_of = clock  # the runtime's clock, which tests may replace
        self.history = History()
        self._templates = Environment(
            loader=PackageLoader("chalicelib.frontend.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)
        self._templates.filters["when"] = shapes.when

    @property
    def _clock(self) -> Clock:
        return self._clock_of()

    # -- the parts every page shares -------------------------------------------------------
    def serve(self, request: WebRequest, view: Callable[[auth.ConsoleUser], Page]) -> Page:
        """Authenticate, then run the view; every error becomes a page, never a trace."""
        signed = gate.sign_in(request.headers.get("authorization"), request.client,
                              self._check_secret, self._limits())
        user = signed.user
        if user is None:
            return self._not_signed_in(request, signed.retry_after_s)
        try:
            self.csrf()
        except ConfigurationError as exc:  # a deployed stage without a console key
            return Page(503, str(exc), {"Content-Type": "text/plain; charset=utf-8",
                                        **SECURITY_HEADERS})
        refused = self._refused(request, user)
        if refused is not None:
            return refused
        try:
            return view(user)
        except Exception as exc:  # every error is shown as SQS would name it (logged if new)
            error = to_sqs_error(exc)
            if not isinstance(exc, SqsError):
                logger.exception("console page failed")
            return self._render(request, user, "error.html",
                                404 if error.code == "QueueDoesNotExist" else error.status,
                                title="Error", code=error.code, message=error.message)

    def _not_signed_in(self, request: WebRequest, retry_after_s: int) -> Page:
        """401 with the Basic challenge; 429 while failed sign-ins must wait."""
        if retry_after_s:
            page = self._render(request, None, "error.html", 429, title="Wait",
                                code="TooManyRequests", message=(
                                    "Too many failed sign-ins with this key or from this "
                                    f"address: try again in {retry_after_s} s."))
            page.headers["Retry-After"] = str(retry_after_s)
            return page
        page = self._render(request, None, "error.html", 401, title="Sign in",
                            code="NotAuthorized", message=(
                                "Sign in with an admin access key id as the user name "
                                "and its secret access key as the password."))
        page.headers["WWW-Authenticate"] = auth.CHALLENGE
        return page

    def _refused(self, request: WebRequest, user: auth.ConsoleUser) -> Page | None:
        """A signed-in user who is not an admin, or a form post from another site or
        without a valid token, is refused."""
        if not user.admin:
            return self._render(request, user, "error.html", 403, title="Not an admin",
                                code="AccessDenied", message=(
                                    f"The key {user.access_key_id} is not an admin of this "
                                    "deployment: the console shows every account's queues."))
        if request.method != "POST":
            return None
        if not gate.from_own_origin(request.headers, request.origin):
            message = ("This form was posted from another site: the console acts only on "
                       "forms posted from its own pages.")
        elif not self._valid_token(request, user):
            message = ("The form was not served by this console to this key, or it is too "
                       "old. Load the page again and resubmit.")
        else:
            return None
        return self._render(request, user, "error.html", 403, title="Form refused",
                            code="InvalidCsrfToken", message=message)

    def _valid_token(self, request: WebRequest, user: auth.ConsoleUser) -> bool:
        token = request.form().get("csrf_token")
        return self.csrf().valid(token, user.access_key_id, int(self._clock.now_ms() / 1000))

    def csrf(self) -> CsrfTokens:
        """The token issuer, made again when the key changes (the runtime fetches the key
        once per container, and forgets it when it is configured anew)."""
        secret = self._csrf_secret()
        if self._csrf is None or self._csrf_key != secret:
            self._csrf, self._csrf_key = CsrfTokens(secret), secret
        return self._csrf

    def _render(self, request: WebRequest, user: auth.ConsoleUser | None, template: str,
                status: int = 200, **context: Any) -> Page:
        now_s = int(self._clock.now_ms() / 1000)
        body = self._templates.get_template(template).render(
            base=f"{request.prefix}/console", user=user,
            csrf_token=self.csrf().issue(user.access_key_id, now_s) if user else "",
            live_every_ms=LIVE_EVERY_MS, now_ms=self._clock.now_ms(), **context)
        return Page(status, body, {"Content-Type": HTML, **SECURITY_HEADERS})

    def _redirect(self, request: WebRequest, path: str) -> Page:
        return Page(303, "", {"Location": f"{request.prefix}/console{path}",
                              **SECURITY_HEADERS})

    def static(self, name: str) -> Page:
        """The stylesheet and the script (no credentials needed: nothing secret in them)."""
        kind = STATIC.get(name)
        if kind is None or self._templates.loader is None:
            return Page(404, "Not found", {"Content-Type": "text/plain; charset=utf-8"})
        text = self._templates.loader.get_source(self._templates, f"static/{name}")[0]
        return Page(200, text, {"Content-Type": kind, "Cache-Control": "max-age=300",
                                "X-Content-Type-Options": "nosniff"})

    # -- the queue list --------------------------------------------------------------------
    def queues(self, request: WebRequest, live: bool = False) -> Page:
        """Every queue's counts in all, and one page of PAGE_SIZE queues with theirs (by
        account and name); the plots of all queues together. The counts of every queue
        are read in bulk (`counts_many`), a hundred shards per store request."""

        def view(user: auth.ConsoleUser) -> Page:
            services = self._services()
            now = self._clock.now_ms()
            services.messages.catch_up_counts()  # once for the whole list
            queues = services.queues.all_queues()
            pages = max(1, -(-len(queues) // PAGE_SIZE))
            page = min(pages, shapes.page_number(request.query.get("page")))
            counts = self._counts_many(services, queues)
            total = Counts()
            for found in counts.values():
                total = total + found
            rows = []
            for queue in queues[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]:
                found = counts.get(queue.queue_id, Counts())
                self.history.sample(queue.queue_id, found, now)
                rows.append({"queue": queue, "counts": found,
                             "dlq": queue.redrive_policy is not None})
            self.history.sample(TOTAL, total, now)
            template = "queues_live.html" if live else "queues.html"
            return self._render(request, user, template, title="Queues", rows=rows,
                                total=total, queue_count=len(queues), page=page, pages=pages,
                                first=(page - 1) * PAGE_SIZE + 1,
                                charts=self._charts(TOTAL, "all", now))

        return self.serve(request, view)

    def _counts_many(self, services: Services, queues: list[QueueRecord],
                     ) -> dict[str, Counts]:
        if self._bulk_counts is not None:
            return self._bulk_counts(services, queues)
        return {q.queue_id: services.messages.counts(q) for q in queues}

    def _charts(self, key: str, chart_id: str, now: int) -> list[plots.Chart]:
        depth = self.history.depth(key, now)
        minutes = self.history.throughput(key, now)
        # The last hour, or less while the history is younger: since its first figure.
        first = min([*(s.at_ms for s in depth[:1]),
                     *(m for m, row in minutes if any(row.values()))], default=now)
        start = max(now - WINDOW_MS, min(first, now - MIN_SPAN_MS))
        minutes = [(m, row) for m, row in minutes if m >= start - MINUTE_MS]
        return [
            plots.chart(f"depth-{chart_id}", "Depth", "messages", start, now, {
                "visible": [(s.at_ms, s.visible) for s in depth],
                "in flight": [(s.at_ms, s.in_flight) for s in depth],
                "delayed": [(s.at_ms, s.delayed) for s in depth],
            }),
            # each minute's count is drawn at the minute's end (or now, for this minute)
            plots.chart(f"throughput-{chart_id}", "Throughput", "requests per minute",
                        start, now, {f"{kind} requests": [(min(m + MINUTE_MS, now), row[kind])
                                                          for m, row in minutes]
                                     for kind in SERIES}),
        ]

    # -- one queue -------------------------------------------------------------------------
    def queue(self, request: WebRequest, account: str, name: str, live: bool = False) -> Page:
        """A queue's counts, plots, messages (peeked), forms, and move tasks."""

        def view(user: auth.ConsoleUser) -> Page:
            return self._queue_page(request, user, account, name, live)

        return self.serve(request, view)

    def _queue_page(self, request: WebRequest, user: auth.ConsoleUser, account: str,
                    name: str, live: bool, status: int = 200, error: SqsError | None = None,
                    form: Mapping[str, str] | None = None) -> Page:
        services = self._services()
        queue = services.queues.get(account, name)
        now = self._clock.now_ms()
        counts = services.messages.counts(queue, fresh=True)
        self.history.sample(queue.queue_id, counts, now)
        sources = services.queues.dead_letter_sources(queue)
        tasks = services.move_tasks.list(queue.arn, 10) if sources else []
        context: dict[str, Any] = {
            "title": queue.name, "queue": queue, "counts": counts, "sources": sources,
            "autoscale": services.autoscaler.mode(queue) if services.autoscaler else "off",
            "tasks": [shapes.task(t) for t in tasks],
            "charts": self._charts(queue.queue_id, "queue", now),
            "path": f"/queues/{quote(account, safe='')}/{quote(name, safe='')}",
        }
        if live:
            return self._render(request, user, "queue_live.html", **context)
        limit = shapes.peek_limit(request.query.get("limit"))
        messages = services.messages.peek(queue, limit)
        destinations = [q for q in services.queues.all_queues()
                        if q.account == queue.account and q.queue_id != queue.queue_id
                        and q.name.endswith(".fifo") == queue.name.endswith(".fifo")]
        notice = NOTICES.get(request.query.get("notice", ""))
        message_id = request.query.get("message_id", "")
        if notice and request.query.get("notice") == "sent" and _MESSAGE_ID.match(message_id):
            notice = f"Message sent: {message_id}."
        return self._render(
            request, user, "queue.html", status, **context, limit=limit,
            messages=[shapes.peeked(m, now) for m in messages], destinations=destinations,
            fifo=queue.name.endswith(".fifo"), notice=notice, error=error, form=form or {},
            min_rate=MIN_RATE, max_rate=MAX_RATE)

    def _queue_action(self, request: WebRequest, account: str, name: str,
                      act: Callable[[Services, QueueRecord, dict[str, str]], str]) -> Page:
        """Run a form's action; on success redirect to the queue page (with a notice), on an
        SQS error show the page again with the error and the form as it was filled."""

        def view(user: auth.ConsoleUser) -> Page:
            services = self._services()
            queue = services.queues.get(account, name)
            form = request.form()
            try:
                notice = act(services, queue, form)
            except SqsError as exc:
                return self._queue_page(request, user, account, name, False, exc.status,
                                        exc, form)
            path = f"/queues/{quote(account, safe='')}/{quote(name, safe='')}"
            return self._redirect(request, f"{path}?{notice}")

        return self.serve(request, view)

    def send(self, request: WebRequest, account: str, name: str) -> Page:
        """SendMessage from the send form."""
        return self._queue_action(request, account, name, forms.send)

    def purge(self, request: WebRequest, account: str, name: str) -> Page:
        """PurgeQueue, once the form's confirmation box is ticked."""
        return self._queue_action(request, account, name, forms.purge)

    def redrive(self, request: WebRequest, account: str, name: str) -> Page:
        """StartMessageMoveTask from a dead-letter queue."""
        return self._queue_action(request, account, name, forms.redrive)

    def cancel(self, request: WebRequest, account: str, name: str) -> Page:
        """CancelMessageMoveTask of one of this queue's running tasks."""
        return self._queue_action(request, account, name, forms.cancel)

    # -- regions ---------------------------------------------------------------------------
    def regions(self, request: WebRequest) -> Page:
        """Each region's health, heartbeat and home queues, and the replication lag."""

        def view(user: auth.ConsoleUser) -> Page:
            found = self._regions()
            lag = found.get("replication_lag_ms") or {}
            return self._render(request, user, "regions.html", title="Regions",
                                regions=found.get("regions", []), lag=lag,
                                faults=found.get("sync_replica_write_failures"))

        return self.serve(request, view)

    # -- throughput ------------------------------------------------------------------------
    def count_request(self, account: str, queue: str, action: str, payload_bytes: int) -> None:
        """The usage meter's hook: count a request on a queue for the throughput plot."""
        self.history.count(queue, action, self._clock.now_ms())
