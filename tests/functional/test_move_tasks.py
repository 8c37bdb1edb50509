"""GIVEN dead letters WHEN a message move task runs THEN they go back, as SQS moves them.

StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask as the SQS API
reference and SQS's observed behaviour (LocalStack's AWS-validated snapshots) describe them:
shapes, errors and their wording, the rate, cancellation, and a task that survives a crash
or a restart of the server moving every message exactly once.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from app import runtime
from chalicelib.settings import Settings
from tests.clocks import FakeClock
from tests.conftest import sqs_client
from tests.functional.test_faults import Faults

BUSY = ("There is already a task running. Only one active task is allowed for a source "
        "queue arn at a given time.")
# Cancelling a task that has ended: SQS documents that only a RUNNING task can be cancelled.
# (botocore names the error by its legacy code, sent in x-amzn-query-error.)
ENDED = ("AWS.SimpleQueueService.UnsupportedOperation",
         "Only a task with the status RUNNING can be cancelled.", 400)


# -- helpers ----------------------------------------------------------------------------
def _arn(sqs: Any, url: str) -> str:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(found["Attributes"]["QueueArn"])


def _pipe(sqs: Any, name: str = "work", dlq: str = "dead") -> tuple[str, str]:
    """A DLQ and a source queue redriving into it after one receive."""
    dlq_url = sqs.create_queue(QueueName=dlq)["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, dlq_url), "maxReceiveCount": 1})
    source = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    return str(source), str(dlq_url)


def _dead_letter(sqs: Any, source: str, bodies: list[str]) -> None:
    """Send the bodies to `source` and receive each once, so the next receive moves them."""
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": b,
                    "MessageAttributes": {"n": {"DataType": "Number", "StringValue": str(i)}}}
                   for i, b in enumerate(bodies[start:start + 10])]
        sqs.send_message_batch(QueueUrl=source, Entries=entries)
    for _ in range(10 * len(bodies) + 5):
        got = sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)
        if not got.get("Messages"):
            return
    raise AssertionError("messages did not reach the DLQ")


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Receive (and hide for an hour) everything visible in a queue."""
    found: list[dict[str, Any]] = []
    for _ in range(200):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=3600,
                                  AttributeNames=["All"], MessageAttributeNames=["All"])
        if not got.get("Messages"):
            return found
        found += got["Messages"]
    raise AssertionError("queue did not drain")


def _advance() -> int:
    """One pass of the back end over the running tasks (what the scheduled handler runs)."""
    return runtime.services_for().move_tasks.advance()


def _tasks(sqs: Any, source_arn: str, n: int = 1) -> list[dict[str, Any]]:
    return list(sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=n)["Results"])


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    response = exc.value.response
    return (response["Error"]["Code"], response["Error"]["Message"],
            response["ResponseMetadata"]["HTTPStatusCode"])


def _restart(settings: Settings, clock: FakeClock) -> None:
    """A new server process over the same store: every object rebuilt, nothing kept."""
    runtime.configure(settings, clock)


# -- StartMessageMoveTask ------------------------------------------------------------------
def test_task_handle_is_base64_json_naming_the_task_and_its_source(sqs: Any) -> None:
    # GIVEN a DLQ holding a message
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, ["m"])
    # WHEN a task starts THEN its handle is SQS's: base64 of {"taskId", "sourceArn"}
    handle = sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))["TaskHandle"]
    doc = json.loads(base64.b64decode(handle))
    assert set(doc) == {"taskId", "sourceArn"}
    assert uuid.UUID(doc["taskId"])
    assert doc["sourceArn"] == _arn(sqs, dlq)


def test_basic_workflow_to_a_destination(sqs: Any) -> None:
    # GIVEN two messages in a DLQ and another queue as the destination
    source, dlq = _pipe(sqs)
    destination = sqs.create_queue(QueueName="elsewhere")["QueueUrl"]
    _dead_letter(sqs, source, ["message-1", "message-2"])
    dlq_arn, dest_arn = _arn(sqs, dlq), _arn(sqs, destination)
    # WHEN a task moves them and the back end runs
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=dest_arn)
    assert _advance() == 2
    # THEN they are in the destination, not in the DLQ nor back in the source
    assert sorted(m["Body"] for m in _drain(sqs, destination)) == ["message-1", "message-2"]
    assert _drain(sqs, dlq) == []
    assert _drain(sqs, source) == []
    # AND the next pass finds the DLQ empty: the task is COMPLETED, listed as SQS lists it
    _advance()
    (task,) = _tasks(sqs, dlq_arn)
    assert isinstance(task.pop("StartedTimestamp"), int)
    assert task == {"ApproximateNumberOfMessagesMoved": 2, "ApproximateNumberOfMessagesToMove": 2,
                    "DestinationArn": dest_arn, "SourceArn": dlq_arn, "Status": "COMPLETED"}


def test_without_destination_each_message_returns_to_its_own_source(sqs: Any) -> None:
    # GIVEN one DLQ behind two source queues, each with a dead letter
    first, dlq = _pipe(sqs, "first")
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": 1})
    second = sqs.create_queue(QueueName="second", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    _dead_letter(sqs, first, ["from-first"])
    _dead_letter(sqs, second, ["from-second"])
    # WHEN a task without DestinationArn runs
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    _advance()
    _advance()
    # THEN each message is back in the queue it was dead-lettered from
    assert [m["Body"] for m in _drain(sqs, first)] == ["from-first"]
    assert [m["Body"] for m in _drain(sqs, second)] == ["from-second"]
    (task,) = _tasks(sqs, _arn(sqs, dlq))
    assert task["Status"] == "COMPLETED"
    assert task["ApproximateNumberOfMessagesMoved"] == 2
    assert "DestinationArn" not in task


def test_redriven_message_is_new_unreceived_and_keeps_body_and_attributes(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a dead letter received once from the DLQ too
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, ["again"])
    clock.advance(30)
    seen = sqs.receive_message(QueueUrl=dlq, VisibilityTimeout=0, AttributeNames=["All"])
    (in_dlq,) = seen["Messages"]
    assert in_dlq["Attributes"]["ApproximateReceiveCount"] == "2"  # the source's one, and this
    # WHEN it is redriven
    clock.advance(1)
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    _advance()
    # THEN the source receives it as a new message: new id, new send time, receive count
    # starting again at 1, its body and attributes unchanged
    (back,) = _drain(sqs, source)
    assert back["Body"] == "again"
    assert back["MessageAttributes"] == {"n": {"DataType": "Number", "StringValue": "0"}}
    assert back["MessageId"] != in_dlq["MessageId"]
    assert back["Attributes"]["ApproximateReceiveCount"] == "1"
    assert int(back["Attributes"]["SentTimestamp"]) == clock.now_ms()
    assert back["MD5OfBody"] == in_dlq["MD5OfBody"]


def test_large_body_is_redriven_intact(sqs: Any) -> None:
    # GIVEN a dead letter whose body is kept in the body store (too large for an item)
    source, dlq = _pipe(sqs)
    body = "x" * 400_000
    _dead_letter(sqs, source, [body])
    # WHEN it is redriven THEN it arrives whole
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    _advance()
    (back,) = _drain(sqs, source)
    assert back["Body"] == body


@pytest.mark.parametrize("rate", [0, 501, -1])
def test_rate_outside_1_to_500_is_invalid(sqs: Any, rate: int) -> None:
    _source, dlq = _pipe(sqs)
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn=_arn(sqs, dlq), MaxNumberOfMessagesPerSecond=rate)
    assert _error(exc) == (
        "InvalidParameterValue", "Value for parameter MaxNumberOfMessagesPerSecond is invalid. "
        "Reason: You must enter a number that's between 1 and 500.", 400)


@pytest.mark.parametrize("rate", [1, 500])
def test_rate_limits_are_accepted_and_listed(sqs: Any, rate: int) -> None:
    _source, dlq = _pipe(sqs)
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq), MaxNumberOfMessagesPerSecond=rate)
    (task,) = _tasks(sqs, _arn(sqs, dlq))
    assert task["MaxNumberOfMessagesPerSecond"] == rate


def test_source_that_does_not_exist(sqs: Any) -> None:
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn="arn:aws:sqs:us-east-1:000000000000:nowhere")
    assert _error(exc) == (
        "ResourceNotFoundException",
        "The resource that you specified for the SourceArn parameter doesn't exist.", 404)


def test_source_that_is_not_an_arn(sqs: Any) -> None:
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn="not-an-arn")
    assert _error(exc)[0] == "ResourceNotFoundException"


def test_source_must_be_a_dead_letter_queue(sqs: Any) -> None:
    # GIVEN a queue no queue redrives into
    plain = sqs.create_queue(QueueName="plain")["QueueUrl"]
    other = sqs.create_queue(QueueName="other")["QueueUrl"]
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn=_arn(sqs, plain), DestinationArn=_arn(sqs, other))
    assert _error(exc) == (
        "InvalidParameterValue", "Source queue must be configured as a Dead Letter Queue.", 400)


def test_destination_must_exist(sqs: Any) -> None:
    source, dlq = _pipe(sqs)
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn=_arn(sqs, dlq),
                                    DestinationArn=_arn(sqs, source) + "doesntexist")
    assert _error(exc) == (
        "ResourceNotFoundException",
        "The resource that you specified for the DestinationArn parameter doesn't exist.", 404)


def test_destination_cannot_be_the_source(sqs: Any) -> None:
    _source, dlq = _pipe(sqs)
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn=_arn(sqs, dlq), DestinationArn=_arn(sqs, dlq))
    assert _error(exc)[0] == "InvalidParameterValue"


@pytest.mark.parametrize(("action", "parameter"), [
    ("start_message_move_task", "SourceArn"), ("list_message_move_tasks", "SourceArn"),
    ("cancel_message_move_task", "TaskHandle"),
])
def test_required_parameters(dmq: Client, action: str, parameter: str) -> None:
    raw = sqs_client(dmq, "us-east-1", Config(parameter_validation=False))
    with pytest.raises(ClientError) as exc:
        getattr(raw, action)()
    assert _error(exc) == (
        "MissingParameter", f"The request must contain the parameter {parameter}.", 400)


def test_one_active_task_per_source(sqs: Any) -> None:
    # GIVEN a running task
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, [f"m{i}" for i in range(4)])
    dlq_arn = _arn(sqs, dlq)
    sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)
    # WHEN a second starts THEN SQS's error
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)
    assert _error(exc) == ("InvalidParameterValue", BUSY, 400)


def test_a_new_task_may_start_once_the_last_one_ended(sqs: Any) -> None:
    _source, dlq = _pipe(sqs)
    dlq_arn = _arn(sqs, dlq)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    _advance()  # nothing to move: COMPLETED
    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert [t["Status"] for t in _tasks(sqs, dlq_arn, 10)] == ["RUNNING", "COMPLETED"]


# -- ListMessageMoveTasks ------------------------------------------------------------------
def test_list_of_a_dlq_without_tasks_is_empty(sqs: Any) -> None:
    _source, dlq = _pipe(sqs)
    assert sqs.list_message_move_tasks(SourceArn=_arn(sqs, dlq))["Results"] == []


def test_running_task_is_listed_with_its_handle_and_counts(sqs: Any, clock: FakeClock) -> None:
    source, dlq = _pipe(sqs)
    destination = sqs.create_queue(QueueName="dest")["QueueUrl"]
    _dead_letter(sqs, source, [f"m{i}" for i in range(10)])
    dlq_arn = _arn(sqs, dlq)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=_arn(sqs, destination),
                                         MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    (task,) = _tasks(sqs, dlq_arn)
    assert task == {
        "ApproximateNumberOfMessagesMoved": 0, "ApproximateNumberOfMessagesToMove": 10,
        "DestinationArn": _arn(sqs, destination), "MaxNumberOfMessagesPerSecond": 1,
        "SourceArn": dlq_arn, "StartedTimestamp": clock.now_ms(), "Status": "RUNNING",
        "TaskHandle": handle,
    }


def test_list_defaults_to_the_newest_task_and_shows_up_to_ten(sqs: Any) -> None:
    # GIVEN twelve tasks of one source, one after the other
    _source, dlq = _pipe(sqs)
    dlq_arn = _arn(sqs, dlq)
    handles = []
    for rate in range(1, 13):
        handles.append(sqs.start_message_move_task(
            SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=rate)["TaskHandle"])
        _advance()  # the DLQ is empty: each completes
    # WHEN listed THEN one by default, the newest; at most 10, newest first
    assert [t["MaxNumberOfMessagesPerSecond"] for t in _tasks(sqs, dlq_arn)] == [12]
    listed = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert len(listed) == 1
    assert [t["MaxNumberOfMessagesPerSecond"] for t in _tasks(sqs, dlq_arn, 10)] == list(
        range(12, 2, -1))
    assert all("TaskHandle" not in t for t in _tasks(sqs, dlq_arn, 10))


@pytest.mark.parametrize("max_results", [0, 11])
def test_max_results_outside_1_to_10_is_invalid(sqs: Any, max_results: int) -> None:
    _source, dlq = _pipe(sqs)
    with pytest.raises(ClientError) as exc:
        sqs.list_message_move_tasks(SourceArn=_arn(sqs, dlq), MaxResults=max_results)
    assert _error(exc) == (
        "InvalidParameterValue", "Value for parameter MaxResults is invalid. Reason: You must "
        "enter a number that's between 1 and 10.", 400)


def test_list_of_a_source_that_does_not_exist(sqs: Any) -> None:
    with pytest.raises(ClientError) as exc:
        sqs.list_message_move_tasks(SourceArn="arn:aws:sqs:us-east-1:000000000000:nowhere")
    assert _error(exc) == (
        "ResourceNotFoundException",
        "The resource that you specified for the SourceArn parameter doesn't exist.", 404)


# -- CancelMessageMoveTask -----------------------------------------------------------------
def test_cancel_with_an_invalid_handle(sqs: Any) -> None:
    with pytest.raises(ClientError) as exc:
        sqs.cancel_message_move_task(TaskHandle="foobared")
    assert _error(exc) == ("InvalidParameterValue", "Value for parameter TaskHandle is invalid.",
                           400)


def _handle(task_id: str, source_arn: str) -> str:
    doc = json.dumps({"taskId": task_id, "sourceArn": source_arn})
    return base64.b64encode(doc.encode()).decode()


def test_cancel_with_a_source_that_does_not_exist(sqs: Any) -> None:
    handle = _handle(str(uuid.uuid4()), "arn:aws:sqs:us-east-1:000000000000:gone-123456")
    with pytest.raises(ClientError) as exc:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert _error(exc) == (
        "ResourceNotFoundException",
        "The resource that you specified for the SourceArn parameter doesn't exist.", 404)


def test_cancel_with_a_task_that_does_not_exist(sqs: Any) -> None:
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    with pytest.raises(ClientError) as exc:
        sqs.cancel_message_move_task(TaskHandle=_handle(str(uuid.uuid4()), _arn(sqs, queue)))
    assert _error(exc) == ("ResourceNotFoundException", "Task does not exist.", 404)


def test_cancel_stops_the_task_and_keeps_the_rest_in_the_dlq(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a task at one message a second over ten dead letters, two moved so far
    source, dlq = _pipe(sqs)
    destination = sqs.create_queue(QueueName="dest")["QueueUrl"]
    _dead_letter(sqs, source, [f"m{i}" for i in range(10)])
    dlq_arn = _arn(sqs, dlq)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=_arn(sqs, destination),
                                         MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    assert _advance() == 1
    clock.advance(1)
    assert _advance() == 1
    # WHEN it is cancelled THEN the answer counts what moved, and it is CANCELLING
    assert sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"] == 2
    (task,) = _tasks(sqs, dlq_arn)
    assert task["Status"] == "CANCELLING"
    assert "TaskHandle" not in task
    # AND the back end ends it as CANCELLED, moving nothing more
    clock.advance(5)
    assert _advance() == 0
    clock.advance(5)
    assert _advance() == 0
    (task,) = _tasks(sqs, dlq_arn)
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("CANCELLED", 2)
    assert len(_drain(sqs, destination)) == 2
    assert len(_drain(sqs, dlq)) == 8
    # AND a finished task cannot be cancelled again
    with pytest.raises(ClientError) as exc:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert _error(exc) == ENDED


def test_cancel_between_read_and_move_moves_nothing(sqs: Any) -> None:
    # GIVEN a running task the back end has read, and a cancel landing before its move
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, ["a", "b", "c"])
    dlq_arn = _arn(sqs, dlq)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    service = runtime.services_for().move_tasks
    (as_read,) = runtime.services_for().move_tasks.list(dlq_arn, 1)
    sqs.cancel_message_move_task(TaskHandle=handle)
    # WHEN the step runs with the task as it read it THEN its moves fail as a whole
    assert service.step(as_read) == 0
    assert _drain(sqs, source) == []
    assert len(_drain(sqs, dlq)) == 3


def test_completed_task_cannot_be_cancelled(sqs: Any) -> None:
    _source, dlq = _pipe(sqs)
    handle = sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))["TaskHandle"]
    _advance()
    with pytest.raises(ClientError) as exc:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert _error(exc) == ENDED


# -- the rate --------------------------------------------------------------------------
def test_one_message_a_second(sqs: Any, clock: FakeClock) -> None:
    # GIVEN four dead letters and a task limited to one message a second
    source, dlq = _pipe(sqs)
    destination = sqs.create_queue(QueueName="dest")["QueueUrl"]
    _dead_letter(sqs, source, [f"message-{i}" for i in range(4)])
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq), DestinationArn=_arn(sqs, destination),
                                MaxNumberOfMessagesPerSecond=1)
    # WHEN the back end runs often THEN one moves at once, then one per second: 3 s for 4
    moved = [_advance()]
    for _ in range(6):
        clock.advance(0.5)
        moved.append(_advance())
    assert moved == [1, 0, 1, 0, 1, 0, 1]
    assert len(_drain(sqs, destination)) == 4


def test_rate_is_a_ceiling_not_a_backlog(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a task at 10 a second over 40 dead letters, left idle for a minute after start
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, [f"m{i}" for i in range(40)])
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq), MaxNumberOfMessagesPerSecond=10)
    clock.advance(60)
    # WHEN the back end runs THEN a step moves at most one second's worth
    assert _advance() == 10
    assert _advance() == 0
    clock.advance(1)
    assert _advance() == 10


def test_without_a_rate_a_step_moves_many(sqs: Any) -> None:
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, [f"m{i}" for i in range(60)])
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    assert _advance() == 60
    assert "MaxNumberOfMessagesPerSecond" not in _tasks(sqs, _arn(sqs, dlq))[0]


# -- failures ----------------------------------------------------------------------------
def test_destination_deleted_while_running_fails_the_task(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a running task whose destination is then deleted
    source, dlq = _pipe(sqs)
    destination = sqs.create_queue(QueueName="dest")["QueueUrl"]
    _dead_letter(sqs, source, [f"m{i}" for i in range(5)])
    dlq_arn = _arn(sqs, dlq)
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=_arn(sqs, destination),
                                MaxNumberOfMessagesPerSecond=1)
    assert _advance() == 1
    sqs.delete_queue(QueueUrl=destination)
    clock.advance(1)
    _advance()
    # THEN it FAILED as SQS reports it, and the rest stay in the DLQ
    (task,) = _tasks(sqs, dlq_arn)
    assert (task["Status"], task["FailureReason"]) == (
        "FAILED", "AWS.SimpleQueueService.NonExistentQueue")
    assert "TaskHandle" not in task
    assert len(_drain(sqs, dlq)) == 4


def test_message_without_a_known_source_fails_a_task_without_destination(sqs: Any) -> None:
    # GIVEN a message sent straight to a DLQ (no queue dead-lettered it)
    _source, dlq = _pipe(sqs)
    sqs.send_message(QueueUrl=dlq, MessageBody="orphan")
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    _advance()
    (task,) = _tasks(sqs, _arn(sqs, dlq))
    assert task["Status"] == "FAILED"
    assert [m["Body"] for m in _drain(sqs, dlq)] == ["orphan"]


# -- exactly once, through crashes and restarts -------------------------------------------
@pytest.fixture
def faults(dmq: Client) -> Any:
    injector = Faults(runtime.backend().stores.of("default")._db)
    yield injector
    injector.clear()


@pytest.mark.parametrize("fault", ["read-timeout", "applied-timeout", "internal"])
def test_crash_between_steps_loses_and_duplicates_nothing(
    sqs: Any, faults: Faults, settings: Settings, clock: FakeClock, fault: str
) -> None:
    # GIVEN 60 dead letters (three transactions in one step)
    source, dlq = _pipe(sqs)
    destination = sqs.create_queue(QueueName="dest")["QueueUrl"]
    bodies = [f"m{i:02d}" for i in range(60)]
    _dead_letter(sqs, source, bodies)
    dlq_arn = _arn(sqs, dlq)
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=_arn(sqs, destination))
    # WHEN the first move lands and the second fails (no answer: the write made or not)
    faults.add("TransactWriteItems", lambda call, request: None if call == 1 else fault)
    _advance()
    faults.clear()
    assert _tasks(sqs, dlq_arn)[0]["ApproximateNumberOfMessagesMoved"] in (25, 50)
    # AND the server restarts and the task goes on
    _restart(settings, clock)
    _advance()
    _advance()
    # THEN every message is in the destination exactly once, none left in the DLQ
    assert sorted(m["Body"] for m in _drain(sqs, destination)) == bodies
    assert _drain(sqs, dlq) == []
    (task,) = _tasks(sqs, dlq_arn)
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 60)


def test_task_survives_a_restart(sqs: Any, settings: Settings, clock: FakeClock) -> None:
    # GIVEN a slow task that has moved one of three messages
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, ["a", "b", "c"])
    dlq_arn = _arn(sqs, dlq)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn,
                                         MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    assert _advance() == 1
    # WHEN the server restarts THEN the task is still listed as running, with its count
    _restart(settings, clock)
    (task,) = _tasks(sqs, dlq_arn)
    assert (task["Status"], task["TaskHandle"], task["ApproximateNumberOfMessagesMoved"]) == (
        "RUNNING", handle, 1)
    # AND it goes on at its rate to the end
    for _ in range(3):
        clock.advance(1)
        _advance()
    assert sorted(m["Body"] for m in _drain(sqs, source)) == ["a", "b", "c"]
    (task,) = _tasks(sqs, dlq_arn)
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 3)


def test_two_runners_at_once_move_each_message_once(sqs: Any) -> None:
    # GIVEN a task read by two back-end runs (two Lambda invocations overlapping)
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, [f"m{i}" for i in range(8)])
    dlq_arn = _arn(sqs, dlq)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    service = runtime.services_for().move_tasks
    (task,) = service.list(dlq_arn, 1)
    # WHEN both step it with what they read THEN the second finds nothing left to move
    assert service.step(task) == 8
    assert service.step(task) == 0
    assert sorted(m["Body"] for m in _drain(sqs, source)) == [f"m{i}" for i in range(8)]
    (listed,) = _tasks(sqs, dlq_arn)
    assert listed["ApproximateNumberOfMessagesMoved"] == 8


# -- the scheduled handler -----------------------------------------------------------------
def test_scheduled_handler_runs_the_tasks(sqs: Any, dmq: Client) -> None:
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, ["scheduled"])
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    event = dmq.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[])
    dmq.lambda_.invoke("advance_move_tasks", event)
    assert [m["Body"] for m in _drain(sqs, source)] == ["scheduled"]


def test_a_step_reads_what_it_moves_whatever_the_backlog(sqs: Any, faults: Faults) -> None:
    # GIVEN 300 dead letters and a task at 5 a second
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, [f"m{i}" for i in range(300)])
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq), MaxNumberOfMessagesPerSecond=5)
    # WHEN a step runs THEN it queries once, reads 5 items and moves them in one transaction
    read: list[int] = []

    def count(call: int, request: dict[str, Any]) -> None:
        read.append(request.get("Limit", 0))

    faults.add("Query", count)
    faults.add("TransactWriteItems", lambda call, request: None)
    assert _advance() == 5
    assert read == [5]
    assert faults.calls["TransactWriteItems"] == 1


def test_dead_letter_item_keeps_its_source_queue_arn(sqs: Any, aws: Any) -> None:
    # GIVEN a message dead-lettered from `work`
    source, _dlq = _pipe(sqs)
    _dead_letter(sqs, source, ["remember"])
    # THEN the DLQ's item names the queue it came from (the redrive target by default)
    found = aws.dynamodb.query(
        TableName="dmq-messages", KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "000000000000/dead#0"}})["Items"]
    assert [i["dlq_source"]["S"] for i in found] == [_arn(sqs, source)]


def test_a_started_task_makes_the_pass_busy_at_once(sqs: Any) -> None:
    # GIVEN a DLQ holding a message, and a pass that found nothing running
    source, dlq = _pipe(sqs)
    _dead_letter(sqs, source, ["m"])
    moves = runtime.services_for().move_tasks
    _advance()
    assert moves.running_seen == 0
    # WHEN a task starts THEN the pass says it is busy before it runs again (a local
    # scheduler woken by this request runs it at its one-second period, not the idle one)
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    assert moves.running_seen == 1
    assert _advance() == 1
