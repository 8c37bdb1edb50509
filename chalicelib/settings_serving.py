"""The settings of how DMQ serves and runs its background work, read from the environment:
long polls and caches, the local HTTP server's limits, logs and metrics, the features that
can be turned off (fair queues, request deduplication), and how long the move-task, push
and export runs take or how often they come."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chalicelib.settings import Settings

_OFF = ("off", "false", "0", "no")


def serving_settings(env: Mapping[str, str], base: Settings,
                     on_lambda: bool) -> dict[str, Any]:
    """The serving fields of the settings; `base` gives the defaults off Lambda."""
    return {
        "long_poll_interval_ms": int(
            env.get("DMQ_LONG_POLL_INTERVAL_MS", base.long_poll_interval_ms)),
        "metadata_cache_seconds": float(
            env.get("DMQ_METADATA_CACHE_SECONDS", base.metadata_cache_seconds)),
        "usage_flush_s": float(env.get("DMQ_USAGE_FLUSH_S", base.usage_flush_s)),
        "fair_queues": _on_unless_off(env, "DMQ_FAIR_QUEUES"),
        "export_interval_s": float(env.get("DMQ_EXPORT_INTERVAL_S", base.export_interval_s)),
        "log_format": env.get("DMQ_LOG_FORMAT", "json" if on_lambda else base.log_format),
        "log_level": env.get("DMQ_LOG_LEVEL", base.log_level),
        "metrics": env.get("DMQ_METRICS", "emf" if on_lambda else base.metrics),
        "http_idle_timeout_s": float(
            env.get("DMQ_HTTP_IDLE_TIMEOUT_S", base.http_idle_timeout_s)),
        "http_request_timeout_s": float(
            env.get("DMQ_HTTP_REQUEST_TIMEOUT_S", base.http_request_timeout_s)),
        "http_max_body_bytes": int(
            env.get("DMQ_HTTP_MAX_BODY_BYTES", base.http_max_body_bytes)),
        "move_task_run_s": float(
            env.get("DMQ_MOVE_TASK_RUN_S", 20.0 if on_lambda else base.move_task_run_s)),
        "purge_run_s": float(
            env.get("DMQ_PURGE_RUN_S", 20.0 if on_lambda else base.purge_run_s)),
        "push_run_s": float(env.get("DMQ_PUSH_RUN_S", 20.0 if on_lambda else base.push_run_s)),
        "push_workers": max(1, int(env.get("DMQ_PUSH_WORKERS", base.push_workers))),
        "request_dedup": _on_unless_off(env, "DMQ_REQUEST_DEDUP"),
    }


def _on_unless_off(env: Mapping[str, str], name: str) -> bool:
    """A switch that is on unless set to off (or false, 0, no)."""
    return env.get(name, "on").strip().lower() not in _OFF
