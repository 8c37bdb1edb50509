"""Find the app's stream and schedule handlers, as Lambda's event source mappings would."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from chalice import Chalice, Rate
from chalice.app import Cron, DynamoDBEventConfig, ScheduledEventConfig

LambdaHandler = Callable[[dict[str, Any], Any], Any]
HEARTBEAT_SCHEDULE = "region_heartbeat"  # the app's heartbeat and failover handler
HEARTBEATS_PER_FAILOVER = 3
MOVE_TASKS_SCHEDULE = "advance_move_tasks"  # the app's message move task handler
AUTOSCALE_SCHEDULE = "autoscale_shards"  # the app's shard autoscaler
MOVE_TASKS_PERIOD_S = 1.0  # locally it steps the tasks every second (each run one pass)
MOVE_TASKS_IDLE_S = 15.0  # while none runs: a task another process started waits this long
PURGES_SCHEDULE = "remove_purged_messages"  # the app's removal of purged messages
PURGES_PERIOD_S = 1.0  # locally purged messages go within seconds of the request


@dataclass(frozen=True)
class StreamBinding:
    """A stream handler and the table whose stream feeds it."""

    table: str
    handler: LambdaHandler
    batch_size: int
    # As Lambda's MaximumBatchingWindowInSeconds: records wait up to this long for a
    # full batch (0: handed over at once).
    window_s: float = 0.0


@dataclass(frozen=True)
class ScheduleBinding:
    """A scheduled handler and its period in seconds."""

    name: str
    handler: LambdaHandler
    period_s: float
    # While `busy()` is false the handler runs every `idle_period_s` instead (None: always
    # `period_s`), and at the next tick after a request reaches the server.
    idle_period_s: float | None = None
    busy: Callable[[], bool] | None = None
    # When the handler asks to run again sooner than its period (epoch seconds; None:
    # at its period), read after each run.
    next_due: Callable[[], float | None] | None = None


def _resolve(handler_string: str) -> LambdaHandler:
    module_name, _, attr = handler_string.rpartition(".")
    handler: LambdaHandler = getattr(sys.modules[module_name], attr)
    return handler


def table_of_stream_arn(arn: str) -> str:
    """`arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>` -> `<name>`."""
    return arn.split(":table/", 1)[1].split("/", 1)[0]


def _period(expression: Any) -> float:
    if isinstance(expression, Rate):
        unit = {Rate.MINUTES: 60, Rate.HOURS: 3600, Rate.DAYS: 86400}[expression.unit]
        return float(expression.value * unit)
    if isinstance(expression, Cron):
        return 60.0
    return 60.0


def stream_bindings(app: Chalice) -> list[StreamBinding]:
    """Every `on_dynamodb_record` handler of the app."""
    return [
        StreamBinding(table_of_stream_arn(s.stream_arn), _resolve(s.handler_string), s.batch_size,
                      float(s.maximum_batching_window_in_seconds))
        for s in app.event_sources
        if isinstance(s, DynamoDBEventConfig)
    ]


def local_stream_bindings(app: Chalice, queues_table: str,
                          regions: tuple[str, ...]) -> list[StreamBinding]:
    """The stream handlers the local server runs: with one region, not the queues
    table's, which only replicates queue records to other regions.

    DynamoDB Local numbers stream records across all the tables of a database, and a
    read of a shard scans every record written since that shard's last one. Polling the
    queues stream, idle while messages flow, cost 0.7 s of DynamoDB Local's CPU per read
    after 11 minutes at 50 messages/s, and more every minute.
    """
    bindings = stream_bindings(app)
    if len(regions) > 1:
        return bindings
    return [b for b in bindings if b.table != queues_table]


def schedule_bindings(app: Chalice) -> list[ScheduleBinding]:
    """Every `schedule` handler of the app."""
    return [
        ScheduleBinding(s.name, _resolve(s.handler_string), _period(s.schedule_expression))
        for s in app.event_sources
        if isinstance(s, ScheduledEventConfig)
    ]


def local_schedule_bindings(app: Chalice, failover_after_s: float, scale: float = 1.0,
                            moves_busy: Callable[[], bool] | None = None,
                            autoscale_s: float | None = None,
                            autoscale_due: Callable[[], float | None] | None = None,
                            ) -> list[ScheduleBinding]:
    """The schedule handlers the local scheduler runs: the heartbeat and failover pass
    runs at least HEARTBEATS_PER_FAILOVER times per failover time (the scheduler scales
    periods by `scale`), so a region marked down is replaced about one failover time
    later instead of at the next minute's tick. On AWS the schedule's one minute is the
    least EventBridge allows, and the default failover time is three of them. The move
    task handler runs every second, so that a redrive moves at its rate (on AWS each
    minute's run steps the tasks for `DMQ_MOVE_TASK_RUN_S`). With `moves_busy` (whether
    the last pass found a task running, or this server started one since), it runs every
    MOVE_TASKS_IDLE_S while none does, and within a second of a request that started one.
    The shard autoscaler runs every `autoscale_s` (DMQ_AUTOSCALE_INTERVAL_S), when given,
    and also when `autoscale_due` says a merge falls due. The removal of purged messages
    runs every second (a run with nothing pending reads nothing: `service.purges`)."""
    beat_s = failover_after_s / HEARTBEATS_PER_FAILOVER / (scale or 1.0)
    moves_s = MOVE_TASKS_PERIOD_S / (scale or 1.0)
    purges_s = PURGES_PERIOD_S / (scale or 1.0)
    idle_s = MOVE_TASKS_IDLE_S / (scale or 1.0) if moves_busy is not None else None
    scale_s = (autoscale_s or 0) / (scale or 1.0)
    return [replace(b, period_s=min(b.period_s, beat_s)) if b.name == HEARTBEAT_SCHEDULE
            else replace(b, period_s=scale_s, next_due=autoscale_due)
            if b.name == AUTOSCALE_SCHEDULE and scale_s
            else replace(b, period_s=min(b.period_s, moves_s), idle_period_s=idle_s,
                         busy=moves_busy) if b.name == MOVE_TASKS_SCHEDULE
            else replace(b, period_s=min(b.period_s, purges_s)) if b.name == PURGES_SCHEDULE
            else b for b in schedule_bindings(app)]
