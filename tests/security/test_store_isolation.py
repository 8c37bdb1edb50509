"""GIVEN DMQ on its default store WHEN someone else reaches DynamoDB Local's port, or
reads the data folder THEN DynamoDB Local listens on loopback only, another client sees
none of DMQ's tables (whatever key it signs with), and every file under the data folder
is the user's alone (0600 files, 0700 folders)."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from dmqlocal.dynamodb_local import ACCESS_KEY
from dmqlocal.store_key import KEY_FILE
from tests.e2e.conftest import START_TIMEOUT_S, DmqProcess, launch
from tests.e2e.test_stop_signals import _store_pids

LISTEN = "0A"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[DmqProcess, Path]]:
    data_dir = tmp_path / "data"
    dmq = launch(DMQ_DATA_DIR=str(data_dir))
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        yield dmq, data_dir
    finally:
        dmq.stop(30)


def _store_port(data_dir: Path) -> int:
    pid = _store_pids(str(data_dir))[0]
    words = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    return int(words[words.index(b"-port") + 1])


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net shows them) listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == LISTEN:
                found.append(address)
    return found


def test_dynamodb_local_listens_on_loopback_only(served: tuple[DmqProcess, Path]) -> None:
    _, data_dir = served
    addresses = _listening(_store_port(data_dir))
    assert addresses, "DynamoDB Local is not listening"
    loopback = {"0100007F", "0000000000000000FFFF00000100007F"}
    assert set(addresses) <= loopback, addresses


@pytest.mark.parametrize("key", [ACCESS_KEY, "AKIAANYTHING", "test"])
def test_another_client_of_the_store_sees_none_of_dmqs_tables(
    served: tuple[DmqProcess, Path], key: str,
) -> None:
    _, data_dir = served
    endpoint = f"http://127.0.0.1:{_store_port(data_dir)}"
    own_key = (data_dir / KEY_FILE).read_text().strip()
    assert own_key != ACCESS_KEY and len(own_key) >= 32

    def tables(access_key: str) -> list[str]:
        client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id=access_key, aws_secret_access_key="x")
        return list(client.list_tables()["TableNames"])

    assert tables(own_key), "DMQ's own key should see its tables"
    assert tables(key) == []


def test_every_file_under_the_data_folder_is_private(served: tuple[DmqProcess, Path]) -> None:
    dmq, data_dir = served
    sqs = boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                       aws_access_key_id="k", aws_secret_access_key="s")
    url = sqs.create_queue(QueueName="private")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x" * 300_000)  # a large body: a file
    paths = [data_dir, *data_dir.rglob("*")]
    assert any(p.suffix == ".db" for p in paths)
    shared = [f"{p} {stat.filemode(p.stat().st_mode)}" for p in paths
              if p.exists() and p.stat().st_mode & 0o077]
    assert shared == []


def test_a_folder_from_before_the_store_key_keeps_its_queues(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = launch(DMQ_DATA_DIR=str(data_dir))
    try:
        assert first.wait_ready(START_TIMEOUT_S), first.output
        boto3.client("sqs", endpoint_url=first.url, region_name="us-east-1",
                     aws_access_key_id="k", aws_secret_access_key="s",
                     ).create_queue(QueueName="from-before")
    finally:
        assert first.stop(30) == 0, first.output
    key = (data_dir / KEY_FILE).read_text().strip()
    for db in (data_dir / "dynamodb").glob(f"{key}_*.db"):  # as an older DMQ named them
        db.rename(db.with_name(f"{ACCESS_KEY}_{db.name[len(key) + 1:]}"))
    (data_dir / KEY_FILE).unlink()
    again = launch(DMQ_DATA_DIR=str(data_dir))
    try:
        assert again.wait_ready(START_TIMEOUT_S), again.output
        urls = boto3.client("sqs", endpoint_url=again.url, region_name="us-east-1",
                            aws_access_key_id="k", aws_secret_access_key="s",
                            ).list_queues().get("QueueUrls", [])
    finally:
        again.stop(30)
    assert [u.rsplit("/", 1)[1] for u in urls] == ["from-before"]
    assert not list((data_dir / "dynamodb").glob(f"{ACCESS_KEY}_*.db"))
