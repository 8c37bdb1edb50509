"""DynamoDB Local's JVM copies its native SQLite library into its temporary folder at each
start. DMQ gives it a folder of its own and removes it at stop, killed or not, so that
starts do not pile up copies in the machine's temporary folder."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from dmqlocal.dynamodb_local import ACCESS_KEY, JVM_TMP, SECRET_KEY, DynamoDBLocal


@pytest.mark.parametrize("on_disk", [False, True], ids=["in-memory", "on-disk"])
@pytest.mark.parametrize("at_once", [False, True], ids=["terminated", "killed"])
def test_the_jvms_temporary_folder_is_removed_at_stop(at_once: bool, on_disk: bool,
                                                     tmp_path: Path) -> None:
    store = DynamoDBLocal(tmp_path / "db" if on_disk else None)
    try:
        endpoint = store.start()
        boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY).list_tables()
        scratch = store._scratch
        assert scratch is not None and scratch.is_dir()
        assert any("sqlite4java" in path.name for path in scratch.iterdir())
    finally:
        store.stop(at_once=at_once)
    assert not scratch.exists()


def test_a_folder_a_crash_left_in_the_database_folder_is_emptied_at_the_next_start(
    tmp_path: Path,
) -> None:
    left = tmp_path / "db" / JVM_TMP
    left.mkdir(parents=True)
    (left / "sqlite-392-old-libsqlite4java.so").write_bytes(b"x" * 1000)
    store = DynamoDBLocal(tmp_path / "db")
    try:
        store.start()
        assert not (left / "sqlite-392-old-libsqlite4java.so").exists()
    finally:
        store.stop()
    assert not left.exists()
