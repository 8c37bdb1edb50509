"""The DynamoDB stream handlers: replication of the messages and queues tables to the
replica regions, the release of deleted messages' S3 bodies, and the shard counts and
audit archive.

Each cluster's messages table has its own stream and so its own handlers, named for
Lambda after the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalice import Blueprint
from chalice.app import DynamoDBEvent

from chalicelib import observability
from chalicelib.backend import maintenance
from chalicelib.handlers.container import ENTRY_MODULE, runtime
from chalicelib.settings import get_settings

blueprint = Blueprint(ENTRY_MODULE)  # Lambda runs these as app.<name>

# The counts and the archive read each messages stream as a second consumer, apart from
# replication, so that a replica region that is down holds back neither.
# Records wait up to a second for a batch of 500: one count update per queue shard per
# second at most, however busy the queue.
COUNT_WINDOW_S = 1
COUNT_BATCH = 500


def _messages_changed(event: DynamoDBEvent) -> None:
    """Replicate the changes to the queues' replica regions; release the S3 bodies of
    messages that were deleted, purged or expired."""
    records = list(event.to_dict().get("Records", []))
    observability.add_count("StreamRecords", len(records))
    runtime.replicator().on_records(records)
    region = records[0].get("awsRegion", "") if records else ""
    backend = runtime.backend(region)
    maintenance.release_bodies(backend.bodies, ((r.event_name, r.old_image) for r in event))


def _archive(event: DynamoDBEvent) -> None:
    """Count the batch into its shards' message counts, then write it to the audit
    archive. A failure raises, so the batch is retried: the counts take each record once,
    and a retried batch overwrites its own archive object."""
    records = list(event.to_dict().get("Records", []))
    if records:
        runtime.backend(records[0].get("awsRegion", "")).counters.apply_records(records)
    archiver = runtime.archiver()
    if archiver is not None:
        archiver.write_batch(records)


@blueprint.on_dynamodb_record(stream_arn=get_settings().messages_stream_arn)
@observability.flushed
def on_message_change(event: DynamoDBEvent) -> None:
    """The default cluster's messages stream."""
    _messages_changed(event)


def _named(name: str, serve: Callable[[DynamoDBEvent], None]) -> Any:
    """A stream handler that runs `serve`, named `name` for Lambda."""

    def handler(event: DynamoDBEvent) -> None:
        serve(event)

    handler.__name__ = handler.__qualname__ = name
    return observability.flushed(handler)


def _cluster_stream_arn(cluster: str) -> str:
    settings = get_settings()
    return settings.messages_stream_arn.replace(
        f"table/{settings.messages_table}/", f"table/{settings.cluster_table(cluster)}/")


def _register_cluster_handlers() -> None:
    """Register the handlers of the clusters' messages streams: the replication handler
    of each further cluster (the default one's is `on_message_change`), then the counting
    and archive handler of every cluster."""
    clusters = get_settings().clusters
    for cluster in clusters[1:]:
        name = f"on_message_change_{cluster.replace('-', '_')}"
        blueprint.on_dynamodb_record(
            stream_arn=_cluster_stream_arn(cluster))(_named(name, _messages_changed))
    for cluster in clusters:
        name = f"archive_messages_{cluster.replace('-', '_')}"
        blueprint.on_dynamodb_record(
            stream_arn=_cluster_stream_arn(cluster), batch_size=COUNT_BATCH,
            maximum_batching_window_in_seconds=COUNT_WINDOW_S)(_named(name, _archive))


_register_cluster_handlers()


@blueprint.on_dynamodb_record(stream_arn=get_settings().queues_stream_arn)
@observability.flushed
def on_queue_change(event: DynamoDBEvent) -> None:
    """Replicate queue records (metadata) to their replica regions."""
    runtime.replicator().on_records(list(event.to_dict().get("Records", [])))
