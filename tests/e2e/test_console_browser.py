"""GIVEN the real local server (two regions, DynamoDB Local) and Debian's Chromium, headless,
driven by Playwright WHEN a user clicks through the web console THEN it asks for credentials,
lists the queues with live counts and plots, peeks at messages without claiming them, sends,
purges after a confirmation, starts a redrive and shows it run to its end, and shows the
regions and replication; forged form posts are refused.

With DMQ_CONSOLE_SCREENSHOTS=<folder> (`make console-screenshots`), a screenshot of each
page is written there (docs/console/ holds the committed ones).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from tests.e2e.conftest import CLIENT_CONFIG, START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

pytestmark = pytest.mark.e2e
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ADMIN = {"username": "console-admin", "password": "any-secret"}
HOME, REPLICA = "us-east-1", "eu-west-1"
ACCOUNT = "000000000000"
WAIT_MS = 20_000
WORKLOAD_S = 45.0
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def dmq() -> Iterator[DmqProcess]:
    """DMQ serving two regions (so the regions page has replication to show)."""
    server = launch(DMQ_REGIONS=f"{HOME},{REPLICA}", DMQ_FAILOVER_AFTER_S="4")
    try:
        assert server.wait_ready(START_TIMEOUT_S), server.output
        yield server
    finally:
        assert server.stop(STOP_TIMEOUT_S) == 0, server.output
    assert "Traceback" not in server.output, server.output


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


def _browser(driver: Playwright, credentials: dict[str, str] | None,
             profile: Path) -> BrowserContext:
    """Chromium with a fresh profile folder, signed in with these Basic credentials."""
    context = driver.chromium.launch_persistent_context(
        str(profile), executable_path=CHROMIUM,
        headless=True, args=FLAGS, http_credentials=credentials,  # type: ignore[arg-type]
        viewport={"width": 1360, "height": 900})
    context.set_default_timeout(WAIT_MS)
    return context


@pytest.fixture(scope="module")
def admin(playwright: Playwright,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """The browser of an admin (the deployment account's key); closed after the module."""
    context = _browser(playwright, ADMIN, tmp_path_factory.mktemp("chromium-admin"))
    yield context
    context.close()


@pytest.fixture(scope="module")
def stranger(playwright: Playwright,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """A browser with no credentials; closed after the module."""
    context = _browser(playwright, None, tmp_path_factory.mktemp("chromium-stranger"))
    yield context
    context.close()


@pytest.fixture
def page(admin: BrowserContext) -> Iterator[Page]:
    tab = admin.new_page()
    yield tab
    tab.close()


@pytest.fixture(scope="module")
def sqs(dmq: DmqProcess) -> Any:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name=HOME,
                        aws_access_key_id="k", aws_secret_access_key="s", config=CLIENT_CONFIG)


def _shot(page: Page, name: str) -> None:
    """A full-page screenshot, kept in DMQ_CONSOLE_SCREENSHOTS when it is set."""
    folder = os.environ.get("DMQ_CONSOLE_SCREENSHOTS")
    if not folder:
        assert page.screenshot(full_page=True).startswith(b"\x89PNG")
        return
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"{name}.png"), full_page=True)
    assert (target / f"{name}.png").stat().st_size > 0


def _queue(sqs: Any, name: str, attributes: dict[str, str] | None = None) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes or {})["QueueUrl"])


def _arn(sqs: Any, url: str) -> str:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(found["Attributes"]["QueueArn"])


def _workload(sqs: Any, url: str, seconds: float) -> None:
    """Send in growing batches while a consumer takes some (for the screenshots only)."""
    deadline = time.monotonic() + seconds
    step = 0
    while time.monotonic() < deadline:
        step += 1
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"w{step}-{i}"} for i in range(1 + step % 10)])
        if step % 3 == 0:
            for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                               VisibilityTimeout=20).get("Messages", []):
                if step % 2:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        time.sleep(0.5)


def _row(page: Page, queue: str) -> Any:
    return page.locator(f'tr[data-queue="{ACCOUNT}/{queue}"]')


def test_the_console_asks_for_credentials_and_an_admin(
    dmq: DmqProcess, stranger: BrowserContext
) -> None:
    # WHEN a browser without credentials opens the console
    tab = stranger.new_page()
    try:
        # THEN the server challenges it for HTTP Basic credentials, and headless Chromium,
        # which has no one to type them in, gives up on the page as a browser does
        with tab.expect_response(f"{dmq.url}/console") as answer, pytest.raises(
                PlaywrightError, match="ERR_INVALID_AUTH_CREDENTIALS"):
            tab.goto(f"{dmq.url}/console")
        response = answer.value
        assert response.status == 401
        assert response.headers["www-authenticate"] == (
            'Basic realm="DMQ console", charset="UTF-8"')
        # AND the page it answers with says how to sign in
        shown = stranger.request.get(f"{dmq.url}/console")
        assert shown.status == 401
        assert "Sign in with an admin access key id as the user name" in shown.text()
        # AND a key of another account is not an admin: refused
        other = base64.b64encode(b"123456789012:secret").decode()
        tab.set_extra_http_headers({"Authorization": f"Basic {other}"})
        response = tab.goto(f"{dmq.url}/console")
        assert response is not None and response.status == 403
        expect(tab.get_by_role("alert")).to_contain_text("is not an admin")
        expect(tab.locator("body")).not_to_contain_text("Depth")
    finally:
        tab.close()


def test_the_queue_list_shows_live_counts_and_plots(
    dmq: DmqProcess, sqs: Any, page: Page, unique_name: Callable[[str], str]
) -> None:
    # GIVEN a queue with three messages
    name = unique_name("list")
    url = _queue(sqs, name)
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    # WHEN the console opens
    page.goto(f"{dmq.url}/console")
    # THEN the queue is listed with its counts
    row = _row(page, name)
    expect(row.locator('[data-col="visible"]')).to_have_text("3")
    expect(row.locator('[data-col="in_flight"]')).to_have_text("0")
    expect(row.locator('[data-col="delayed"]')).to_have_text("0")
    # WHEN one is received, one more is sent delayed
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    # THEN the live refresh shows it without a reload
    expect(row.locator('[data-col="visible"]')).to_have_text("2")
    expect(row.locator('[data-col="in_flight"]')).to_have_text("1")
    expect(row.locator('[data-col="delayed"]')).to_have_text("1")
    assert page.locator("#live").get_attribute("data-refreshed")
    # AND the depth and throughput plots are drawn, described for screen readers
    depth = page.locator('svg[data-chart="depth-all"]')
    expect(depth.locator('polyline[data-series="visible"]')).to_have_count(1)
    expect(depth.locator("desc")).to_contain_text("Depth over the last ")
    throughput = page.locator('svg[data-chart="throughput-all"]')
    expect(throughput.locator('polyline[data-series="send requests"]')).to_have_count(1)
    sent_now = int(page.locator('[data-latest="send requests"]').first.inner_text())
    # Requests are counted per minute: the test's four sends may straddle a minute's end,
    # and then the latest minute holds some and an earlier one (at most the peak) the rest.
    said = throughput.locator("desc").text_content() or ""
    found = re.search(r"send requests now (\d+), at most (\d+)", said)
    assert found is not None and int(found[1]) == sent_now, said
    assert sent_now + int(found[2]) >= 4, said  # at least this test's four SendMessage
    # AND while the keyboard focus is on a link in the live part, that part is left alone
    link = page.get_by_role("link", name=name, exact=True)
    link.focus()
    before = page.locator("#live").get_attribute("data-refreshed")
    page.wait_for_timeout(5000)  # two refresh periods and a half
    assert page.locator("#live").get_attribute("data-refreshed") == before
    expect(link).to_be_focused()
    # AND the queue's name links to its page
    link.click()
    expect(page.locator("h1")).to_have_text(name)
    page.goto(f"{dmq.url}/console")
    if os.environ.get("DMQ_CONSOLE_SCREENSHOTS"):  # give the committed screenshot's plots a shape
        _workload(sqs, url, WORKLOAD_S)
    _shot(page, "queues")


def test_peek_shows_messages_without_claiming_them(
    dmq: DmqProcess, sqs: Any, page: Page, unique_name: Callable[[str], str]
) -> None:
    # GIVEN a message with a body that is HTML, and attributes
    name = unique_name("peek")
    url = _queue(sqs, name)
    body = '<script>alert("x")</script> {"order": 7}'
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes={
        "colour": {"DataType": "String", "StringValue": "blue"},
        "weight": {"DataType": "Number", "StringValue": "12.5"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    })
    # WHEN its queue page opens
    page.goto(f"{dmq.url}/console/queues/{ACCOUNT}/{name}")
    # THEN the message shows: id, body (as text), attributes and system attributes
    row = page.locator(f'tr[data-message-id="{sent["MessageId"]}"]')
    expect(row.locator("pre.body")).to_have_text(body)
    expect(row.locator(".state")).to_have_text("visible")
    attributes = row.locator("dl.attrs").first
    expect(attributes).to_contain_text("colour String")
    expect(attributes).to_contain_text("blue")
    expect(attributes).to_contain_text("weight Number")
    expect(attributes).to_contain_text("AAE= (base64)")
    system = row.locator("dl.system")
    expect(system).to_contain_text("SentTimestamp")
    expect(system).to_contain_text("ApproximateReceiveCount0")
    expect(system).to_contain_text(f"SenderId{ACCOUNT}")
    expect(page.locator("#count-visible")).to_have_text("1")
    _shot(page, "queue")
    # AND nothing was claimed: the first receive is the message's first
    got = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])
    assert got["Messages"][0]["Body"] == body
    assert got["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "1"
    # AND once received, the peek shows it in flight
    page.get_by_label("Show up to").fill("5")
    page.get_by_role("button", name="Peek").click()
    expect(row.locator(".state")).to_have_text("in flight")
    assert "limit=5" in page.url


def test_send_a_message_from_the_console(
    dmq: DmqProcess, sqs: Any, page: Page, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("send")
    url = _queue(sqs, name)
    page.goto(f"{dmq.url}/console/queues/{ACCOUNT}/{name}")
    # WHEN a delay beyond SQS's limit is given, THEN SQS's error shows and the form is kept
    page.get_by_label("Body", exact=True).fill("hello from the console")
    page.evaluate("document.getElementById('delay_seconds').removeAttribute('max')")
    page.get_by_label("Delay (seconds").fill("901")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("alert")).to_contain_text("InvalidParameterValue")
    expect(page.get_by_role("alert")).to_contain_text("DelaySeconds")
    expect(page.get_by_label("Body", exact=True)).to_have_value("hello from the console")
    # WHEN it is sent with an attribute
    page.get_by_label("Delay (seconds").fill("")
    page.get_by_label("Name", exact=True).fill("origin")
    page.get_by_label("Value", exact=True).fill("console")
    page.get_by_role("button", name="Send").click()
    # THEN the console says so, with the message id, and shows it in the queue
    notice = page.locator(".notice")
    expect(notice).to_contain_text("Message sent: ")
    message_id = notice.inner_text().removeprefix("Message sent: ").rstrip(".")
    expect(page.locator(f'tr[data-message-id="{message_id}"] pre.body')).to_have_text(
        "hello from the console")
    # AND a consumer receives it as sent
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert got["MessageId"] == message_id
    assert got["Body"] == "hello from the console"
    assert got["MessageAttributes"]["origin"]["StringValue"] == "console"


def test_purge_needs_a_confirmation(
    dmq: DmqProcess, sqs: Any, page: Page, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("purge")
    url = _queue(sqs, name)
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(4)])
    page.goto(f"{dmq.url}/console/queues/{ACCOUNT}/{name}")
    expect(page.locator("#count-visible")).to_have_text("4")
    purge = page.get_by_role("button", name="Purge queue")
    # WHEN the box is not ticked, THEN the browser does not post the form
    purge.click()
    expect(page.locator(".notice")).to_have_count(0)
    # WHEN ticked but the confirmation dialog is dismissed, THEN nothing is purged
    page.get_by_label("Delete every message in this queue").check()
    page.once("dialog", lambda dialog: dialog.dismiss())
    purge.click()
    expect(page.locator(".notice")).to_have_count(0)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"] == "4"
    # WHEN the dialog is accepted, THEN the queue is purged
    dialogs: list[str] = []

    def accept(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    purge.click()
    expect(page.locator(".notice")).to_contain_text("The queue was purged")
    assert dialogs == [f"Delete every message in {name}? This cannot be undone."]
    # the purged messages are gone from the list at once; the counts follow as the server
    # removes them (within seconds; SQS allows a purge 60 s)
    expect(page.locator("#messages")).to_contain_text("The queue holds no messages.")
    deadline = time.monotonic() + 30.0
    while page.locator("#count-visible").inner_text() != "0" and time.monotonic() < deadline:
        time.sleep(0.3)
        page.reload()
    expect(page.locator("#count-visible")).to_have_text("0")
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    # AND a second purge within the minute is refused as SQS refuses it
    page.get_by_label("Delete every message in this queue").check()
    page.once("dialog", lambda dialog: dialog.accept())
    purge.click()
    expect(page.get_by_role("alert")).to_contain_text(
        "PurgeQueueInProgress: Only one PurgeQueue operation on")


def _dead_letters(sqs: Any, name: Callable[[str], str], count: int) -> tuple[str, str]:
    """(source URL, DLQ URL) with `count` messages moved to the DLQ."""
    dlq = _queue(sqs, name("dlq"))
    source = _queue(sqs, name("src"), {"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": 1})})
    for i in range(count):
        sqs.send_message(QueueUrl=source, MessageBody=f"dead-{i}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10,
                                   VisibilityTimeout=0).get("Messages"):
            return source, dlq
    raise AssertionError("the messages did not reach the DLQ")


def test_start_and_watch_a_redrive(
    dmq: DmqProcess, sqs: Any, page: Page, unique_name: Callable[[str], str]
) -> None:
    # GIVEN four dead letters
    source, dlq = _dead_letters(sqs, unique_name, 4)
    dlq_name = dlq.rsplit("/", 1)[1]
    page.goto(f"{dmq.url}/console/queues/{ACCOUNT}/{dlq_name}")
    expect(page.locator("#count-visible")).to_have_text("4")
    expect(page.locator("#tasks")).to_contain_text("No redrive yet.")
    # WHEN a redrive to the original source starts at two messages a second
    page.get_by_label("Destination").select_option(label="The original source queues")
    page.get_by_label("Messages per second").fill("2")
    page.get_by_role("button", name="Start redrive").click()
    expect(page.locator(".notice")).to_contain_text("Redrive started")
    # THEN the page follows the task to its end without a reload
    task = page.locator("#tasks tbody tr").first
    expect(task).to_contain_text("2 per second")
    _shot(page, "redrive")
    expect(task.locator(".status")).to_have_text("COMPLETED")
    expect(task.locator(".moved")).to_have_text("4 of 4 moved")
    expect(page.locator("#count-visible")).to_have_text("0")
    # AND the messages are back in the source
    bodies: list[str] = []
    deadline = time.monotonic() + 20
    while len(bodies) < 4 and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", []):
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=source, ReceiptHandle=message["ReceiptHandle"])
    assert sorted(bodies) == [f"dead-{i}" for i in range(4)]
    # AND the source queue, no dead-letter queue itself, offers no redrive
    source_name = source.rsplit("/", 1)[1]
    page.goto(f"{dmq.url}/console/queues/{ACCOUNT}/{source_name}")
    expect(page.locator("h1")).to_have_text(source_name)
    expect(page.get_by_role("button", name="Start redrive")).to_have_count(0)


def test_cancel_a_redrive(
    dmq: DmqProcess, sqs: Any, page: Page, unique_name: Callable[[str], str]
) -> None:
    # GIVEN a redrive of eight dead letters at one a second, running
    _source, dlq = _dead_letters(sqs, unique_name, 8)
    page.goto(f"{dmq.url}/console/queues/{ACCOUNT}/{dlq.rsplit('/', 1)[1]}")
    page.get_by_label("Messages per second").fill("1")
    page.get_by_role("button", name="Start redrive").click()
    task = page.locator("#tasks tbody tr").first
    expect(task.locator(".status")).to_have_text("RUNNING")
    # WHEN it is cancelled
    task.get_by_role("button", name="Cancel redrive").click()
    # THEN it ends CANCELLED with some of the messages still in the DLQ
    expect(page.locator(".notice")).to_contain_text("Redrive cancelled")
    expect(task.locator(".status")).to_have_text("CANCELLED")
    expect(task.get_by_role("button", name="Cancel redrive")).to_have_count(0)
    left = int(page.locator("#count-visible").inner_text())
    assert 0 < left <= 8  # none may have moved yet: the task steps once a second
    # AND nothing moves after the cancel (the task steps once a second)
    page.wait_for_timeout(2500)
    page.reload()
    assert int(page.locator("#count-visible").inner_text()) == left


def test_regions_and_replication(dmq: DmqProcess, page: Page,
                                 unique_name: Callable[[str], str]) -> None:
    # GIVEN a queue replicated from the home region to the other, with a message
    home = boto3.client("sqs", endpoint_url=dmq.url, region_name=HOME,
                        aws_access_key_id="k", aws_secret_access_key="s", config=CLIENT_CONFIG)
    name = unique_name("replicated")
    url = _queue(home, name, {"DmqReplicaRegions": REPLICA})
    home.send_message(QueueUrl=url, MessageBody="copied")
    # WHEN the regions page opens (again, until the copy has been made)
    deadline = time.monotonic() + 30
    while True:
        page.goto(f"{dmq.url}/console/regions")
        if page.locator(f'#lag tr[data-replica="{REPLICA}"]').count() or (
                time.monotonic() > deadline):
            break
        time.sleep(0.5)
    # THEN both regions are up with heartbeats, the home lists the queue, and the lag shows
    for region in (HOME, REPLICA):
        row = page.locator(f'tr[data-region="{region}"]')
        expect(row.locator("td").nth(0)).to_have_text("up")
        expect(row.locator("td").nth(1)).to_contain_text("UTC")
    expect(page.locator(f'tr[data-region="{HOME}"]')).to_contain_text(f"{ACCOUNT}/{name}")
    lag = page.locator(f'#lag tr[data-replica="{REPLICA}"] td')
    expect(lag).to_have_count(3)
    assert int(lag.nth(2).inner_text()) >= 1
    _shot(page, "regions")


def test_forged_form_posts_are_refused(
    dmq: DmqProcess, sqs: Any, page: Page, unique_name: Callable[[str], str]
) -> None:
    # GIVEN a page of another site with a form that posts to the console (the browser
    # sends the signed-in Basic credentials with it)
    name = unique_name("forged")
    url = _queue(sqs, name)
    sqs.send_message(QueueUrl=url, MessageBody="keep me")
    page.set_content(
        f'<form method="post" action="{dmq.url}/console/queues/{ACCOUNT}/{name}/purge">'
        '<input name="confirm" value="yes"><input name="csrf_token" value="1.forged">'
        '<button>go</button></form>')
    # WHEN it is submitted
    with page.expect_navigation():
        page.get_by_role("button", name="go").click()
    # THEN the console refuses it and the queue keeps its message
    expect(page.get_by_role("alert")).to_contain_text("InvalidCsrfToken")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "keep me"
