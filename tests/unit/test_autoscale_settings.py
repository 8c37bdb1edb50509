"""GIVEN the autoscaler's environment variables WHEN the settings are read THEN the
documented defaults hold, each variable sets its field, and a bad value stops DMQ with one
sentence naming the variable."""

from __future__ import annotations

import pytest

from chalicelib.clusters.autoscale_rules import ScalePolicy
from chalicelib.settings import ConfigurationError, Settings


def test_the_documented_defaults() -> None:
    policy = Settings.from_env({}).autoscale
    assert policy == ScalePolicy(target_rate=100.0, interval_s=60.0, cooldown_s=300.0,
                                 checks=3, enabled=True)
    assert policy.window_ms == 60_000


def test_each_variable_sets_its_field() -> None:
    policy = Settings.from_env({
        "DMQ_AUTOSCALE": "off", "DMQ_SHARD_TARGET_RATE": "12.5",
        "DMQ_AUTOSCALE_INTERVAL_S": "2", "DMQ_AUTOSCALE_COOLDOWN_S": "0",
        "DMQ_AUTOSCALE_CHECKS": "1"}).autoscale
    assert policy == ScalePolicy(target_rate=12.5, interval_s=2.0, cooldown_s=0.0, checks=1,
                                 enabled=False)
    assert policy.window_ms == 5_000  # the shortest window the load slots allow


@pytest.mark.parametrize(("name", "value"), [
    ("DMQ_AUTOSCALE", "sometimes"), ("DMQ_SHARD_TARGET_RATE", "0"),
    ("DMQ_SHARD_TARGET_RATE", "fast"), ("DMQ_SHARD_TARGET_RATE", "inf"),
    ("DMQ_AUTOSCALE_INTERVAL_S", "-1"), ("DMQ_AUTOSCALE_COOLDOWN_S", "-5"),
    ("DMQ_AUTOSCALE_CHECKS", "0"), ("DMQ_AUTOSCALE_CHECKS", "2.5"),
    ("DMQ_AUTOSCALE_INTERVAL_S", "nan"),
])
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        Settings.from_env({name: value})
