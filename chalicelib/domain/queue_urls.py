"""Queue URLs in every form SQS clients send, read in one place (pure: no I/O, no errors).

A queue is named by the URL's path, `/<account>/<name>`, whatever the host:
`http://127.0.0.1:9324/<account>/<name>`, `https://sqs.<region>.amazonaws.com/...`,
LocalStack's `http://sqs.<region>.localhost.localstack.cloud:4566/...`, its path style
`http://localhost:4566/queue/<region>/<account>/<name>`, or a bare queue name, which AWS
resolves in the caller's account and region. A URL may also name a region: by its host
(`sqs.<region>.`, `<region>.queue.`) or by LocalStack's `/queue/<region>/` path. A URL that
names none is served in the region the request is signed for.

`chalicelib.frontend.queue_urls` parses each request's QueueUrl once with this, into the
`QueueTarget` its context carries; logs and usage records read the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlparse

# What a queue name and an account id can be; anything else names no queue, and is never
# looked up (DynamoDB refuses keys over 2 KB: a huge name would be a store fault, a 503).
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}(\.fifo)?")
_ACCOUNT = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The shape of an AWS region name: us-east-1, ap-southeast-2, us-gov-west-1, cn-north-1,
# eu-isoe-west-1. Anything else (xx, ../, a 2 KB string) is not a region.
_REGION = re.compile(r"[a-z]{2}(-[a-z]{2,10}){1,2}-[0-9]{1,2}")
# Hosts that name a region: sqs.<region>.amazonaws.com (also .cn, .api.aws, fips and VPC
# endpoints), <region>.queue.amazonaws.com (the legacy form), and LocalStack's
# sqs.<region>.localhost.localstack.cloud and <region>.queue.localhost.localstack.cloud.
_HOST_REGION = re.compile(
    r"(?:^|\.)sqs(?:-fips)?\.(?P<sqs>[a-z0-9-]+)\.|^(?P<queue>[a-z0-9-]+)\.queue\.")
# The legacy endpoint of us-east-1 names no region in its host.
_LEGACY_HOSTS = {"queue.amazonaws.com": "us-east-1"}
_PATH_STYLE = "queue"  # LocalStack's /queue/<region>/<account>/<name>


def is_region(text: str) -> bool:
    """True when `text` is shaped as an AWS region name."""
    return len(text) <= 32 and bool(_REGION.fullmatch(text))


def could_be_queue(account: str, name: str) -> bool:
    """True when an account id and a queue name are shaped as they can be."""
    return bool(_ACCOUNT.fullmatch(account) and _QUEUE_NAME.fullmatch(name))


@dataclass(frozen=True)
class QueueTarget:
    """The queue a QueueUrl names."""

    account: str | None  # None: a bare queue name, in the caller's account
    name: str
    region: str | None = None  # the region the URL names; None: the request's

    def parts(self, caller_account: str) -> tuple[str, str]:
        """(account, name), a bare name resolved in the caller's account."""
        return self.account or caller_account, self.name


def parse_queue_url(url: str) -> QueueTarget | None:
    """The queue a QueueUrl names; None when it names none."""
    if "/" not in url:  # a bare queue name
        return QueueTarget(None, url) if _QUEUE_NAME.fullmatch(url) else None
    host = ""
    try:
        if "://" in url:
            parsed = urlparse(url)
            path, host = parsed.path, (parsed.hostname or "")
        else:  # a path alone, `/<account>/<name>` or `<account>/<name>`
            path = url.split("?", 1)[0]
    except ValueError:  # e.g. a malformed IPv6 host
        return None
    target = _target_of_parts([p for p in path.split("/") if p])
    if target is None:
        return None
    if target.region is None:
        region = _region_of_host(host)
        return QueueTarget(target.account, target.name, region) if region else target
    return target


def region_of_base(base_url: str) -> str | None:
    """The region the base of queue URLs (`scheme://host[:port][/path]`) names, read as
    `parse_queue_url` reads a URL on that base: a path ending in LocalStack's
    `/queue/<region>`, else the host; None when it names none."""
    try:
        parsed = urlparse(base_url)
        host = parsed.hostname or ""
    except ValueError:
        return None
    parts = [p for p in parsed.path.split("/") if p]
    if len(parts) >= 2 and parts[-2] == _PATH_STYLE and is_region(parts[-1]):
        return parts[-1]
    return _region_of_host(host)


def target_of_path(path: str) -> QueueTarget | None:
    """The queue a request's path names (`/<account>/<name>` or LocalStack's
    `/queue/<region>/<account>/<name>`), or None (`/`, or anything else)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) not in (2, 4):
        return None
    return _target_of_parts(parts) if len(parts) == 2 or parts[0] == _PATH_STYLE else None


def _target_of_parts(parts: list[str]) -> QueueTarget | None:
    if len(parts) < 2 or not could_be_queue(parts[-2], parts[-1]):
        return None
    region = parts[-3] if len(parts) >= 4 and parts[-4] == _PATH_STYLE else None
    return QueueTarget(parts[-2], parts[-1], region if region and is_region(region) else None)


def _region_of_host(host: str) -> str | None:
    host = host.lower()
    if host in _LEGACY_HOSTS:
        return _LEGACY_HOSTS[host]
    match = _HOST_REGION.search(host)
    if match is None:
        return None
    region = match.group("sqs") or match.group("queue")
    return region if is_region(region) else None


def queue_of_request(url: object, name: object, caller_account: str = "") -> str:
    """`<account>/<name>` of the queue a request names, for logs and usage records: its
    QueueUrl, else its QueueName (a bare name is prefixed with the caller's account when
    it is known); '' when it names none well."""
    if isinstance(url, str) and url:
        target = parse_queue_url(url)
        if target is None:
            return ""
        account, queue = target.parts(caller_account)
        return f"{account}/{queue}" if account else queue
    return name if isinstance(name, str) else ""
