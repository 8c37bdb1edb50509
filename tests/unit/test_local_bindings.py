"""GIVEN the app's stream handlers WHEN the local server picks the ones it runs THEN with
one region the queues stream (replication of queue records only) is left unread."""

from __future__ import annotations

from app import app
from dmqlocal.handlers import local_stream_bindings, stream_bindings


def test_one_region_leaves_the_queues_stream_unread() -> None:
    tables = {b.table for b in local_stream_bindings(app, "dmq-queues", ("us-east-1",))}
    assert "dmq-queues" not in tables
    assert "dmq-messages" in tables


def test_several_regions_read_every_stream() -> None:
    bindings = local_stream_bindings(app, "dmq-queues", ("us-east-1", "eu-west-1"))
    assert bindings == stream_bindings(app)
    assert "dmq-queues" in {b.table for b in bindings}
