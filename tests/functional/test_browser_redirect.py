"""GIVEN DMQ's root path WHEN a browser opens it THEN it is sent to the console; an SDK
or curl still gets SQS's own answer to a bare `GET /`."""

from __future__ import annotations

from chalice.test import Client

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def test_a_browser_opening_the_root_is_sent_to_the_console(dmq: Client) -> None:
    response = dmq.http.get("/", headers={"Accept": BROWSER_ACCEPT})
    assert response.status_code == 302
    assert response.headers["Location"] == "console"


def test_curl_opening_the_root_gets_sqs_unknown_operation(dmq: Client) -> None:
    response = dmq.http.get("/", headers={"Accept": "*/*"})
    assert response.status_code == 404
    assert b"UnknownOperationException" in response.body


def test_a_browser_asking_for_an_action_is_not_redirected(dmq: Client) -> None:
    response = dmq.http.get("/?Action=ListQueues&Version=2012-11-05",
                            headers={"Accept": BROWSER_ACCEPT})
    assert response.status_code != 302
