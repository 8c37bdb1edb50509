"""GIVEN the real local server WHEN a browser opens its address, and admin routes are
called THEN the browser is sent to the console, and the server never prints Chalice's
false warning that every request to a route is authorized."""

from __future__ import annotations

import http.client
import time
import urllib.parse

from tests.e2e.conftest import DmqProcess

FALSE_WARNING = "will be authorized to allow local testing"


def _get(url: str, path: str, accept: str) -> http.client.HTTPResponse:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    connection.request("GET", path, headers={"Accept": accept})
    return connection.getresponse()


def test_a_browser_is_sent_to_the_console(dmq_server: DmqProcess) -> None:
    response = _get(dmq_server.url, "/", "text/html,application/xhtml+xml,*/*;q=0.8")
    assert response.status == 302
    assert response.getheader("Location") == "console"
    console = _get(dmq_server.url, "/console", "text/html")
    assert console.status in (200, 401)  # the console asks for its credentials


def test_admin_calls_print_no_false_authorization_warning(dmq_server: DmqProcess) -> None:
    response = _get(dmq_server.url, "/admin/queues", "application/json")
    assert response.status == 403  # unsigned: refused by DMQ's own check
    time.sleep(0.5)  # whatever the server printed meanwhile has been read
    assert FALSE_WARNING not in dmq_server.output
