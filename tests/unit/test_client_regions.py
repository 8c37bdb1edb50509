"""GIVEN the local server's client regions WHEN requests signed for a new region arrive at
once THEN the region is opened once, the others wait for it; a failed opening is an SQS
ServiceUnavailable and is tried again; past the limit, or with no opener, or once closed,
a new region is refused as AWS refuses a region it does not serve."""

from __future__ import annotations

import threading
import time

import pytest

from chalicelib.regions.clients import ClientRegions
from chalicelib.service.exceptions import ServiceUnavailableError, SignatureDoesNotMatchError


def test_concurrent_first_requests_open_a_region_once() -> None:
    calls: list[str] = []

    def opener(region: str) -> None:
        time.sleep(0.05)  # provisioning takes a while
        calls.append(region)

    regions = ClientRegions(opener)
    threads = [threading.Thread(target=regions.open, args=("eu-west-1",)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["eu-west-1"]
    assert regions.opened == ("eu-west-1",)


def test_a_failed_opening_is_unavailable_and_tried_again() -> None:
    attempts: list[str] = []

    def flaky(region: str) -> None:
        attempts.append(region)
        if len(attempts) == 1:
            raise OSError("store busy")

    regions = ClientRegions(flaky)
    with pytest.raises(ServiceUnavailableError):
        regions.open("ap-southeast-2")
    assert regions.opened == ()
    regions.open("ap-southeast-2")
    assert regions.opened == ("ap-southeast-2",) and len(attempts) == 2


def test_the_number_of_regions_is_bounded() -> None:
    regions = ClientRegions(lambda region: None, limit=2)
    regions.open("eu-west-1")
    regions.open("eu-west-2")
    with pytest.raises(SignatureDoesNotMatchError) as caught:
        regions.open("eu-west-3")
    assert "at most 2 regions" in caught.value.message
    regions.open("eu-west-1")  # an opened one is still served


def test_no_opener_or_closed_refuses_a_new_region() -> None:
    with pytest.raises(SignatureDoesNotMatchError):
        ClientRegions().open("eu-west-1")
    regions = ClientRegions(lambda region: None)
    regions.open("eu-west-1")
    regions.close()
    with pytest.raises(SignatureDoesNotMatchError):
        regions.open("eu-west-2")
    regions.open("eu-west-1")
    assert regions.opened == ("eu-west-1",)
