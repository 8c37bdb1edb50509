"""GIVEN DMQ serving over HTTP WHEN the admin CLI lists, shows and peeks
THEN it prints every queue, the counts, and the oldest messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

import app as dmq_app
from chalicelib.settings import Settings
from dmqlocal import admin
from dmqlocal.runner import LocalDmq, LocalOptions


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    local = LocalDmq(dmq_app.app, dmq_app.runtime,
                     LocalOptions(host="127.0.0.1", port=0, settings=Settings(),
                                  data_dir=str(tmp_path)))
    url = local.start()
    yield url
    local.stop()


def test_admin_cli_lists_shows_and_peeks(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    sqs = boto3.client("sqs", endpoint_url=server, region_name="us-east-1",
                       aws_access_key_id="k", aws_secret_access_key="s")
    url = sqs.create_queue(QueueName="audit-me")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="first")
    sqs.send_message(QueueUrl=url, MessageBody="second")

    assert admin.main(["--endpoint", server, "queues"]) == 0
    assert "000000000000/audit-me" in capsys.readouterr().out

    assert admin.main(["--endpoint", server, "show", "000000000000/audit-me"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["visible"] == 2

    assert admin.main(["--endpoint", server, "peek", "000000000000/audit-me", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "'first'" in out and "'second'" not in out

    with pytest.raises(SystemExit, match="error 404"):
        admin.main(["--endpoint", server, "show", "000000000000/missing"])
