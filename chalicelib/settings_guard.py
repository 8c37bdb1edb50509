"""The settings of every cluster's bulkhead and circuit breaker, read from the environment
(`DMQ_BULKHEAD_*`, `DMQ_BREAKER_*`; docs/isolation.md). A bad value is a ValueError that
names its variable in one sentence (for `Settings.from_env` to make a ConfigurationError of)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

# A full bulkhead may make a call wait this long at most for a slot: longer would be a
# queue in front of a stalled store, which is what the bulkhead is there to prevent.
MAX_BULKHEAD_WAIT_MS = 1000
SHARED_STATE_CHOICES = ("auto", "process", "control-table")


@dataclass(frozen=True)
class GuardSettings:
    """How each cluster's store calls are bounded and when its breaker opens.

    The breaker follows resilience4j's rules: over the last `window_calls` calls (once at
    least `minimum_calls` are in), it opens when the share of failed calls reaches
    `failure_rate_pct` or the share of calls slower than `slow_call_ms` reaches
    `slow_call_rate_pct`; it stays open `open_wait_ms`, then lets `half_open_calls` probes
    through, which close it again or open it anew.
    """

    # Concurrent store calls per cluster; 0 turns it off. None (unset): as many as the
    # store client's connection pool holds, which follows the requests the server serves
    # at once (`chalicelib.aws.store_concurrency`, applied with `sized` where the guards
    # are wired); a guard given None has no bulkhead.
    bulkhead_max_calls: int | None = None
    bulkhead_max_wait_ms: int = 0  # how long a call may wait for a slot (0: fail at once)
    breaker_enabled: bool = True
    window_calls: int = 50
    minimum_calls: int = 20
    failure_rate_pct: float = 50.0
    slow_call_rate_pct: float = 80.0
    slow_call_ms: int = 2000
    open_wait_ms: int = 5000
    half_open_calls: int = 5
    # Half open longer than this (probes that never finish, or a Lambda instance frozen
    # while it held them) opens the breaker again. resilience4j's 0, wait for ever, is not
    # offered: other instances would wait on a frozen one.
    half_open_max_wait_ms: int = 10_000
    # How often an instance reads the breaker state the others share (cached between).
    sync_ms: int = 2000
    # Where the state lives: "process", "control-table" (shared by every instance of a
    # region), or "auto" (the control table on Lambda, the process elsewhere).
    shared_state: str = "auto"

    def __post_init__(self) -> None:
        for name in ("window_calls", "minimum_calls", "half_open_calls",
                     "half_open_max_wait_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{_ENV[name]} must be at least 1")
        for name in ("bulkhead_max_calls", "bulkhead_max_wait_ms", "slow_call_ms",
                     "open_wait_ms", "sync_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{_ENV[name]} must not be negative")
        if self.bulkhead_max_wait_ms > MAX_BULKHEAD_WAIT_MS:
            raise ValueError(
                f"{_ENV['bulkhead_max_wait_ms']} must be at most {MAX_BULKHEAD_WAIT_MS}")
        for name in ("failure_rate_pct", "slow_call_rate_pct"):
            if not 0 < getattr(self, name) <= 100:
                raise ValueError(f"{_ENV[name]} must be a percentage above 0, up to 100")
        if self.shared_state not in SHARED_STATE_CHOICES:
            raise ValueError(
                f"{_ENV['shared_state']} must be one of {', '.join(SHARED_STATE_CHOICES)}")

    @property
    def effective_minimum_calls(self) -> int:
        """The calls needed before a rate counts: never more than the window holds."""
        return min(self.minimum_calls, self.window_calls)

    def sized(self, calls: int) -> GuardSettings:
        """These settings with the bulkhead `calls` wide, unless one was chosen."""
        return self if self.bulkhead_max_calls is not None else replace(
            self, bulkhead_max_calls=calls)

    def shares_state(self, on_lambda: bool) -> bool:
        """Whether the breaker state lives in the control table."""
        return self.shared_state == "control-table" or (
            self.shared_state == "auto" and on_lambda)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GuardSettings:
        """The settings `env` gives; the defaults for what it leaves unset or blank."""
        values: dict[str, Any] = {}
        for field in fields(cls):
            text = env.get(_ENV[field.name], "").strip()
            if text:
                values[field.name] = _parse(field.name, text)
        return cls(**values)


_ENV = {
    "bulkhead_max_calls": "DMQ_BULKHEAD_MAX_CALLS",
    "bulkhead_max_wait_ms": "DMQ_BULKHEAD_MAX_WAIT_MS",
    "breaker_enabled": "DMQ_BREAKER_ENABLED",
    "window_calls": "DMQ_BREAKER_WINDOW_CALLS",
    "minimum_calls": "DMQ_BREAKER_MINIMUM_CALLS",
    "failure_rate_pct": "DMQ_BREAKER_FAILURE_RATE_PCT",
    "slow_call_rate_pct": "DMQ_BREAKER_SLOW_CALL_RATE_PCT",
    "slow_call_ms": "DMQ_BREAKER_SLOW_CALL_MS",
    "open_wait_ms": "DMQ_BREAKER_OPEN_WAIT_MS",
    "half_open_calls": "DMQ_BREAKER_HALF_OPEN_CALLS",
    "half_open_max_wait_ms": "DMQ_BREAKER_HALF_OPEN_MAX_WAIT_MS",
    "sync_ms": "DMQ_BREAKER_SYNC_MS",
    "shared_state": "DMQ_BREAKER_STATE",
}
ENV_NAMES = tuple(_ENV.values())


def _flag(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


_PARSERS: dict[str, Callable[[str], Any]] = {
    "breaker_enabled": _flag,
    "failure_rate_pct": float,
    "slow_call_rate_pct": float,
    "shared_state": str.lower,
}


def _parse(name: str, text: str) -> Any:
    try:
        return _PARSERS.get(name, int)(text)
    except ValueError:
        raise ValueError(f"{_ENV[name]}={text} is not a valid value") from None
