"""The schedule handlers, each run once a minute: the internal and external cluster
managers, usage, retention, message move tasks, purged messages, queue metrics and push
delivery (the local server runs them on its own timers: dmqlocal/handlers.py)."""

from __future__ import annotations

from chalice import Blueprint, Rate
from chalice.app import CloudWatchEvent

from chalicelib import observability
from chalicelib.backend import maintenance
from chalicelib.frontend import queue_metrics
from chalicelib.handlers.container import ENTRY_MODULE, runtime

blueprint = Blueprint(ENTRY_MODULE)  # Lambda runs these as app.<name>
EVERY_MINUTE = Rate(1, unit=Rate.MINUTES)


def _live_local_regions() -> list[str]:
    """The regions this process runs back-end work for (client regions opened by the
    local server included), less those marked down."""
    return [r for r in runtime.served_regions() if runtime.health.up(r)]


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def region_heartbeat(event: CloudWatchEvent) -> None:
    """The internal cluster manager of each region: heartbeat, failover and rejoin."""
    for region in runtime.settings.local_regions:
        runtime.failover(region).tick()


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def manage_shards(event: CloudWatchEvent) -> None:
    """The internal cluster manager: forget scaled-in shards once they have drained."""
    for region in _live_local_regions():
        queues = runtime.services_for(region).queues
        for queue in queues.draining_queues():
            if queue.home == region:  # replicas follow the home's metadata
                queues.forget_drained(queue)


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def autoscale_shards(event: CloudWatchEvent) -> None:
    """The external cluster manager: split busy standard queues, merge quiet ones
    (docs/autoscaling.md; the local server runs it every DMQ_AUTOSCALE_INTERVAL_S)."""
    for region in _live_local_regions():
        autoscaler = runtime.services_for(region).autoscaler
        if autoscaler is not None:
            autoscaler.check(region)


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def manage_clusters(event: CloudWatchEvent) -> None:
    """The external cluster manager: record each cluster's utilization (active shards)."""
    for region in _live_local_regions():
        services = runtime.services_for(region)
        services.clusters.record_utilization(services.queues.all_queues())


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def flush_usage(event: CloudWatchEvent) -> None:
    """Write the usage counts held in memory (requests flush them too, when due)."""
    meter = runtime.meter()
    if meter is not None:
        meter.flush()


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def sweep_retention(event: CloudWatchEvent) -> None:
    """Remove messages past their retention period, from the shards the counts call
    active (holding messages or written lately), each when its sweep falls due."""
    for region in _live_local_regions():
        runtime.services_for(region).messages.catch_up_counts()  # the active shards' set
        backend = runtime.backend(region)
        homed = [q for q in backend.repo.scan_active() if q.home == region]
        maintenance.sweep_expired(backend.stores, homed, backend.clock.now_ms())


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def advance_move_tasks(event: CloudWatchEvent) -> None:
    """Run the message move tasks (dead-letter redrive) a bounded step at a time."""
    for region in _live_local_regions():
        runtime.services_for(region).move_tasks.advance(runtime.settings.move_task_run_s)


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def remove_purged_messages(event: CloudWatchEvent) -> None:
    """Remove the messages that PurgeQueue and DeleteQueue left behind, a bounded step at
    a time, from the pending purges of the control table (no queue is scanned)."""
    for region in _live_local_regions():
        purges = runtime.services_for(region).queues.purges
        if purges is not None:
            purges.advance(runtime.settings.purge_run_s)


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def emit_queue_gauges(event: CloudWatchEvent) -> None:
    """Each queue's gauges as CloudWatch metrics (EMF): visible, in-flight and delayed
    messages, the oldest message's age and, for dead-letter queues, their depth: what the
    dashboard and alarms in infra/ read."""
    if not observability.emitting():
        return
    for region in _live_local_regions():
        now_ms = runtime.backend(region).clock.now_ms()
        for g in queue_metrics.read(runtime.services_for(region), region, now_ms,
                                    stores=runtime.backend(region).stores):
            gauges = {"ApproximateNumberOfMessagesVisible": g.visible,
                      "ApproximateNumberOfMessagesNotVisible": g.in_flight,
                      "ApproximateNumberOfMessagesDelayed": g.delayed}
            if g.dead_letter_queue:
                gauges["DeadLetterQueueDepth"] = g.visible + g.in_flight + g.delayed
            observability.queue_gauges(g.account, g.queue, gauges, g.oldest_age_s)


@blueprint.schedule(EVERY_MINUTE)
@observability.flushed
def deliver_push(event: CloudWatchEvent) -> None:
    """Deliver subscribed queues' messages for DMQ_PUSH_RUN_S (0: the local loop does;
    push delivery: docs/push.md)."""
    regions = _live_local_regions() if runtime.settings.push_run_s > 0 else []
    for region in regions:  # one region per deployment region: they share the run
        runtime.push(region).run(runtime.settings.push_run_s / len(regions))
