"""GIVEN the app on the test store WHEN the web console's routes are called THEN they ask
for Basic credentials of an admin, render the queues, messages and regions as HTML (bodies
escaped), and act on forms only with a valid CSRF token, showing SQS's errors."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from chalice.test import Client

from chalicelib.settings import Settings
from tests.clocks import FakeClock

ADMIN = {"Authorization": "Basic " + base64.b64encode(b"AKIDADMIN:secret").decode()}
FORM = {**ADMIN, "Content-Type": "application/x-www-form-urlencoded"}
PAGE = "/console/queues/000000000000/orders"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The test store's settings with a data folder: usage metering (and so the console's
    throughput plot, which counts the metered requests) is on."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                    data_dir=str(tmp_path))


def _html(response: Any) -> str:
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    return response.body.decode("utf-8")


def _token(dmq: Client, path: str = PAGE) -> str:
    html = _html(dmq.http.get(path, headers=ADMIN))
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def _post(dmq: Client, action: str, fields: dict[str, str], path: str = PAGE) -> Any:
    return dmq.http.post(f"{path}/{action}", headers=FORM, body=urlencode(fields).encode())


def test_without_credentials_the_console_challenges_for_basic_auth(dmq: Client) -> None:
    for path in ("/console", "/console/live", PAGE, "/console/regions"):
        response = dmq.http.get(path)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == 'Basic realm="DMQ console", charset="UTF-8"'
        assert "NotAuthorized" in _html(response)
    garbled = dmq.http.get("/console", headers={"Authorization": "Basic ***"})
    assert garbled.status_code == 401


def test_a_key_of_another_account_is_refused(dmq: Client) -> None:
    other = {"Authorization": "Basic " + base64.b64encode(b"123456789012:s").decode()}
    response = dmq.http.get("/console", headers=other)
    assert response.status_code == 403
    assert "is not an admin of this deployment" in _html(response)
    assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert response.headers["Cache-Control"] == "no-store"


def test_queue_list_shows_every_account_with_counts(sqs: Any, dmq: Client) -> None:
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a")
    sqs.send_message(QueueUrl=url, MessageBody="b", DelaySeconds=60)
    html = _html(dmq.http.get("/console", headers=ADMIN))
    row = html[html.index('data-queue="000000000000/orders"'):]
    assert re.search(r'data-col="visible">1<.*data-col="in_flight">0<.*data-col="delayed">1<',
                     row, re.S)
    assert 'data-live="/console/live"' in html
    assert 'data-series="visible"' in html
    live = _html(dmq.http.get("/console/live", headers=ADMIN))
    assert live.lstrip().startswith("<table")  # the fragment only, no page around it
    assert "Throughput over the last" in live and "send requests now 2" in live


def test_peek_escapes_bodies_and_shows_attributes_without_claiming(
    sqs: Any, dmq: Client, clock: FakeClock
) -> None:
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="<img src=x onerror=alert(1)>",
                            MessageAttributes={"n": {"DataType": "Number", "StringValue": "3"}})
    html = _html(dmq.http.get(PAGE, headers=ADMIN))
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert sent["MessageId"] in html
    assert '<dt>n <span class="type">Number</span></dt><dd>3</dd>' in html
    assert f"<dt>SentTimestamp</dt><dd>{clock.now_ms()}</dd>" in html
    received = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]
    assert received["Attributes"]["ApproximateReceiveCount"] == "1"
    assert '<span class="state">in flight</span>' in _html(dmq.http.get(PAGE, headers=ADMIN))


def test_send_and_purge_with_a_token(sqs: Any, dmq: Client) -> None:
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    token = _token(dmq)
    sent = _post(dmq, "send", {"csrf_token": token, "body": "from a form",
                               "attribute_name": "k", "attribute_type": "String",
                               "attribute_value": "v"})
    assert sent.status_code == 303
    location = sent.headers["Location"]
    assert location.startswith(f"{PAGE}?notice=sent&message_id=")
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert (got["Body"], got["MessageAttributes"]["k"]["StringValue"]) == ("from a form", "v")
    assert location.endswith(got["MessageId"])
    shown = _html(dmq.http.get(location, headers=ADMIN))
    assert f"Message sent: {got['MessageId']}." in shown

    unconfirmed = _post(dmq, "purge", {"csrf_token": token})
    assert unconfirmed.status_code == 400
    assert "Tick the box to confirm" in _html(unconfirmed)
    purged = _post(dmq, "purge", {"csrf_token": token, "confirm": "yes"})
    assert (purged.status_code, purged.headers["Location"]) == (303, f"{PAGE}?notice=purged")
    again = _post(dmq, "purge", {"csrf_token": token, "confirm": "yes"})
    assert again.status_code == 403
    assert "PurgeQueueInProgress" in _html(again)


def test_send_errors_are_sqs_errors_and_the_form_is_kept(sqs: Any, dmq: Client) -> None:
    sqs.create_queue(QueueName="orders")
    token = _token(dmq)
    empty = _post(dmq, "send", {"csrf_token": token, "body": ""})
    assert empty.status_code == 400
    assert "MissingParameter" in _html(empty) or "InvalidParameterValue" in _html(empty)
    late = _post(dmq, "send", {"csrf_token": token, "body": "keep <me>", "delay_seconds": "901"})
    assert late.status_code == 400
    html = _html(late)
    assert "DelaySeconds" in html
    assert ">keep &lt;me&gt;</textarea>" in html
    word = _post(dmq, "send", {"csrf_token": token, "body": "x", "delay_seconds": "soon"})
    assert "Value soon for parameter DelaySeconds is invalid" in _html(word)


def test_forms_without_a_valid_token_are_refused(sqs: Any, dmq: Client,
                                                 clock: FakeClock) -> None:
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="keep")
    token = _token(dmq)
    for fields in ({"confirm": "yes"}, {"confirm": "yes", "csrf_token": "1.abc"},
                   {"confirm": "yes", "csrf_token": token + "0"}):
        refused = _post(dmq, "purge", fields)
        assert refused.status_code == 403
        assert "InvalidCsrfToken" in _html(refused)
    cross_site = dmq.http.post(f"{PAGE}/purge", headers={**FORM, "Sec-Fetch-Site": "cross-site"},
                               body=urlencode({"csrf_token": token, "confirm": "yes"}).encode())
    assert cross_site.status_code == 403
    other_key = {**FORM, "Authorization": "Basic " + base64.b64encode(b"OTHER:s").decode()}
    stolen = dmq.http.post(f"{PAGE}/purge", headers=other_key,
                           body=urlencode({"csrf_token": token, "confirm": "yes"}).encode())
    assert stolen.status_code == 403
    clock.advance(12 * 3600 + 1)
    assert _post(dmq, "purge", {"csrf_token": token, "confirm": "yes"}).status_code == 403
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "keep"


def test_redrive_from_a_dead_letter_queue(sqs: Any, dmq: Client) -> None:
    dlq = sqs.create_queue(QueueName="dead")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    policy = {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": 1}
    sqs.create_queue(QueueName="orders", Attributes={"RedrivePolicy": json.dumps(policy)})
    source_page = _html(dmq.http.get(PAGE, headers=ADMIN))
    assert "Start redrive" not in source_page  # not a dead-letter queue
    dead = "/console/queues/000000000000/dead"
    html = _html(dmq.http.get(dead, headers=ADMIN))
    assert "Dead letters of</dt><dd>orders" in html and "No redrive yet." in html
    token = _token(dmq, dead)
    slow = _post(dmq, "redrive", {"csrf_token": token, "max_per_second": "501"}, dead)
    assert slow.status_code == 400
    assert "MaxNumberOfMessagesPerSecond is invalid" in _html(slow)
    started = _post(dmq, "redrive", {"csrf_token": token, "max_per_second": "5"}, dead)
    assert (started.status_code, started.headers["Location"]) == (303, f"{dead}?notice=redrive")
    live = _html(dmq.http.get(f"{dead}/live", headers=ADMIN))
    assert 'data-status="RUNNING"' in live  # the back end's schedule does not run here
    assert "5 per second" in live and "0 of 0 moved" in live
    busy = _post(dmq, "redrive", {"csrf_token": token}, dead)
    assert busy.status_code == 400
    assert "There is already a task running" in _html(busy)
    # a running task can be cancelled from the page, with its own handle only
    handle = re.search(r'name="task_handle" value="([^"]+)"', live)
    assert handle is not None
    forged = _post(dmq, "cancel", {"csrf_token": token, "task_handle": "bm90IGEgdGFzaw=="}, dead)
    assert forged.status_code == 400
    assert "Value for parameter TaskHandle is invalid." in _html(forged)
    cancelled = _post(dmq, "cancel", {"csrf_token": token, "task_handle": handle.group(1)}, dead)
    assert (cancelled.status_code, cancelled.headers["Location"]) == (
        303, f"{dead}?notice=cancelled")
    live = _html(dmq.http.get(f"{dead}/live", headers=ADMIN))
    assert 'data-status="CANCELLING"' in live and "task_handle" not in live


def test_regions_page_and_missing_queue_and_static_files(dmq: Client) -> None:
    html = _html(dmq.http.get("/console/regions", headers=ADMIN))
    assert 'data-region="us-east-1"' in html and '<td class="up">up</td>' in html
    assert "No replication recorded yet" in html
    missing = dmq.http.get("/console/queues/000000000000/nope", headers=ADMIN)
    assert missing.status_code == 404
    assert "QueueDoesNotExist" in _html(missing)
    script = dmq.http.get("/console/static/console.js")
    assert script.status_code == 200
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert b"data-live" in script.body
    assert dmq.http.get("/console/static/other.txt").status_code == 404
