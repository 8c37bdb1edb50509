"""Fair share at scale: one tenant holding 1,000 long polls and 10,000 queues, another
tenant's SendMessage beside it, and what the first gets past its share.

    python -m bench.tenant_scale [--queues 10000] [--waits 1000]

DMQ's local server with DMQ_AUTH=required (docs/throttling.md), each account's rate and
concurrency share raised to 500 a second and 8 at a time (`TENANT_SHARE`) and
`DMQ_ACCOUNT_MAX_QUEUES` set to `--queues`, on DynamoDB Local behind the counting proxy.
Two tenants with keys of their own (`bench/fair_share.py`). The quiet one times its
SendMessage one at a time, alone; then the big one's queues are copied straight into the
queues table (`bench/many_queues.py`), it opens `--waits` long polls on as many of its
queues and keeps them open, and the quiet one's sends are timed again (target: p50 at most
2x alone). Then the big one goes past its shares: long polls beyond its cap (1,024 by
default) and one CreateQueue beyond its quota; each must be refused at once with SQS's
error (RequestThrottled, OverLimit), never left to hang.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.fair_share import FLOODER, QUIET, ROOT_KEY, ROOT_SECRET, client, tenant_keys
from bench.fair_share import timed_sends as quiet_sends
from bench.idle_cost import IdleServer
from bench.many_queues import copy_queues
from bench.timing import Latency

DEFAULT_WAITS_CAP = 1024  # DMQ_ACCOUNT_MAX_WAITS with DMQ_AUTH=required and 4,096 connections
RATIO_TARGET = 2.0
REFUSED_WITHIN_S = 1.0
EXTRA_POLLS = 8  # long polls tried past the cap
POLL_WAIT_S = 20
# Each account's request rate and concurrency share, raised from the required mode's 100
# a second and 1 at a time: at those, a tenant renewing 1,000 long polls every 20 s takes
# its whole share just to renew them (each first read waits its turn), and could not
# hold them all.
TENANT_SHARE = {"DMQ_THROTTLE_ACCOUNT_RPS": "500", "DMQ_ACCOUNT_MAX_CONCURRENCY": "8"}
TURN_S = 2.5  # past a request's turn in its account's concurrency share (2 s)


@dataclass
class TenantScale:
    """One run's figures."""

    queues: int
    waits: int
    alone: Latency
    beside: Latency
    holding: int  # the big tenant's long polls open while the quiet one sent
    poll_errors: dict[str, int] = field(default_factory=dict)
    refused_polls: int = 0  # of EXTRA_POLLS, refused RequestThrottled
    refused_poll_s: float = 0.0  # the slowest of those refusals
    over_quota: str = ""  # CreateQueue past the quota: the error code
    over_quota_s: float = 0.0

    @property
    def ratio(self) -> float:
        return round(self.beside.p50_ms / self.alone.p50_ms, 2) if self.alone.p50_ms else 0.0

    @property
    def server_errors(self) -> int:
        return sum(n for code, n in self.poll_errors.items() if code.startswith("5"))


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return f"{status} {exc.response.get('Error', {}).get('Code', '')}"
    return f"599 {type(exc).__name__}"


class _Polls:
    """The big tenant's long polls, each polling again as soon as its wait ends; a poll
    refused by the account's request rate while they open tries again a moment later."""

    def __init__(self, sqs: Any, urls: list[str], once: bool = False) -> None:
        self._sqs = sqs
        self._once = once  # one wait each (after any refusals), not one after another
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._since: dict[int, float] = {}  # each poll's call in progress: when it began
        self.throttled = 0  # refusals by the request rate while opening (then retried)
        self.errors: Counter[str] = Counter()
        self._threads = [threading.Thread(target=self._run, args=(n, u), daemon=True)
                         for n, u in enumerate(urls)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def holding(self, for_s: float = 1.0) -> int:
        """Polls whose call has been waiting `for_s` or more (a refusal comes at once)."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for began in self._since.values() if now - began >= for_s)

    def _run(self, n: int, url: str) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._since[n] = time.monotonic()
            try:
                self._sqs.receive_message(QueueUrl=url, WaitTimeSeconds=POLL_WAIT_S)
                if self._once:
                    return
            except (BotoCoreError, ClientError) as exc:
                if self._stop.is_set():
                    return
                with self._lock:
                    if _code(exc) == "403 RequestThrottled":
                        self.throttled += 1
                    else:
                        self.errors[_code(exc)] += 1
                time.sleep(random.uniform(0.2, 1.0))

    def stop(self, timeout_s: float = 0.0) -> None:
        """No poll starts again; wait up to `timeout_s` for those in progress to end."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _past_the_cap(sqs: Any, url: str, tries: int, held: Callable[[], int],
                  cap: int) -> tuple[int, float]:
    """Long polls past the cap, one at a time, each once every place is seen held: how
    many were refused RequestThrottled for the long-poll share, and the slowest of them."""
    refused, slowest = 0, 0.0
    for _ in range(tries):
        deadline = time.monotonic() + 10.0
        while held() < cap and time.monotonic() < deadline:
            time.sleep(0.05)  # a poll whose wait just ended is polling again
        start = time.monotonic()
        try:
            sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
        except ClientError as exc:
            if "Too many long polls" in str(exc.response.get("Error", {}).get("Message", "")):
                refused += 1
                slowest = max(slowest, time.monotonic() - start)
        time.sleep(0.05)  # within the account's request rate
    return refused, slowest


def _opened(polls: _Polls, count: int, timeout_s: float, for_s: float = 1.0) -> None:
    """Wait until `count` polls hold a wait begun `for_s` ago (or the timeout)."""
    deadline = time.monotonic() + timeout_s
    while polls.holding(for_s) < count and time.monotonic() < deadline:
        time.sleep(0.1)


def measure(queues: int, waits: int, calls: int) -> TenantScale:
    """The whole run on a server of its own."""
    cap = DEFAULT_WAITS_CAP
    env = {"DMQ_AUTH": "required", "DMQ_ROOT_ACCESS_KEY_ID": ROOT_KEY,
           "DMQ_ROOT_SECRET_ACCESS_KEY": ROOT_SECRET, "DMQ_ACCOUNT_MAX_QUEUES": str(queues),
           **TENANT_SHARE}
    if waits >= cap:
        raise SystemExit(f"--waits must stay below the default cap of {cap} long polls")
    if waits < cap - 100:  # a small run: a cap a little above its polls
        cap = waits + 24
        env["DMQ_ACCOUNT_MAX_WAITS"] = str(cap)
    server = IdleServer(env=env)
    polls: _Polls | None = None
    full: _Polls | None = None
    try:
        server.start()
        assert server.dmq is not None
        endpoint = server.dmq.url
        keys = tenant_keys(endpoint)
        quiet = client(endpoint, *keys[QUIET])
        quiet_url = quiet.create_queue(QueueName="quiet")["QueueUrl"]
        quiet_sends(quiet, quiet_url, min(50, calls))  # warm connections and caches
        alone = quiet_sends(quiet, quiet_url, calls)
        big = client(endpoint, *keys[FLOODER], attempts=1, pool=cap + 10)
        big.create_queue(QueueName="big-template")
        copy_queues(server.store.endpoint, f"{FLOODER}/big-template", queues - 1,
                    lambda n: (FLOODER, f"big-{n:06d}"))
        urls = [f"{endpoint}/{FLOODER}/big-{n:06d}" for n in range(min(cap, queues - 1))]
        polls = _Polls(big, urls[:waits])
        polls.start()
        _opened(polls, waits, 60.0)
        beside = quiet_sends(quiet, quiet_url, calls)
        holding = polls.holding()
        errors = Counter(polls.errors)
        polls.stop(POLL_WAIT_S + 10)
        # past its shares: its whole share of long polls, one wait each; once every one
        # has waited past a request's turn in the account's concurrency share (2 s), so
        # that it is surely counted, more are tried one at a time; then one queue too many
        full = _Polls(big, urls[:cap], once=True)
        full.start()
        _opened(full, cap, POLL_WAIT_S / 2, for_s=TURN_S)
        single = client(endpoint, *keys[FLOODER], attempts=1)
        refused, slowest = _past_the_cap(single, urls[0], EXTRA_POLLS,
                                         lambda: full.holding(TURN_S), cap)
        errors += full.errors
        start = time.monotonic()
        try:
            single.create_queue(QueueName="one-past-the-quota")
            over = "created"
        except ClientError as exc:
            over = str(exc.response.get("Error", {}).get("Code", ""))
        over_s = time.monotonic() - start
    finally:
        for opened in (polls, full):
            if opened is not None:
                opened.stop()
        server.stop()
    return TenantScale(queues, waits, alone, beside, holding, dict(errors), refused, slowest,
                       over, over_s)


def report(run: TenantScale) -> str:
    """The figures as a Markdown table, each against its target."""
    def row(what: str, figure: str, ok: bool, target: str) -> str:
        return f"| {what} | {figure} | {target} | {'PASS' if ok else 'FAIL'} |"

    errors = ", ".join(f"{k}: {v}" for k, v in sorted(run.poll_errors.items())) or "none"
    return "\n".join([
        f"| one tenant with {run.queues:,} queues and {run.waits:,} long polls (DMQ_AUTH="
        "required, 500 requests/s and 8 at once per account) | figure | target | |",
        "|---|---|---|---|",
        row("the other tenant's SendMessage p50, alone / beside it",
            f"{run.alone.p50_ms:.1f} / {run.beside.p50_ms:.1f} ms ({run.ratio:.2f}x; "
            f"{run.holding:,} polls held)", run.ratio <= RATIO_TARGET,
            f"<= {RATIO_TARGET:g}x"),
        row("a long poll past its share (RequestThrottled)",
            f"{run.refused_polls} of {EXTRA_POLLS} refused, slowest "
            f"{run.refused_poll_s * 1000:.0f} ms",
            run.refused_polls == EXTRA_POLLS and run.refused_poll_s <= REFUSED_WITHIN_S,
            f"all, each <= {REFUSED_WITHIN_S:g} s"),
        row("a CreateQueue past its quota (OverLimit)",
            f"{run.over_quota} in {run.over_quota_s * 1000:.0f} ms",
            run.over_quota == "OverLimit" and run.over_quota_s <= REFUSED_WITHIN_S,
            f"OverLimit <= {REFUSED_WITHIN_S:g} s"),
        row("its long polls' errors (5xx)", f"{run.server_errors} ({errors})",
            run.server_errors == 0, "0"),
    ])


def main(argv: Sequence[str] | None = None) -> TenantScale:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.tenant_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=10_000, help="the big tenant's queues")
    parser.add_argument("--waits", type=int, default=1000, help="its long polls held open")
    parser.add_argument("--calls", type=int, default=200, help="the quiet tenant's timed sends")
    args = parser.parse_args(argv)
    print(f"fair share at scale: {args.queues:,} queues and {args.waits:,} long polls of one "
          "tenant ...", flush=True)
    run = measure(args.queues, args.waits, args.calls)
    print("\n" + report(run) + "\n", flush=True)
    return run


if __name__ == "__main__":
    main()
