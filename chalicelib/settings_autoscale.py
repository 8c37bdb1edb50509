"""The shard autoscaler's settings, read from the environment (docs/autoscaling.md).

- `DMQ_AUTOSCALE`: `on` (default) or `off`;
- `DMQ_SHARD_TARGET_RATE`: messages per second per shard that trigger a split (100);
- `DMQ_AUTOSCALE_INTERVAL_S`: seconds between checks on the local server (60);
- `DMQ_AUTOSCALE_COOLDOWN_S`: how long a queue stays quiet before a merge (300);
- `DMQ_AUTOSCALE_CHECKS`: checks in a row over the target before a split (3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from chalicelib.clusters.autoscale_rules import ScalePolicy

_ON = ("on", "true", "1", "yes")
_OFF = ("off", "false", "0", "no")


def _number(env: Mapping[str, str], name: str, default: float, low: float,
            strict: bool) -> float:
    text = env.get(name, "").strip()
    if not text:
        return float(default)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not (value > low if strict else value >= low):
        bound = f"more than {low:g}" if strict else f"at least {low:g}"
        raise ValueError(f"{name}={text!r} is not a number {bound}.")
    return value


def autoscale_policy(env: Mapping[str, str]) -> ScalePolicy:
    """The policy the environment sets; ValueError names the variable that is wrong."""
    base = ScalePolicy()
    switch = env.get("DMQ_AUTOSCALE", "on").strip().lower() or "on"
    if switch not in _ON + _OFF:
        raise ValueError(f"DMQ_AUTOSCALE={switch!r} is not on or off.")
    checks = _number(env, "DMQ_AUTOSCALE_CHECKS", base.checks, 1, strict=False)
    if not checks.is_integer():
        raise ValueError(f"DMQ_AUTOSCALE_CHECKS={checks:g} is not a whole number.")
    return ScalePolicy(
        target_rate=_number(env, "DMQ_SHARD_TARGET_RATE", base.target_rate, 0, strict=True),
        interval_s=_number(env, "DMQ_AUTOSCALE_INTERVAL_S", base.interval_s, 0, strict=True),
        cooldown_s=_number(env, "DMQ_AUTOSCALE_COOLDOWN_S", base.cooldown_s, 0, strict=False),
        checks=int(checks), enabled=switch in _ON)
