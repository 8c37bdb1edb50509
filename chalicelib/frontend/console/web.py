"""The console's pages: each request is authenticated, each form checked for its CSRF token,
and each page rendered from templates/ with Jinja2 (autoescaped). The pages call the same
services as the SQS actions and the admin API: nothing here touches a store directly.

Pages and the forms they post:
- `/console`: every queue with its live counts; depth and request throughput plots.
- `/console/queues/<account>/<name>`: counts and plots, peek (messages read without being
  claimed), send, purge, and for a dead-letter queue the redrive (message move tasks).
- `/console/regions`: each region's health and heartbeat, and the replication lag.
"""

from __future__ import annotations

import base64
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from chalicelib.clock import Clock, SystemClock
from chalicelib.domain.messages import AttributeValue, Counts, Message
from chalicelib.domain.move_tasks import MAX_RATE, MIN_RATE, MoveTask, MoveTaskStatus
from chalicelib.domain.queues import QueueRecord
from chalicelib.frontend.console import auth, plots
from chalicelib.frontend.console.csrf import CsrfTokens
from chalicelib.frontend.console.history import MINUTE_MS, SERIES, TOTAL, WINDOW_MS, History
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.frontend.services import Services
from chalicelib.service.exceptions import InvalidParameterValueError, SqsError
from chalicelib.service.identity import Caller
from chalicelib.service.messages import SendRequest

logger = logging.getLogger("dmq.console")
PEEK_DEFAULT = 10
PEEK_MAX = 100
PEEK_BODY_CHARS = 4096
LIVE_EVERY_MS = 2000
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
                 clock: Callable[[], Clock] = SystemClock) -> None:
        self._services = services
        self._regions = regions
        self._check_secret = check_secret
        self._csrf_secret = csrf_secret
        self._csrf: CsrfTokens | None = None
        self._clock_of = clock  # the runtime's clock, which tests may replace
        self.history = History()
        self._templates = Environment(
            loader=PackageLoader("chalicelib.frontend.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)
        self._templates.filters["when"] = _when

    @property
    def _clock(self) -> Clock:
        return self._clock_of()

    # -- the parts every page shares -------------------------------------------------------
    def serve(self, request: WebRequest, view: Callable[[auth.ConsoleUser], Page]) -> Page:
        """Authenticate, then run the view; every error becomes a page, never a trace."""
        user = auth.authenticate(request.headers.get("authorization"), self._check_secret)
        if user is None:
            page = self._render(request, None, "error.html", 401, title="Sign in",
                                code="NotAuthorized", message=(
                                    "Sign in with an admin access key id as the user name "
                                    "and its secret access key as the password."))
            page.headers["WWW-Authenticate"] = auth.CHALLENGE
            return page
        if not user.admin:
            return self._render(request, user, "error.html", 403, title="Not an admin",
                                code="AccessDenied", message=(
                                    f"The key {user.access_key_id} is not an admin of this "
                                    "deployment: the console shows every account's queues."))
        if request.method == "POST" and not self._same_origin(request, user):
            return self._render(request, user, "error.html", 403, title="Form expired",
                                code="InvalidCsrfToken", message=(
                                    "The form was not served by this console to this key, or "
                                    "it is too old. Load the page again and resubmit."))
        try:
            return view(user)
        except Exception as exc:  # every error is shown as SQS would name it (logged if new)
            error = to_sqs_error(exc)
            if not isinstance(exc, SqsError):
                logger.exception("console page failed")
            return self._render(request, user, "error.html",
                                404 if error.code == "QueueDoesNotExist" else error.status,
                                title="Error", code=error.code, message=error.message)

    def _same_origin(self, request: WebRequest, user: auth.ConsoleUser) -> bool:
        if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return False
        token = request.form().get("csrf_token")
        return self.csrf().valid(token, user.access_key_id, int(self._clock.now_ms() / 1000))

    def csrf(self) -> CsrfTokens:
        """The token issuer (its key read once)."""
        if self._csrf is None:
            self._csrf = CsrfTokens(self._csrf_secret())
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
        """Every queue with its counts, and the plots of all queues together."""

        def view(user: auth.ConsoleUser) -> Page:
            services = self._services()
            now = self._clock.now_ms()
            rows = []
            total = Counts()
            for queue in services.queues.all_queues():
                counts = services.messages.counts(queue)
                self.history.sample(queue.queue_id, counts, now)
                total = total + counts
                rows.append({"queue": queue, "counts": counts,
                             "dlq": queue.redrive_policy is not None})
            self.history.sample(TOTAL, total, now)
            template = "queues_live.html" if live else "queues.html"
            return self._render(request, user, template, title="Queues", rows=rows,
                                total=total, charts=self._charts(TOTAL, "all", now))

        return self.serve(request, view)

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
        counts = services.messages.counts(queue)
        self.history.sample(queue.queue_id, counts, now)
        sources = services.queues.dead_letter_sources(queue)
        tasks = services.move_tasks.list(queue.arn, 10) if sources else []
        context: dict[str, Any] = {
            "title": queue.name, "queue": queue, "counts": counts, "sources": sources,
            "tasks": [_task(t) for t in tasks],
            "charts": self._charts(queue.queue_id, "queue", now),
            "path": f"/queues/{quote(account, safe='')}/{quote(name, safe='')}",
        }
        if live:
            return self._render(request, user, "queue_live.html", **context)
        limit = _peek_limit(request.query.get("limit"))
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
            messages=[_peeked(m, now) for m in messages], destinations=destinations,
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
        return self._queue_action(request, account, name, _send)

    def purge(self, request: WebRequest, account: str, name: str) -> Page:
        """PurgeQueue, once the form's confirmation box is ticked."""
        return self._queue_action(request, account, name, _purge)

    def redrive(self, request: WebRequest, account: str, name: str) -> Page:
        """StartMessageMoveTask from a dead-letter queue."""
        return self._queue_action(request, account, name, _redrive)

    def cancel(self, request: WebRequest, account: str, name: str) -> Page:
        """CancelMessageMoveTask of one of this queue's running tasks."""
        return self._queue_action(request, account, name, _cancel)

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


def _peek_limit(given: str | None) -> int:
    if given and given.isdigit():
        return max(1, min(int(given), PEEK_MAX))
    return PEEK_DEFAULT


def _attribute(value: AttributeValue) -> dict[str, str]:
    if value.binary_value is not None:
        shown = base64.b64encode(value.binary_value).decode("ascii") + " (base64)"
    else:
        shown = value.string_value or ""
    return {"type": value.data_type, "value": shown}


def _peeked(message: Message, now: int) -> dict[str, Any]:
    """A message as the peek table shows it: state, body, attributes, system attributes."""
    state = ("delayed" if message.is_delayed(now)
             else "in flight" if message.visible_at > now else "visible")
    system: dict[str, str] = {"SenderId": message.sender_id,
                              "SentTimestamp": str(message.sent_ms),
                              "ApproximateReceiveCount": str(message.receive_count)}
    if message.first_receive_ms:
        system["ApproximateFirstReceiveTimestamp"] = str(message.first_receive_ms)
    for key, value in (("MessageGroupId", message.group_id),
                       ("MessageDeduplicationId", message.dedup_id),
                       ("SequenceNumber", message.sequence_number),
                       ("DeadLetterQueueSourceArn", message.dead_letter_source_arn)):
        if value:
            system[key] = value
    for key, attribute in sorted(message.system_attributes.items()):
        system[key] = _attribute(attribute)["value"]
    return {
        "id": message.message_id, "state": state, "sent_ms": message.sent_ms,
        "receive_count": message.receive_count, "md5": message.body_md5,
        "body": message.body[:PEEK_BODY_CHARS],
        "truncated": len(message.body) > PEEK_BODY_CHARS, "size": len(message.body),
        "attributes": {k: _attribute(v) for k, v in sorted(message.attributes.items())},
        "system": system,
    }


def _task(task: MoveTask) -> dict[str, Any]:
    return {"status": task.status.value, "moved": task.moved, "to_move": task.to_move,
            "destination": task.destination_arn or "the original source queues",
            "rate": task.max_per_second, "started_ms": task.started_ms,
            "failure": task.failure_reason, "active": task.status.active,
            "handle": task.handle if task.status is MoveTaskStatus.RUNNING else None}


def _optional_int(form: Mapping[str, str], field_name: str, label: str) -> int | None:
    text = form.get(field_name, "").strip()
    if not text:
        return None
    if not text.lstrip("-").isdigit():
        raise InvalidParameterValueError(f"Value {text} for parameter {label} is invalid. "
                                         "Reason: it must be an integer.")
    return int(text)


def _send(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    attributes: dict[str, AttributeValue] = {}
    attribute_name = form.get("attribute_name", "").strip()
    if attribute_name:
        data_type = form.get("attribute_type") or "String"
        attributes[attribute_name] = AttributeValue(data_type, form.get("attribute_value", ""))
    message = services.messages.send(queue, SendRequest(
        entry_id="console", body=form.get("body"),
        delay_seconds=_optional_int(form, "delay_seconds", "DelaySeconds"),
        attributes=attributes,
        message_group_id=form.get("message_group_id") or None,
        deduplication_id=form.get("deduplication_id") or None,
    ))
    return f"notice=sent&message_id={quote(message.message_id, safe='')}"


def _purge(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    if form.get("confirm") != "yes":
        raise InvalidParameterValueError(
            "Tick the box to confirm that every message of the queue is to be deleted.")
    services.queues.purge(queue)
    return "notice=purged"


def _redrive(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    services.move_tasks.start(
        queue.arn, form.get("destination_arn") or None,
        _optional_int(form, "max_per_second", "MaxNumberOfMessagesPerSecond"))
    return "notice=redrive"


def _cancel(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    handle = form.get("task_handle", "")
    if not any(t.handle == handle for t in services.move_tasks.list(queue.arn, 10)):
        raise InvalidParameterValueError("Value for parameter TaskHandle is invalid.")
    services.move_tasks.cancel(handle)
    return "notice=cancelled"


def _when(epoch_ms: int | None) -> str:
    """An epoch-ms time as UTC text."""
    if not epoch_ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_ms / 1000))
