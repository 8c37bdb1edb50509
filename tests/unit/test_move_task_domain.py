"""The pure parts of move tasks: the handle, the rate, and the redriven message."""

from __future__ import annotations

import base64
import json

import pytest

from chalicelib.domain.messages import Message
from chalicelib.domain.move_tasks import (
    MoveTask,
    MoveTaskStatus,
    decode_handle,
    encode_handle,
    redriven,
)

ARN = "arn:aws:sqs:us-east-1:000000000000:dead"


def _task(rate: int | None, paced_ms: int) -> MoveTask:
    return MoveTask("t", ARN, None, rate, MoveTaskStatus.RUNNING, 0, 0, paced_ms=paced_ms)


def test_handle_round_trips_and_is_the_sqs_json_document() -> None:
    handle = encode_handle("10f57157-fc38-4da9-a113-4de7e12d05dd", ARN)
    assert json.loads(base64.b64decode(handle)) == {
        "taskId": "10f57157-fc38-4da9-a113-4de7e12d05dd", "sourceArn": ARN}
    assert decode_handle(handle) == ("10f57157-fc38-4da9-a113-4de7e12d05dd", ARN)


@pytest.mark.parametrize("handle", [
    "foobared", "", "!!!", base64.b64encode(b"[1, 2]").decode(),
    base64.b64encode(b'{"taskId": 3, "sourceArn": "x"}').decode(),
    base64.b64encode(b'{"sourceArn": "x"}').decode(), base64.b64encode(b"\xff\xfe").decode(),
])
def test_anything_else_is_not_a_handle(handle: str) -> None:
    assert decode_handle(handle) is None


def test_allowance_grows_with_time_up_to_one_second_of_rate() -> None:
    task = _task(10, paced_ms=1_000)
    assert task.allowance(1_000) == 0
    assert task.allowance(1_250) == 2
    assert task.allowance(2_000) == 10
    assert task.allowance(60_000) == 10


def test_spending_moves_the_pace_forward() -> None:
    task = _task(4, paced_ms=0)
    assert task.paced_after(2, now_ms=1_000) == 500  # 2 messages at 4/s take 500 ms
    assert task.paced_after(4, now_ms=9_000) == 9_000  # an idle task restarts from 1 s ago


def test_no_rate_is_the_highest_rate() -> None:
    assert _task(None, paced_ms=0).allowance(1_000) == 500
    assert _task(None, paced_ms=0).rate == 500


def test_active_states_hold_the_source() -> None:
    assert {s for s in MoveTaskStatus if s.active} == {
        MoveTaskStatus.RUNNING, MoveTaskStatus.CANCELLING}


def test_redriven_message_is_new_and_unreceived() -> None:
    old = Message("old-id", "body", "md5", sent_ms=100, visible_at=200, expires_ms=300,
                  receive_count=4, first_receive_ms=150, claim_token="tok",
                  dead_letter_source_arn=ARN, body_key="k")
    new = redriven(old, "new-id", now_ms=1_000, retention_ms=60_000)
    assert (new.message_id, new.sent_ms, new.visible_at, new.expires_ms) == (
        "new-id", 1_000, 1_000, 61_000)
    assert (new.receive_count, new.first_receive_ms, new.claim_token) == (0, 0, "")
    assert new.dead_letter_source_arn is None and new.body_key is None
    assert (new.body, new.body_md5) == ("body", "md5")


def test_dead_letter_move_remembers_its_source() -> None:
    message = Message("id", "b", "m", sent_ms=0, visible_at=0, expires_ms=10)
    assert message.moved_to_dead_letters(5, 100, ARN).dead_letter_source_arn == ARN
    assert message.moved_to_dead_letters(5, 100).dead_letter_source_arn is None
