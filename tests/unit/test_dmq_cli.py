"""GIVEN `dmq` WHEN it parses its command line, names queues, calls the admin API (the key
routes here against a stub HTTP server) or meets an error THEN it sends what the routes'
contract says, signs for `execute-api`, and reports failures in one line."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chalicelib.clusters.shards import MAX_SHARDS
from chalicelib.frontend.admin import MAX_PEEK
from dmqcli import main as cli
from dmqcli.admin_api import AdminApi
from dmqcli.commands import clusters, messages, subscriptions
from dmqcli.context import Context
from dmqcli.discovery import resolve
from dmqcli.errors import CliError
from dmqcli.settings import CliSettings
from dmqlocal import admin, audit


def test_the_limits_are_the_services() -> None:
    assert messages.MAX_PEEK == MAX_PEEK
    assert clusters.MAX_SHARDS == MAX_SHARDS


def test_the_old_admin_module_is_an_alias_of_dmq() -> None:
    assert admin.main is cli.main


def test_the_endpoint_comes_from_the_flag_else_dmq_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.delenv("DMQ_ENDPOINT", raising=False)
    monkeypatch.setenv("DMQ_DATA_DIR", str(tmp_path))  # no server.json there

    def endpoint(*argv: str) -> str:
        return resolve(cli.parse_args([*argv, "stats"]).endpoint, CliSettings.from_env()).url

    assert endpoint() == "http://127.0.0.1:9324"
    monkeypatch.setenv("DMQ_ENDPOINT", "http://127.0.0.1:9999")
    assert endpoint() == "http://127.0.0.1:9999"
    assert endpoint("--endpoint", "http://h:1") == "http://h:1"


def test_version_is_the_projects(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("dmq ")


def test_json_is_taken_before_or_after_the_command() -> None:
    assert cli.parse_args(["--json", "queues", "list"]).json is True
    assert cli.parse_args(["queues", "list", "--json"]).json is True
    assert cli.parse_args(["queues", "list"]).json is False


@pytest.mark.parametrize("argv", [
    [], ["keys"], ["keys", "create"], ["messages", "peek", "q", "--limit", "101"],
    ["shards", "set", "q", "0"], ["dlq", "redrive", "q", "--rate", "501"],
    ["messages", "send", "q", "b", "--delay", "901"], ["regions", "failover"],
    ["subscriptions", "create", "q"], ["subscriptions", "delete", "q"],
    ["subscriptions", "create", "q", "--url", "http://h/", "--function", "f"],
    ["subscriptions", "create", "q", "--function", "f", "--window", "1.5"],
])
def test_bad_command_lines_are_one_line_and_status_2(
    argv: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "error:" in err


@pytest.mark.parametrize(("argv", "body"), [
    (["--function", "worker"], {"FunctionName": "worker"}),
    (["--url", "http://h/e", "--batch-size", "0", "--window", "301",
      "--report-batch-item-failures", "--max-concurrency", "1", "--disabled"],
     {"Endpoint": "http://h/e", "BatchSize": 0, "MaximumBatchingWindowInSeconds": 301,
      "FunctionResponseTypes": ["ReportBatchItemFailures"],
      "ScalingConfig": {"MaximumConcurrency": 1}, "Enabled": False}),
])
def test_a_subscription_sends_only_the_options_given_for_the_service_to_check(
    argv: list[str], body: dict[str, Any],
) -> None:
    args = cli.parse_args(["subscriptions", "create", "q", *argv])
    assert subscriptions.create_body(args) == body


class FakeSqs:
    """Answers GetQueueUrl as SQS does, for the queue-name forms."""

    def __init__(self) -> None:
        self.asked: list[dict[str, str]] = []

    def get_queue_url(self, **params: str) -> dict[str, str]:
        self.asked.append(params)
        owner = params.get("QueueOwnerAWSAccountId", "000000000000")
        return {"QueueUrl": f"http://h:1/{owner}/{params['QueueName']}"}


@pytest.mark.parametrize(("text", "asked", "account", "name"), [
    ("http://h:1/111122223333/orders", None, "111122223333", "orders"),
    ("orders", {"QueueName": "orders"}, "000000000000", "orders"),
    ("111122223333/orders", {"QueueName": "orders", "QueueOwnerAWSAccountId": "111122223333"},
     "111122223333", "orders"),
    ("arn:aws:sqs:us-east-1:111122223333:o.fifo",
     {"QueueName": "o.fifo", "QueueOwnerAWSAccountId": "111122223333"}, "111122223333",
     "o.fifo"),
])
def test_a_queue_is_named_by_url_arn_owner_and_name_or_name(
    text: str, asked: dict[str, str] | None, account: str, name: str,
) -> None:
    ctx = Context("http://h:1", None, "us-east-1", False)
    fake = FakeSqs()
    ctx.__dict__["sqs"] = fake
    ref = ctx.queue(text)
    assert (ref.account, ref.name) == (account, name)
    assert ref.admin_path == f"/admin/queues/{account}/{name}"
    assert fake.asked == ([asked] if asked else [])


@pytest.mark.parametrize(("text", "lookups"), [
    ("111122223333/orders", 0), ("arn:aws:sqs:eu-west-1:111122223333:orders", 0),
    ("http://h:1/111122223333/orders", 0), ("orders", 1),
])
def test_admin_commands_look_up_only_a_bare_name(text: str, lookups: int) -> None:
    ctx = Context("http://h:1", None, "us-east-1", False)
    fake = FakeSqs()
    ctx.__dict__["sqs"] = fake
    owner = "000000000000" if lookups else "111122223333"
    assert ctx.admin_path(text) == f"/admin/queues/{owner}/orders"
    assert len(fake.asked) == lookups


@pytest.mark.parametrize("text", ["arn:aws:sns:us-east-1:1:t", "https://h/", "acct/", "/q"])
def test_what_names_no_queue_is_a_usage_error(text: str) -> None:
    ctx = Context("http://h:1", None, "us-east-1", False)
    ctx.__dict__["sqs"] = FakeSqs()
    with pytest.raises(CliError) as exc:
        ctx.queue(text)
    assert exc.value.status == 2


CREATED_MS = 1795620423123  # 2026-11-25T15:27:03.123Z


@dataclass
class Stub:
    """A stub of the admin key routes (the contract), recording each request."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            stub.requests.append({"method": self.command, "path": self.path,
                                  "body": json.loads(raw) if raw else None,
                                  "authorization": self.headers.get("Authorization", "")})
            parts = self.path.strip("/").split("/")
            if self.command == "GET" and parts == ["admin", "keys"]:
                self._answer(200, {"keys": list(stub.keys.values())})
            elif self.command == "POST" and parts == ["admin", "keys"]:
                body = stub.requests[-1]["body"]
                key = {"accessKeyId": f"AKIA{len(stub.keys):016d}", "account": body["account"],
                       "user": body["user"], "admin": body["admin"], "status": "Active",
                       "created": CREATED_MS}
                stub.keys[key["accessKeyId"]] = key
                self._answer(200, {**key, "secretAccessKey": "s3cr3t"})
            elif self.command == "POST" and parts[:2] == ["admin", "keys"] and len(parts) == 4:
                old = stub.keys.get(parts[2])
                if old is None:
                    self._answer(404, {"code": "NoSuchEntity", "message": "no such key"})
                    return
                key = {**old, "accessKeyId": f"AKIA{len(stub.keys):016d}"}
                stub.keys[key["accessKeyId"]] = key
                self._answer(200, {**key, "secretAccessKey": "n3w"})
            elif self.command == "DELETE" and len(parts) == 3:
                stub.keys[parts[2]]["status"] = "Inactive"
                self._answer(200, {"accessKeyId": parts[2], "status": "Inactive"})
            else:
                self._answer(404, {"message": "not found"})

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, *args: Any) -> None:
            return

    return Handler


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDADMIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    state = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _dmq(stub: Stub, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--endpoint", stub.url, "--region", "eu-west-1", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_keys_follow_the_admin_key_routes(stub: Stub,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _dmq(stub, capsys, "--json", "keys", "create", "111122223333",
                        "--user", "alice")
    created = json.loads(out)
    assert code == 0 and created["secretAccessKey"] == "s3cr3t"
    assert stub.requests[-1]["method"] == "POST" and stub.requests[-1]["path"] == "/admin/keys"
    assert stub.requests[-1]["body"] == {"account": "111122223333", "user": "alice",
                                         "admin": False}
    # Signed like the AWS CLI signs for API Gateway: SigV4, execute-api, the region asked.
    assert stub.requests[-1]["authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDADMIN/")
    assert "/eu-west-1/execute-api/aws4_request" in stub.requests[-1]["authorization"]

    key_id = created["accessKeyId"]
    code, out, _ = _dmq(stub, capsys, "keys", "rotate", key_id)
    assert code == 0 and "n3w" in out and "not shown again" in out
    assert stub.requests[-1]["path"] == f"/admin/keys/{key_id}/rotate"

    code, out, _ = _dmq(stub, capsys, "keys", "list")
    assert code == 0 and key_id in out and "111122223333" in out and "s3cr3t" not in out
    assert "2026-11-25T15:27:03.123Z" in out and str(CREATED_MS) not in out
    code, out, _ = _dmq(stub, capsys, "keys", "list", "--json")
    assert json.loads(out)["keys"][0]["created"] == CREATED_MS
    code, out, _ = _dmq(stub, capsys, "--json", "keys", "list", "--account", "999999999999")
    assert json.loads(out) == {"keys": []}

    code, out, _ = _dmq(stub, capsys, "--json", "keys", "revoke", key_id, "--yes")
    assert code == 0 and json.loads(out)["status"] == "Inactive"
    assert stub.requests[-1]["method"] == "DELETE"
    assert stub.requests[-1]["path"] == f"/admin/keys/{key_id}"

    code, out, err = _dmq(stub, capsys, "keys", "rotate", "AKIANOSUCHKEY")
    assert code == 1 and out == ""
    assert err == "dmq: error: NoSuchEntity: no such key (HTTP 404)\n"


def _serve_once(status: int, body: str, headers: dict[str, str]) -> ThreadingHTTPServer:
    class Failing(BaseHTTPRequestHandler):
        def _fail(self) -> None:
            data = body.encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _fail

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("argv", [["export"], ["regions", "restore", "us-east-1"]])
def test_local_only_commands_say_so_against_api_gateway(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDADMIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    # What API Gateway answers for a route the stage does not have.
    server = _serve_once(403, '{"message":"Missing Authentication Token"}',
                         {"x-amzn-ErrorType": "MissingAuthenticationTokenException"})
    try:
        code = cli.main(["--endpoint", f"http://127.0.0.1:{server.server_address[1]}", *argv])
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith("dmq: error: MissingAuthenticationTokenException: Missing "
                          "Authentication Token (HTTP 403)")
    assert ("ExportTableToPointInTime" in err) if argv == ["export"] else (
        "a region fails by itself" in err)


@pytest.mark.parametrize(("status", "body", "line"), [
    (400, '{"__type": "com.amazonaws.sqs#InvalidParameterValue", "message": "bad"}',
     "InvalidParameterValue: bad (HTTP 400)"),
    (403, '{"code": "MissingAuthenticationToken", "message": "Missing\\nToken"}',
     "MissingAuthenticationToken: Missing Token (HTTP 403)"),
    (404, "<UnknownOperationException/>", "GET /admin/x: this endpoint has no such route "
     "(HTTP 404)"),
    (502, "Bad\ngateway", "HTTP 502: Bad gateway"),
])
def test_admin_errors_are_one_line(status: int, body: str, line: str) -> None:
    server = _serve_once(status, body, {})
    try:
        api = AdminApi(f"http://127.0.0.1:{server.server_address[1]}", "us-east-1", None)
        with pytest.raises(CliError) as exc:
            api.get("/admin/x")
    finally:
        server.shutdown()
        server.server_close()
    assert exc.value.message == line and exc.value.status == 1


def test_an_audit_of_a_missing_folder_fails(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere"
    args = argparse.Namespace(data_dir=str(missing), out=None, jobs=None)
    assert audit.run(args) == 2
    captured = capsys.readouterr()
    assert f"No DMQ data under {missing}" in captured.err
    assert "lost=" not in captured.out


def test_only_the_named_jobs_run() -> None:
    assert audit.wanted_jobs(["usage_report"]) == ["usage_report"]
    assert audit.wanted_jobs(None) == list(audit.JOBS)


def test_an_audit_without_spark_says_how_to_get_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run` installs no Spark: `dmq audit` then says so in one line, exit 1."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real(name, *a))
    assert cli.main(["audit", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "the audits run on Spark, which `make run` does not install" in err
    assert "make audit" in err and "Traceback" not in err
