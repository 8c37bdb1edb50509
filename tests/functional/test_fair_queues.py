"""GIVEN a standard queue WHEN messages carry a MessageGroupId THEN it works as SQS fair queues:
the group id names a tenant, comes back as a system attribute, orders and deduplicates
nothing, and a noisy tenant's backlog waits behind the other tenants' messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from app import runtime
from chalicelib import observability
from chalicelib.service import fairness
from chalicelib.settings import Settings
from tests.clocks import FakeClock

PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def _invalid(value: str) -> str:
    return (f"Value {value} for parameter MessageGroupId is invalid. Reason: MessageGroupId can "
            "only include alphanumeric and punctuation characters. 1 to 128 in length.")


@pytest.fixture
def settings(request: pytest.FixtureRequest) -> Settings:
    """The shared test settings; `fair_queues` from an indirect parameter (default on)."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                    fair_queues=getattr(request, "param", True))


def _queue(sqs: Any, name: str = "tenants", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    kwargs.setdefault("MaxNumberOfMessages", 10)
    return list(sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", []))


def _send_batch(sqs: Any, url: str, group: str | None, bodies: list[str],
                clock: FakeClock | None = None) -> None:
    """Batches of 10; with `clock`, each a millisecond after the last (message ids do not
    order sends: their times do)."""
    for start in range(0, len(bodies), 10):
        if clock is not None:
            clock.advance(0.001)
        entries = [{"Id": str(i), "MessageBody": body, **({"MessageGroupId": group} if group
                                                          else {})}
                   for i, body in enumerate(bodies[start:start + 10])]
        result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert len(result["Successful"]) == len(entries)


# -- acceptance and the system attribute ------------------------------------------------------


def test_send_message_accepts_a_group_id_and_receive_returns_it_when_asked(sqs: Any) -> None:
    # GIVEN a standard queue and a message sent with a MessageGroupId
    url = _queue(sqs)
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello", MessageGroupId="tenant-a")
    # THEN the send answers as for any standard message: no SequenceNumber
    assert "MessageId" in sent and "SequenceNumber" not in sent
    # WHEN it is received asking for the MessageGroupId system attribute
    got = _receive(sqs, url, MessageSystemAttributeNames=["MessageGroupId"],
                   VisibilityTimeout=0)
    # THEN the attribute holds the group id, and nothing else was asked for
    assert got[0]["Attributes"] == {"MessageGroupId": "tenant-a"}
    # AND the older AttributeNames=All returns it among the others
    every = _receive(sqs, url, AttributeNames=["All"], VisibilityTimeout=0)[0]["Attributes"]
    assert every["MessageGroupId"] == "tenant-a" and "SentTimestamp" in every
    # AND a receive that asks for no attribute gets none
    assert "Attributes" not in _receive(sqs, url)[0]


def test_a_message_without_a_group_id_has_no_message_group_id_attribute(sqs: Any) -> None:
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    got = _receive(sqs, url, MessageSystemAttributeNames=["All"])
    assert "MessageGroupId" not in got[0]["Attributes"]
    assert "SenderId" in got[0]["Attributes"]


def test_send_message_batch_carries_a_group_id_per_entry(sqs: Any) -> None:
    # GIVEN a batch whose entries name two tenants, and one entry none
    url = _queue(sqs)
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "for a", "MessageGroupId": "a"},
        {"Id": "b", "MessageBody": "for b", "MessageGroupId": "b"},
        {"Id": "n", "MessageBody": "for nobody"},
    ])
    assert sorted(e["Id"] for e in result["Successful"]) == ["a", "b", "n"]
    assert result.get("Failed", []) == []
    # WHEN they are received THEN each carries its own group id (or none)
    got = _receive(sqs, url, MessageSystemAttributeNames=["MessageGroupId"])
    groups = {m["Body"]: m.get("Attributes", {}).get("MessageGroupId") for m in got}
    assert groups == {"for a": "a", "for b": "b", "for nobody": None}


def test_the_longest_group_id_and_every_punctuation_character_are_accepted(sqs: Any) -> None:
    url = _queue(sqs)
    longest = "x" * 128
    for group in (longest, PUNCTUATION, "Aa0"):
        sqs.send_message(QueueUrl=url, MessageBody=group, MessageGroupId=group)
    got = _receive(sqs, url, MessageSystemAttributeNames=["MessageGroupId"])
    assert sorted(m["Attributes"]["MessageGroupId"] for m in got) == sorted(
        [longest, PUNCTUATION, "Aa0"])


@pytest.mark.parametrize("group", ["x" * 129, "", "with space", "caf\u00e9", "tab\there"])
def test_an_invalid_group_id_is_rejected_as_sqs_rejects_it(sqs: Any, group: str) -> None:
    url = _queue(sqs)
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId=group)
    error = caught.value.response["Error"]
    assert error["Code"] == "InvalidParameterValue"
    assert error["Message"] == _invalid(group)
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # AND nothing was stored
    assert _receive(sqs, url) == []


def test_an_invalid_group_id_fails_only_its_batch_entry(sqs: Any) -> None:
    url = _queue(sqs)
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "good", "MessageBody": "kept", "MessageGroupId": "t1"},
        {"Id": "bad", "MessageBody": "refused", "MessageGroupId": "x" * 129},
    ])
    assert [e["Id"] for e in result["Successful"]] == ["good"]
    assert result["Failed"] == [{"Id": "bad", "SenderFault": True,
                                 "Code": "InvalidParameterValue",
                                 "Message": _invalid("x" * 129)}]
    assert [m["Body"] for m in _receive(sqs, url)] == ["kept"]


def test_a_group_neither_orders_nor_deduplicates_on_a_standard_queue(sqs: Any) -> None:
    # GIVEN three identical messages of one tenant
    url = _queue(sqs)
    ids = {sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="t")["MessageId"]
           for _ in range(3)}
    # THEN each is its own message (no deduplication)
    assert len(ids) == 3
    # AND one receive returns all three at once: a group does not hold back its later
    # messages while one is in flight, as a FIFO group would
    got = _receive(sqs, url, VisibilityTimeout=30)
    assert {m["MessageId"] for m in got} == ids


# -- fairness ---------------------------------------------------------------------------------


def _bodies(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


def _flood_then_quiet(sqs: Any, url: str, clock: FakeClock) -> list[str]:
    """Three quiet tenants send 5 each, one tenant floods 200, then each quiet tenant sends
    one more; each request a millisecond after the last, so that send order is time
    order (within a millisecond, receives take messages in id order, which is not send
    order). Returns the late ones."""
    for tenant in ("q1", "q2", "q3"):
        _send_batch(sqs, url, tenant, _bodies(tenant, 5), clock)
    _send_batch(sqs, url, "noisy", _bodies("noisy", 200), clock)
    late = []
    for tenant in ("q1", "q2", "q3"):
        late.append(f"{tenant}-late")
        clock.advance(0.001)
        sqs.send_message(QueueUrl=url, MessageBody=late[-1], MessageGroupId=tenant)
    return late


def _drain(sqs: Any, url: str, receives: int) -> list[list[str]]:
    """Receive (and delete) up to `receives` times; the bodies of each receive."""
    rounds: list[list[str]] = []
    for _ in range(receives):
        got = _receive(sqs, url)
        if not got:
            break
        rounds.append([m["Body"] for m in got])
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    return rounds


def _round_of(rounds: list[list[str]], body: str) -> int:
    return next(i for i, bodies in enumerate(rounds) if body in bodies)


def test_a_noisy_tenants_backlog_waits_behind_the_quiet_tenants(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN quiet tenants, one tenant flooding 200 messages, then a message from each quiet one
    url = _queue(sqs)
    late = _flood_then_quiet(sqs, url, clock)
    # WHEN consumers drain the queue, 10 at a time
    rounds = _drain(sqs, url, 40)
    # THEN the quiet tenants' late messages come within the first two receives (behind
    # only the 15 early quiet messages: the flood's first batch was already judged noisy),
    # not behind the whole flood
    assert max(_round_of(rounds, body) for body in late) <= 1
    # AND nothing is lost or doubled: every message once, the flood drained in full
    everything = [b for bodies in rounds for b in bodies]
    assert sorted(everything) == sorted(
        _bodies("q1", 5) + _bodies("q2", 5) + _bodies("q3", 5) + _bodies("noisy", 200) + late)


@pytest.mark.parametrize("settings", [False], indirect=True)
def test_without_fairness_the_quiet_tenants_wait_behind_the_flood(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN the same traffic with DMQ_FAIR_QUEUES=off
    url = _queue(sqs)
    late = _flood_then_quiet(sqs, url, clock)
    rounds = _drain(sqs, url, 40)
    # THEN the late quiet messages come only after the whole flood (215 messages ahead)
    assert min(_round_of(rounds, body) for body in late) >= 21
    assert len([b for bodies in rounds for b in bodies]) == 218


def test_a_lone_noisy_tenant_drains_at_full_batches(sqs: Any) -> None:
    # GIVEN a flood judged noisy (quiet tenants sent first), and nothing else left to receive
    url = _queue(sqs)
    for tenant in ("q1", "q2"):
        _send_batch(sqs, url, tenant, _bodies(tenant, 5))
    _drain(sqs, url, 1)
    _drain(sqs, url, 1)
    _send_batch(sqs, url, "noisy", _bodies("noisy", 100))
    # WHEN consumers receive THEN every receive is a full batch: the noisy lane is served
    # as soon as the main lane runs short (work-conserving)
    rounds = _drain(sqs, url, 20)
    assert [len(r) for r in rounds] == [10] * 10
    assert _receive(sqs, url) == []


def test_counts_include_the_noisy_lane_as_visible_and_purge_empties_it(
        sqs: Any, clock: FakeClock) -> None:
    url = _queue(sqs)
    _flood_then_quiet(sqs, url, clock)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "218"
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "0"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
    sqs.purge_queue(QueueUrl=url)
    assert _receive(sqs, url) == []


def test_a_delayed_message_of_a_noisy_tenant_stays_hidden_for_its_delay(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a tenant judged noisy, whose next message is sent with a 5 s delay
    url = _queue(sqs)
    _send_batch(sqs, url, "quiet", _bodies("quiet", 5))
    _send_batch(sqs, url, "noisy", _bodies("noisy", 100))
    sqs.send_message(QueueUrl=url, MessageBody="later", MessageGroupId="noisy", DelaySeconds=5)
    # WHEN the queue is drained now THEN the delayed one is not among them
    first = [b for bodies in _drain(sqs, url, 20) for b in bodies]
    assert len(first) == 105 and "later" not in first
    # AND after its delay it is received
    clock.advance(5)
    assert [m["Body"] for m in _receive(sqs, url)] == ["later"]


def test_a_noisy_lane_message_not_deleted_comes_back_after_its_visibility_timeout(
    sqs: Any, clock: FakeClock
) -> None:
    url = _queue(sqs)
    _send_batch(sqs, url, "quiet", _bodies("quiet", 5))
    _send_batch(sqs, url, "noisy", _bodies("noisy", 40))
    seen = [m for _ in range(5) for m in _receive(sqs, url, VisibilityTimeout=10)]
    assert len(seen) == 45
    assert _receive(sqs, url) == []
    clock.advance(10)
    again = [m for _ in range(5) for m in _receive(sqs, url, AttributeNames=["All"])]
    assert len(again) == 45
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}


@pytest.fixture
def metrics_on() -> Iterator[None]:
    """EMF metrics on, as on Lambda; off again afterwards."""
    observability.configure(json_logs=False, emit_metrics=True)
    yield
    observability.configure(json_logs=False, emit_metrics=False)


@pytest.mark.usefixtures("metrics_on")
def test_messages_sent_to_the_noisy_lane_are_counted_in_the_metrics(
    sqs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _queue(sqs)
    _send_batch(sqs, url, "quiet", _bodies("quiet", 5))
    _send_batch(sqs, url, "noisy", _bodies("noisy", 40))
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines()
                 if line.startswith("{") and "_aws" in line]
    counted = [d["NoisyLaneMessages"] for d in documents if "NoisyLaneMessages" in d]
    # the flood's first batch passes (10 of 15 messages is not above 1.5 times an even
    # share of two tenants); its other three go to the noisy lane
    assert counted in ([10.0] * 3, [[10.0]] * 3)


def test_a_process_that_never_saw_the_tenants_finds_the_noisy_lane_within_a_probe(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a flood in the noisy lane, the main lane drained
    url = _queue(sqs)
    _send_batch(sqs, url, "quiet", _bodies("quiet", 5))
    _send_batch(sqs, url, "noisy", _bodies("noisy", 60))
    main = [b for bodies in _drain(sqs, url, 4) for b in bodies]
    assert len(main) == 40  # the main lane (5 quiet, the flood's first 10), 25 from the lane
    # WHEN another process, which has seen no tenant of this queue, receives
    runtime.services_for().messages.fairness = fairness.Fairness()
    # THEN it does not read the noisy lane at once (a queue without tenants costs as before)
    assert _receive(sqs, url) == []
    # AND within LANE_PROBE_MS it probes the lane and drains the rest
    clock.advance(fairness.LANE_PROBE_MS / 1000)
    rest = [b for bodies in _drain(sqs, url, 10) for b in bodies]
    assert sorted(main + rest) == sorted(_bodies("quiet", 5) + _bodies("noisy", 60))


def test_a_dead_lettered_message_keeps_its_group_id(sqs: Any) -> None:
    # GIVEN a queue that moves a message to its DLQ after one receive
    dlq = _queue(sqs, "tenants-dlq")
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = _queue(sqs, RedrivePolicy=json.dumps({"deadLetterTargetArn": arn,
                                                "maxReceiveCount": "1"}))
    sqs.send_message(QueueUrl=url, MessageBody="poison", MessageGroupId="tenant-x")
    assert len(_receive(sqs, url, VisibilityTimeout=0)) == 1
    # WHEN it is received again THEN it moves, and the DLQ returns it with its group id
    assert _receive(sqs, url) == []
    got = _receive(sqs, dlq, MessageSystemAttributeNames=["MessageGroupId"])
    assert [(m["Body"], m["Attributes"]["MessageGroupId"]) for m in got] == [
        ("poison", "tenant-x")]
