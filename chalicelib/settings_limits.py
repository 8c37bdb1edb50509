"""The settings of throttling and fair share, read from the environment (docs/throttling.md):
request rates per account and per queue, each account's share of a process, its quota of
queues, the connection cap, and the networks push endpoints may be in (docs/push.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.push.destinations import parse_networks
from chalicelib.settings_checks import ConfigurationError, auth_mode

# Fair share with DMQ_AUTH=required, unless set (docs/throttling.md): each account's
# request rate, and how many of its requests one process serves at once.
REQUIRED_ACCOUNT_RPS = 100.0
REQUIRED_ACCOUNT_CONCURRENCY = 1
# With DMQ_AUTH=required, unless set: the share of the connection cap one account's
# long polls may hold at once (a quarter: 1,024 of the default 4,096).
REQUIRED_WAITS_SHARE = 4


def limit_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The per-account and per-queue limits, the connection cap and the push destinations.
    With DMQ_AUTH=required every account gets a request rate and a concurrency share unless
    the operator sets them (0 turns either off); the open mode keeps them off."""
    required = auth_mode(env) == "required"
    rps = env.get("DMQ_THROTTLE_ACCOUNT_RPS", "").strip()
    concurrency = env.get("DMQ_ACCOUNT_MAX_CONCURRENCY", "").strip()
    waits = env.get("DMQ_ACCOUNT_MAX_WAITS", "").strip()
    connections = max(1, int(env.get("DMQ_HTTP_MAX_CONNECTIONS", "4096")))
    networks = tuple(n.strip() for n in env.get("DMQ_PUSH_ALLOWED_NETWORKS", "").split(",")
                     if n.strip())
    try:
        parse_networks(networks)
    except ValueError as exc:
        raise ConfigurationError(f"DMQ_PUSH_ALLOWED_NETWORKS: {exc}") from exc
    return {
        "throttle_account_rps": float(rps) if rps else (
            REQUIRED_ACCOUNT_RPS if required else 0.0),
        "account_max_concurrency": max(0, int(concurrency)) if concurrency else (
            REQUIRED_ACCOUNT_CONCURRENCY if required else 0),
        "account_max_queues": max(0, int(env.get("DMQ_ACCOUNT_MAX_QUEUES", "100000") or 0)),
        "account_max_waits": max(0, int(waits)) if waits else (
            max(1, connections // REQUIRED_WAITS_SHARE) if required else 0),
        "http_max_connections": connections,
        "push_allowed_networks": networks,
        "throttle_account_burst": int(env.get("DMQ_THROTTLE_ACCOUNT_BURST", "0") or 0),
        "throttle_queue_rps": float(env.get("DMQ_THROTTLE_QUEUE_RPS", "0") or 0),
        "throttle_queue_burst": int(env.get("DMQ_THROTTLE_QUEUE_BURST", "0") or 0),
    }
