"""GIVEN `dmq` as people type it WHEN the global options come before the command, after it
or among its arguments, a command deletes data, a time is shown, or help is asked for
THEN the options are taken wherever they are, deleting asks first (or needs --yes), times
read as ISO 8601 in tables and stay raw in JSON, and every help shows examples."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest

from dmqcli import main as cli
from dmqcli.argv import MissingValue, hoist
from dmqcli.output import iso_ms, iso_s
from tests.e2e.conftest import free_port

# -- global options anywhere -------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "hoisted"), [
    (["queues", "list", "--endpoint", "http://h:1"], ["--endpoint", "http://h:1", "queues",
                                                      "list"]),
    (["queues", "--json", "list"], ["--json", "queues", "list"]),
    (["queues", "list", "--prefix", "a", "--endpoint-url=http://h:1", "--region", "r"],
     ["--endpoint-url=http://h:1", "--region", "r", "queues", "list", "--prefix", "a"]),
    (["messages", "send", "q", "--", "--json"], ["messages", "send", "q", "--", "--json"]),
    (["--profile", "p", "stats"], ["--profile", "p", "stats"]),
])
def test_global_options_move_in_front_of_the_command(argv: list[str],
                                                      hoisted: list[str]) -> None:
    assert hoist(argv) == hoisted


@pytest.mark.parametrize("argv", [["queues", "list", "--endpoint"],
                                  ["queues", "list", "--region", "--json"]])
def test_a_global_option_without_its_value_is_refused(argv: list[str]) -> None:
    with pytest.raises(MissingValue):
        hoist(argv)


@pytest.mark.parametrize("argv", [
    ["--endpoint", "http://h:1", "--json", "--profile", "p", "--region", "eu-west-1",
     "queues", "list", "--prefix", "o"],
    ["queues", "list", "--endpoint", "http://h:1", "--json", "--profile", "p", "--region",
     "eu-west-1", "--prefix", "o"],
    ["queues", "list", "--prefix", "o", "--endpoint-url", "http://h:1", "--region=eu-west-1",
     "--json", "--profile=p"],
    ["queues", "--endpoint-url=http://h:1", "list", "--json", "--prefix", "o", "--profile",
     "p", "--region", "eu-west-1"],
])
def test_the_same_command_wherever_the_global_options_go(argv: list[str]) -> None:
    args = cli.parse_args(argv)
    assert (args.endpoint, args.json, args.profile, args.region, args.prefix) == (
        "http://h:1", True, "p", "eu-west-1", "o")


def test_without_global_options_nothing_is_set() -> None:
    args = cli.parse_args(["queues", "list"])
    assert (args.endpoint, args.json, args.profile, args.region) == (None, False, None, None)


def test_a_regions_positional_is_not_the_signing_region() -> None:
    args = cli.parse_args(["regions", "failover", "us-east-1", "--region", "eu-west-1"])
    assert (args.region_name, args.region) == ("us-east-1", "eu-west-1")


def test_a_subscription_target_is_url_and_endpoint_url_stays_global() -> None:
    args = cli.parse_args(["subscriptions", "create", "q", "--url", "http://hook/",
                           "--endpoint-url", "http://dmq:1"])
    assert (args.url, args.endpoint) == ("http://hook/", "http://dmq:1")


@pytest.mark.parametrize("argv", [
    ["queues", "list", "--bogus"], ["queues", "list", "--endpoint"], ["--endpoin", "x", "stats"],
    ["queues", "list", "--region"], ["queues", "purge"],
])
def test_a_wrong_flag_is_one_line_and_status_2(argv: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "error:" in err


def test_an_endpoint_that_is_no_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["queues", "list", "--endpoint", "127.0.0.1:9324"]) == 2
    assert capsys.readouterr().err == (
        "dmq: error: '127.0.0.1:9324' is not an endpoint URL (e.g. http://127.0.0.1:9324)\n")


# -- help --------------------------------------------------------------------------------------

def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _parsers(child)
    return found


def test_every_help_shows_examples_and_the_global_options() -> None:
    parsers = _parsers(cli.build_parser())
    assert len(parsers) > 30
    for parser in parsers:
        text = parser.format_help()
        assert "examples:\n  dmq " in text, parser.prog
        assert "--endpoint URL, --endpoint-url URL" in text, parser.prog


def test_destructive_commands_take_yes() -> None:
    for argv in (["queues", "purge", "q"], ["queues", "delete", "q"],
                 ["regions", "failover", "r"], ["keys", "revoke", "k"],
                 ["subscriptions", "delete", "q", "u"]):
        assert cli.parse_args([*argv, "--yes"]).yes is True
        assert cli.parse_args([*argv, "-y"]).yes is True
        assert cli.parse_args(argv).yes is False


# -- confirmation ------------------------------------------------------------------------------

class Terminal(io.StringIO):
    """A stdin that is a terminal, with the user's answer typed in."""

    def isatty(self) -> bool:
        return True


def _nowhere() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_without_a_terminal_and_without_yes_nothing_is_sent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: not asked, even if it says y
    # Nothing listens there: reaching for the server would fail with status 1 instead.
    assert cli.main(["queues", "purge", "orders", "--endpoint", _nowhere()]) == 2
    assert capsys.readouterr().err == ("dmq: error: purging 'orders' needs confirmation and "
                                       "stdin is not a terminal to ask on: pass --yes\n")


@pytest.mark.parametrize(("argv", "question"), [
    (["queues", "purge", "orders"], "Purge all messages of 'orders'? [y/N] "),
    (["queues", "delete", "orders"], "Delete queue 'orders' and all its messages? [y/N] "),
    (["regions", "failover", "us-east-1"], "Mark region us-east-1 down?"),
    (["keys", "revoke", "AKIAX"], "Revoke access key AKIAX?"),
    (["subscriptions", "delete", "orders", "u-1"], "Delete subscription u-1 of 'orders'?"),
])
@pytest.mark.parametrize("answer", ["n\n", "\n", ""])
def test_on_a_terminal_anything_but_yes_cancels(
    argv: list[str], question: str, answer: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    assert cli.main([*argv, "--endpoint", _nowhere()]) == 1
    err = capsys.readouterr().err
    assert err.startswith(question) and "[y/N] " in err
    assert err.endswith("dmq: not confirmed: nothing was done\n")
    assert "cannot reach" not in err


@pytest.mark.parametrize("answer", ["y\n", "YES\n"])
def test_on_a_terminal_yes_goes_on(answer: str, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    endpoint = _nowhere()
    assert cli.main(["queues", "purge", f"{endpoint}/000000000000/orders",
                     "--endpoint", endpoint]) == 1
    assert f"cannot reach DMQ at {endpoint}" in capsys.readouterr().err  # it went on


# -- times -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "shown"), [
    (1795620423123, "2026-11-25T15:27:03.123Z"), (0, "1970-01-01T00:00:00.000Z"),
    ("1795620423123", "2026-11-25T15:27:03.123Z"), (None, None), ("soon", "soon"),
    (True, True), (10**20, 10**20),
])
def test_epoch_milliseconds_read_as_iso_8601_utc(value: Any, shown: Any) -> None:
    assert iso_ms(value) == shown


def test_epoch_seconds_read_as_iso_8601_utc() -> None:
    assert iso_s("1795620423") == "2026-11-25T15:27:03.000Z"


def test_a_table_shows_iso_times_and_json_keeps_the_raw_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dmqcli.output import Output

    record = {"accessKeyId": "AKIAX", "created": 1795620423123}
    Output(as_json=False).fields(record, times_ms=("created",))
    table = capsys.readouterr().out
    assert "2026-11-25T15:27:03.123Z" in table and "1795620423123" not in table
    Output(as_json=True).fields(record, times_ms=("created",))
    assert json.loads(capsys.readouterr().out) == record


# -- regions failover --force ------------------------------------------------------------------

def test_force_is_sent_to_the_server_and_its_refusal_names_the_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Regions(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            refused = self.command == "POST" and "force=true" not in self.path
            body = json.dumps({"code": "FailoverRefused", "message": "No other healthy region "
                               "can take over from r1; force=true marks it down anyway."}
                              if refused else {"regions": [{
                                  "region": "r1", "up": self.command != "POST",
                                  "last_heartbeat_ms": None,
                                  "home_of_replicated_queues": []}]}).encode()
            self.send_response(409 if refused else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Regions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert cli.main(["regions", "failover", "r1", "-y", "--endpoint", endpoint]) == 1
        err = capsys.readouterr().err
        assert err == ("dmq: error: FailoverRefused: No other healthy region can take over "
                       "from r1; --force marks it down anyway. (HTTP 409)\n")
        assert cli.main(["regions", "failover", "r1", "-y", "--force", "--endpoint",
                         endpoint]) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert seen[-1] == "POST /admin/regions/r1/down?force=true"
    assert "POST /admin/regions/r1/down" in seen
