"""GIVEN `python -m dmqlocal` serving two regions with a short failover time
WHEN a replicated queue is created and its home region is marked down and up (`dmq
regions failover|restore`, the local simulation) THEN the replica knows the queue as soon
as it lists it, takes over about one failover time after the home went down (`--wait`
returns then), and keeps the queue when the old home comes back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from dmqcli import main as dmq
from dmqcli.admin_api import AdminApi
from dmqcli.errors import CliError
from tests.e2e.conftest import CLIENT_CONFIG, START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

HOME, REPLICA = "us-east-1", "eu-west-1"
FAILOVER_AFTER_S = 4.0


@pytest.fixture(scope="module")
def two_regions() -> Iterator[DmqProcess]:
    dmq = launch(DMQ_REGIONS=f"{HOME},{REPLICA}", DMQ_FAILOVER_AFTER_S=str(FAILOVER_AFTER_S))
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        yield dmq
    finally:
        assert dmq.stop(STOP_TIMEOUT_S) == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


def _sqs(dmq: DmqProcess, region: str) -> Any:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name=region,
                        aws_access_key_id="k", aws_secret_access_key="s", config=CLIENT_CONFIG)


@pytest.fixture(autouse=True)
def admin_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dmq` signs the admin calls with the credentials the environment gives it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")


def _region(server: DmqProcess, state: str, region: str) -> None:
    action = {"down": ["failover", "--yes"], "up": ["restore"]}[state]
    assert dmq.main(["--endpoint", server.url, "regions", *action, region]) == 0


def _home_of(sqs: Any, url: str) -> str:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqHomeRegion"])
    return str(attrs["Attributes"]["DmqHomeRegion"])


def _until(check: Any, timeout_s: float) -> float:
    """Seconds until `check()` is true (it may raise ClientError meanwhile)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        try:
            if check():
                return time.monotonic() - started
        except ClientError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout_s} s")


def test_a_replicated_queue_fails_over_and_stays_with_its_new_home(
    two_regions: DmqProcess,
) -> None:
    home, away = _sqs(two_regions, HOME), _sqs(two_regions, REPLICA)
    url = home.create_queue(QueueName="moving", Attributes={
        "DmqReplicaRegions": REPLICA, "DmqReplicationMode": "sync"})["QueueUrl"]
    # The replica lists the queue once its record has arrived; from then on it finds it
    # (at a URL naming the replica region, which is not the server's own).
    away_url = url.replace(f"{two_regions.url}/", f"{two_regions.url}/queue/{REPLICA}/")
    _until(lambda: away_url in away.list_queues().get("QueueUrls", []), 10)
    assert away.get_queue_url(QueueName="moving")["QueueUrl"] == away_url
    away.send_message(QueueUrl=url, MessageBody="before")  # forwarded to the home
    time.sleep(FAILOVER_AFTER_S)  # the replica has watched the home for a failover time

    started = time.monotonic()
    assert dmq.main(["--endpoint", two_regions.url, "regions", "failover", HOME,
                     "--wait", "30", "--yes"]) == 0
    took = time.monotonic() - started
    assert _until(lambda: away.send_message(QueueUrl=url, MessageBody="after"), 5) < 5
    print(f"\nthe replica took over {took:.1f} s after the home went down "
          f"(failover time {FAILOVER_AFTER_S} s)")
    assert took < FAILOVER_AFTER_S * 2.5
    assert _home_of(away, url) == REPLICA

    # The old home returns as a replica, and stays one through a second down and up
    # longer than the failover time.
    _region(two_regions, "up", HOME)
    assert _home_of(home, url) == REPLICA
    _region(two_regions, "down", HOME)
    time.sleep(FAILOVER_AFTER_S * 1.5)
    _region(two_regions, "up", HOME)
    time.sleep(FAILOVER_AFTER_S * 1.5)
    assert _home_of(home, url) == REPLICA == _home_of(away, url)
    bodies = []
    for _ in range(10):
        bodies += [m["Body"] for m in home.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
        if len(bodies) >= 2:
            break
    assert sorted(bodies) == ["after", "before"]


def test_the_simulation_refuses_an_unknown_state_or_region(
    two_regions: DmqProcess, capsys: pytest.CaptureFixture[str],
) -> None:
    assert dmq.main(["--endpoint", two_regions.url, "regions", "failover", "mars-north-1",
                     "--yes"]) == 1
    assert "InvalidParameterValue: Unknown region mars-north-1" in capsys.readouterr().err
    with pytest.raises(CliError, match=r"down, up or tick \(HTTP 400\)"):
        AdminApi(two_regions.url, HOME, Credentials("k", "s")).post(
            f"/admin/regions/{HOME}/sideways")
