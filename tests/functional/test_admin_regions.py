"""GIVEN a deployment of one region, or of two WHEN an admin marks a region down (the local
simulation behind `dmq regions failover`) THEN marking down the last healthy region is
refused with an SQS-shaped error and changes nothing, unless forced; with a healthy
region left to take over, it goes down as before."""

from __future__ import annotations

import json

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.regions.admin_api import check_failover, takeover_regions
from chalicelib.service.exceptions import FailoverRefusedError
from chalicelib.settings import Settings
from dmqlocal.region_simulation import mark_region, set_region_state
from infra import provision

HOME, OTHER = "us-east-1", "eu-west-1"


def test_the_only_region_is_not_marked_down(dmq: Client) -> None:
    with pytest.raises(FailoverRefusedError) as exc:
        mark_region(runtime, HOME, up=False)
    assert exc.value.code == "FailoverRefused" and exc.value.status == 409
    assert "No other healthy region can take over from us-east-1" in exc.value.message
    assert "force=true" in exc.value.message
    assert runtime.health.up(HOME)
    assert runtime.health.down_regions() == []


def test_the_refusal_is_answered_in_the_admin_error_shape(dmq: Client) -> None:
    response = set_region_state(runtime, HOME, "down")
    assert response.status_code == 409
    body = response.body if isinstance(response.body, dict) else json.loads(response.body)
    assert body["code"] == "FailoverRefused"
    assert "us-east-1" in body["message"]
    assert runtime.health.up(HOME)


def test_forced_the_only_region_goes_down_and_comes_back(dmq: Client) -> None:
    view = mark_region(runtime, HOME, up=False, force=True)
    assert [(r["region"], r["up"]) for r in view["regions"]] == [(HOME, False)]
    assert runtime.health.down_regions() == [HOME]
    # Already down: marking it down again changes nothing and is not refused.
    check_failover(runtime, HOME)
    mark_region(runtime, HOME, up=True)
    assert runtime.health.up(HOME)


def test_an_unknown_region_is_still_an_invalid_parameter(dmq: Client) -> None:
    response = set_region_state(runtime, "mars-north-1", "down")
    assert response.status_code == 400
    body = response.body if isinstance(response.body, dict) else json.loads(response.body)
    assert body["code"] == "InvalidParameterValue"


@pytest.fixture
def two_regions(aws: Clients, dmq: Client) -> None:
    """The runtime reconfigured for a deployment of two regions, both with their tables."""
    settings = Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                        regions=(HOME, OTHER), hosted_regions=(HOME, OTHER))
    other = Clients(settings, OTHER)
    provision.create_all(other.dynamodb, other.s3, region=OTHER)
    runtime.configure(settings)


def test_a_region_with_a_healthy_peer_goes_down_but_the_last_one_does_not(
    two_regions: None,
) -> None:
    assert takeover_regions(runtime, HOME) == [OTHER]
    view = mark_region(runtime, HOME, up=False)
    assert {r["region"]: r["up"] for r in view["regions"]} == {HOME: False, OTHER: True}
    assert takeover_regions(runtime, OTHER) == []
    with pytest.raises(FailoverRefusedError):
        mark_region(runtime, OTHER, up=False)
    assert runtime.health.down_regions() == [HOME]
