"""GIVEN the app's stream handlers WHEN the local server picks the ones it runs THEN with
one region the queues stream (replication of queue records only) is left unread."""

from __future__ import annotations

from app import app
from dmqlocal.handlers import (
    AUTOSCALE_SCHEDULE,
    HEARTBEAT_SCHEDULE,
    MOVE_TASKS_SCHEDULE,
    PURGES_SCHEDULE,
    local_schedule_bindings,
    local_stream_bindings,
    schedule_bindings,
    stream_bindings,
)


def test_one_region_leaves_the_queues_stream_unread() -> None:
    tables = {b.table for b in local_stream_bindings(app, "dmq-queues", ("us-east-1",))}
    assert "dmq-queues" not in tables
    assert "dmq-messages" in tables


def test_several_regions_read_every_stream() -> None:
    bindings = local_stream_bindings(app, "dmq-queues", ("us-east-1", "eu-west-1"))
    assert bindings == stream_bindings(app)
    assert "dmq-queues" in {b.table for b in bindings}


def test_the_local_heartbeat_follows_the_failover_time() -> None:
    # GIVEN a failover time of 6 s WHEN the local scheduler's periods are chosen
    periods = {b.name: b.period_s for b in local_schedule_bindings(app, 6.0)}
    # THEN the heartbeat and failover pass runs every 2 s, the move tasks and the removal of
    # purged messages every second; the other schedules keep theirs
    assert periods[HEARTBEAT_SCHEDULE] == 2.0
    assert periods[MOVE_TASKS_SCHEDULE] == 1.0
    assert periods[PURGES_SCHEDULE] == 1.0
    own = (HEARTBEAT_SCHEDULE, MOVE_TASKS_SCHEDULE, PURGES_SCHEDULE)
    assert {n: p for n, p in periods.items() if n not in own} == {
        b.name: b.period_s for b in schedule_bindings(app) if b.name not in own}
    # a scaled-down scheduler (the failover demo) keeps the same real period
    scaled = {b.name: b.period_s for b in local_schedule_bindings(app, 6.0, scale=0.5)}
    assert scaled[HEARTBEAT_SCHEDULE] * 0.5 == 2.0
    # a long failover time never slows the heartbeat below the app's own schedule
    assert {b.name: b.period_s for b in local_schedule_bindings(app, 3600.0)}[
        HEARTBEAT_SCHEDULE] == 60.0


def test_the_local_autoscaler_runs_at_its_interval() -> None:
    # GIVEN DMQ_AUTOSCALE_INTERVAL_S of 5 WHEN the local scheduler's periods are chosen
    periods = {b.name: b.period_s for b in local_schedule_bindings(app, 6.0, autoscale_s=5.0)}
    # THEN the autoscaler checks every 5 s (on AWS its schedule is once a minute)
    assert periods[AUTOSCALE_SCHEDULE] == 5.0
    assert {b.name: b.period_s for b in schedule_bindings(app)}[AUTOSCALE_SCHEDULE] == 60.0
