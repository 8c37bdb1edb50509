"""GIVEN DMQ's tables WHEN they are provisioned THEN the store has one epoch, kept as long as
its data is kept (a restart over the same tables) and new when the store starts empty
(a restart of the in-memory store, `DMQ_STORE=memory`)."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

from chalicelib.aws import Clients
from chalicelib.metadata.control import ControlRepository
from chalicelib.metadata.epoch import EPOCH_KEY, ensure_epoch, read_epoch
from chalicelib.runtime import Runtime
from chalicelib.settings import ConfigurationError, Settings
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY
from dmqlocal.folders import LocalFolders
from dmqlocal.memstore.process import MemoryStoreProcess
from infra import provision

CONTROL = "dmq-control"


def test_provisioning_creates_the_epoch_once(aws: Clients) -> None:
    # GIVEN tables just provisioned (the fixture ran create_all)
    epoch = read_epoch(aws.dynamodb, CONTROL)
    assert epoch is not None and len(epoch) == 16
    # WHEN they are provisioned again, as a restart over kept data does
    provision.create_all(aws.dynamodb, aws.s3)
    # THEN the epoch is the same, whoever asks for it
    assert read_epoch(aws.dynamodb, CONTROL) == epoch
    assert ensure_epoch(aws.dynamodb, CONTROL) == epoch
    assert provision.store_epoch(aws.dynamodb) == epoch
    assert ControlRepository(aws.dynamodb, CONTROL, ["c1"]).epoch() == epoch


def test_a_store_without_an_epoch_gets_one_on_first_use(aws: Clients) -> None:
    # GIVEN tables made by another tool (CloudFormation): no epoch item
    aws.dynamodb.delete_item(TableName=CONTROL, Key={"key": {"S": EPOCH_KEY}})
    assert read_epoch(aws.dynamodb, CONTROL) is None
    # WHEN the archive first asks THEN one is created and then kept
    first = ensure_epoch(aws.dynamodb, CONTROL, new_id=lambda: "e-first")
    assert first == "e-first"
    assert ensure_epoch(aws.dynamodb, CONTROL, new_id=lambda: "e-second") == "e-first"


def test_concurrent_starters_agree_on_one_epoch(aws: Clients) -> None:
    aws.dynamodb.delete_item(TableName=CONTROL, Key={"key": {"S": EPOCH_KEY}})

    def racing_id() -> str:
        # GIVEN another starter writes its epoch between this one's read and write
        ensure_epoch(aws.dynamodb, CONTROL, new_id=lambda: "e-other")
        return "e-mine"

    # THEN this starter adopts the other's epoch instead of overwriting it
    assert ensure_epoch(aws.dynamodb, CONTROL, new_id=racing_id) == "e-other"
    assert read_epoch(aws.dynamodb, CONTROL) == "e-other"


def _memory_store_run(settings: Settings) -> str:
    """Start the in-memory store, provision it, return its epoch, stop it."""
    store = MemoryStoreProcess()
    endpoint = store.start()
    try:
        clients = Clients(replace(settings, dynamodb_endpoint=endpoint,
                                  store_credentials=(ACCESS_KEY, SECRET_KEY)))
        provision.create_all(clients.dynamodb, None)
        return provision.store_epoch(clients.dynamodb)
    finally:
        store.stop()


def test_a_memory_store_restart_starts_a_new_epoch(settings: Settings) -> None:
    # GIVEN two runs of the memory store, one after the other
    first, second = _memory_store_run(settings), _memory_store_run(settings)
    # THEN each lifetime of the data has its own epoch
    assert first != second


def test_the_archive_stamps_each_record_and_key_with_its_store_epoch(
        aws: Clients, settings: Settings, tmp_path: Path) -> None:
    # GIVEN the runtime archiving into a data folder
    runtime = Runtime(replace(settings, data_dir=str(tmp_path)))
    runtime.local = LocalFolders()
    archiver = runtime.archiver()
    assert archiver is not None
    record = {"eventName": "INSERT", "awsRegion": "us-east-1",
              "eventSourceARN": "arn:aws:dynamodb:us-east-1:0:table/dmq-messages/stream/1",
              "dynamodb": {"SequenceNumber": "7", "ApproximateCreationDateTime": 1.0,
                           "Keys": {"pk": {"S": "q#0"}, "sk": {"S": "m1"}}}}
    # WHEN a batch is archived
    key = archiver.write_batch([record])
    # THEN its key and its record name the epoch of the store the batch came from
    epoch = read_epoch(aws.dynamodb, CONTROL)
    assert key is not None and key.endswith(f"/us-east-1-{epoch}-7-7.json.gz")
    (line,) = gzip.decompress((tmp_path / key).read_bytes()).splitlines()
    assert json.loads(line)["dmqEpoch"] == epoch


def test_a_folder_setting_without_the_local_server_is_refused_clearly(
        aws: Clients, settings: Settings, tmp_path: Path) -> None:
    # GIVEN the runtime as on Lambda (no local folders handed over), told to use folders
    runtime = Runtime(replace(settings, data_dir=str(tmp_path), bodies_dir=str(tmp_path)))
    # THEN it says which setting needs the local server, instead of failing later
    with pytest.raises(ConfigurationError, match="DMQ_DATA_DIR keeps data in a folder"):
        runtime.archiver()
    with pytest.raises(ConfigurationError, match="DMQ_BODIES_DIR keeps data in a folder"):
        runtime.services_for("us-east-1")
