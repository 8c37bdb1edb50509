"""GIVEN `dmq` with or without --endpoint, DMQ_ENDPOINT, a running local server's
`server.json` and AWS credentials WHEN it decides where to send requests and how to sign
them THEN the flag wins, then DMQ_ENDPOINT, then a live server's file, then the default;
a local server in the open mode needs no credentials (placeholders sign as its admin);
and a refused credential is one line naming the credential needed and where dmq looked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from chalicelib.service.identity import OPEN, Identities
from dmqcli import main as cli
from dmqcli.credentials import (
    PLACEHOLDER_KEY,
    credential_error,
    find_signer,
    is_credential_error,
)
from dmqcli.discovery import (
    DEFAULT,
    DEFAULT_ENDPOINT,
    ENV,
    FILE,
    FLAG,
    Target,
    is_loopback,
    pid_alive,
    read_server_file,
    resolve,
)
from dmqcli.errors import CliError
from dmqcli.settings import CliSettings
from tests.clocks import FakeClock

LIVE = os.getpid()


def _dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _write(folder: Path, **record: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "server.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def _settings(folder: Path, endpoint: str | None = None) -> CliSettings:
    return CliSettings(endpoint=endpoint, data_dir=folder)


# -- settings and the server file --------------------------------------------------------------

def test_the_data_folder_is_dmq_data_dir_else_dot_dmq_here(tmp_path: Path) -> None:
    assert CliSettings.from_env({}, cwd=tmp_path).data_dir == tmp_path / ".dmq"
    assert CliSettings.from_env({"DMQ_DATA_DIR": "d"}, cwd=tmp_path).data_dir == tmp_path / "d"
    assert CliSettings.from_env({"DMQ_DATA_DIR": "/x/y"}, cwd=tmp_path).data_dir == Path("/x/y")
    assert CliSettings.from_env({"DMQ_ENDPOINT": "http://h:1"}, cwd=tmp_path).endpoint == (
        "http://h:1")
    assert CliSettings.from_env({"DMQ_ENDPOINT": ""}, cwd=tmp_path).endpoint is None


def test_only_a_live_process_counts() -> None:
    assert pid_alive(LIVE)
    assert not pid_alive(_dead_pid())
    assert not pid_alive(0) and not pid_alive(-1)


def test_a_live_servers_file_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path, endpoint="https://127.0.0.1:9400/", pid=LIVE, auth="required",
                  ca="/etc/dmq/ca.pem")
    server = read_server_file(tmp_path)
    assert server is not None
    assert (server.endpoint, server.pid, server.auth, server.ca, server.path) == (
        "https://127.0.0.1:9400", LIVE, "required", "/etc/dmq/ca.pem", path)


@pytest.mark.parametrize("record", [
    {"endpoint": "http://127.0.0.1:9400", "pid": "dead"},  # replaced below by a dead pid
    {"endpoint": "http://127.0.0.1:9400"},
    {"pid": LIVE},
    {"endpoint": 9400, "pid": LIVE},
    {"endpoint": "http://127.0.0.1:9400", "pid": True},
    [],
])
def test_a_stale_or_malformed_file_is_ignored(tmp_path: Path, record: Any) -> None:
    if isinstance(record, dict) and record.get("pid") == "dead":
        record = {**record, "pid": _dead_pid()}
    tmp_path.joinpath("server.json").write_text(json.dumps(record), encoding="utf-8")
    assert read_server_file(tmp_path) is None


def test_an_unreadable_file_is_ignored(tmp_path: Path) -> None:
    assert read_server_file(tmp_path) is None
    tmp_path.joinpath("server.json").write_text("{not json", encoding="utf-8")
    assert read_server_file(tmp_path) is None


# -- which endpoint ----------------------------------------------------------------------------

def test_the_flag_wins_then_dmq_endpoint_then_the_file_then_the_default(tmp_path: Path) -> None:
    _write(tmp_path, endpoint="http://127.0.0.1:9400", pid=LIVE, auth="open", ca=None)
    flag = resolve("http://h:1/", _settings(tmp_path, "http://h:2"))
    assert (flag.url, flag.source, flag.server) == ("http://h:1", FLAG, None)
    env = resolve(None, _settings(tmp_path, "http://h:2"))
    assert (env.url, env.source) == ("http://h:2", ENV)
    found = resolve(None, _settings(tmp_path))
    assert (found.url, found.source, found.auth) == ("http://127.0.0.1:9400", FILE, "open")
    empty = tmp_path / "empty"
    default = resolve(None, _settings(empty))
    assert (default.url, default.source, default.server) == (DEFAULT_ENDPOINT, DEFAULT, None)


def test_a_stale_file_falls_back_to_the_default(tmp_path: Path) -> None:
    _write(tmp_path, endpoint="http://127.0.0.1:9400", pid=_dead_pid(), auth="open", ca=None)
    target = resolve(None, _settings(tmp_path))
    assert (target.url, target.source) == (DEFAULT_ENDPOINT, DEFAULT)


def test_the_servers_ca_and_auth_apply_to_its_endpoint_however_it_was_given(
    tmp_path: Path,
) -> None:
    _write(tmp_path, endpoint="https://127.0.0.1:9400", pid=LIVE, auth="required",
           ca="/d/tls/ca.pem")
    named = resolve("https://127.0.0.1:9400/", _settings(tmp_path))
    assert (named.ca, named.auth) == ("/d/tls/ca.pem", "required")
    other = resolve("https://127.0.0.1:9500", _settings(tmp_path))
    assert (other.ca, other.auth) == (None, None)


def test_a_ca_is_only_for_https(tmp_path: Path) -> None:
    _write(tmp_path, endpoint="http://127.0.0.1:9400", pid=LIVE, auth="open", ca="/ca.pem")
    assert resolve(None, _settings(tmp_path)).ca is None


@pytest.mark.parametrize("url", ["127.0.0.1:9324", "ftp://h/", "http://", "queues"])
def test_an_endpoint_that_is_no_url_is_a_usage_error(url: str, tmp_path: Path) -> None:
    with pytest.raises(CliError) as exc:
        resolve(url, _settings(tmp_path))
    assert exc.value.status == 2 and "not an endpoint URL" in exc.value.message


@pytest.mark.parametrize(("url", "loopback"), [
    ("http://127.0.0.1:9324", True), ("http://127.9.9.9", True), ("http://[::1]:9324", True),
    ("http://localhost:9324", True), ("https://abc.execute-api.us-east-1.amazonaws.com", False),
    ("http://10.0.0.5:9324", False), ("http://0.0.0.0:9324", False),
])
def test_loopback_endpoints(url: str, loopback: bool) -> None:
    assert is_loopback(url) is loopback


def test_placeholders_are_for_a_local_server_that_needs_no_credentials(tmp_path: Path) -> None:
    assert Target("http://127.0.0.1:9324").open_locally
    _write(tmp_path, endpoint="http://127.0.0.1:9400", pid=LIVE, auth="required", ca=None)
    assert not resolve(None, _settings(tmp_path)).open_locally
    assert not Target("https://abc.execute-api.us-east-1.amazonaws.com").open_locally
    _write(tmp_path, endpoint="http://192.168.1.9:9400", pid=LIVE, auth="open", ca=None)
    assert resolve(None, _settings(tmp_path)).open_locally


def test_nothing_listening_says_what_to_do_for_each_source(tmp_path: Path) -> None:
    assert "fix DMQ_ENDPOINT" in resolve(None, _settings(tmp_path, "http://h:2")).connect_hint()
    assert "fix --endpoint" in resolve("http://h:1", _settings(tmp_path)).connect_hint()
    default = resolve(None, _settings(tmp_path)).connect_hint()
    assert str(tmp_path / "server.json") in default and "make run" in default
    _write(tmp_path, endpoint="http://127.0.0.1:9400", pid=LIVE, auth="open", ca=None)
    assert f"pid {LIVE}" in resolve(None, _settings(tmp_path)).connect_hint()


# -- credentials -------------------------------------------------------------------------------

@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An environment with no AWS configuration at all (an empty home)."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_without_credentials_a_local_open_server_gets_placeholders(no_aws: None) -> None:
    signer = find_signer(botocore.session.Session(), Target("http://127.0.0.1:9324"))
    assert signer.placeholder and signer.access_key == PLACEHOLDER_KEY
    assert "placeholder" in signer.found_in


def test_the_placeholder_key_is_the_open_modes_admin() -> None:
    identities = Identities(None, None, FakeClock(), OPEN, "000000000000")  # type: ignore[arg-type]
    caller = identities.open_caller(PLACEHOLDER_KEY)
    assert caller.admin and caller.account == "000000000000"


def test_without_credentials_a_remote_endpoint_is_one_line_naming_where_dmq_looked(
    no_aws: None,
) -> None:
    with pytest.raises(CliError) as exc:
        find_signer(botocore.session.Session(),
                    Target("https://abc.execute-api.us-east-1.amazonaws.com"))
    message = exc.value.message
    assert exc.value.status == 2 and "\n" not in message
    for where in ("AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "~/.aws/credentials",
                  "~/.aws/config"):
        assert where in message, message


def test_credentials_from_the_environment_are_used(no_aws: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEY1234")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    signer = find_signer(botocore.session.Session(), Target("http://127.0.0.1:9324"))
    assert not signer.placeholder and signer.access_key == "AKIAEXAMPLEKEY1234"
    assert "AWS_ACCESS_KEY_ID" in signer.found_in and signer.shown_key == "…1234"


@pytest.mark.parametrize(("code", "admin", "refused"), [
    ("InvalidClientTokenId", False, True), ("SignatureDoesNotMatch", False, True),
    ("MissingAuthenticationToken", True, True), ("AccessDenied", True, True),
    ("AccessDenied", False, False), ("QueueDoesNotExist", False, False),
    ("MissingAuthenticationTokenException", True, False),  # API Gateway: no such route
    (None, False, False),
])
def test_which_answers_are_refused_credentials(code: str | None, admin: bool,
                                               refused: bool) -> None:
    assert is_credential_error(CliError("x", code=code, admin=admin)) is refused


def test_a_refused_placeholder_says_which_credential_is_needed(no_aws: None) -> None:
    session = botocore.session.Session()
    target = Target("http://127.0.0.1:9324")
    signer = find_signer(session, target)
    refused = CliError("InvalidClientTokenId: The security token included in the request is "
                       "invalid. (HTTP 403)", code="InvalidClientTokenId", admin=True)
    error = credential_error(refused, signer, target, session)
    assert error.status == 2 and "\n" not in error.message
    assert error.message.startswith("InvalidClientTokenId: The security token")
    assert "needs an admin's access key" in error.message
    assert "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY" in error.message
    assert "~/.aws/credentials" in error.message and "placeholder" in error.message


# -- end to end through main, against a stub that refuses every credential ---------------------

@pytest.fixture
def refusing() -> Iterator[str]:
    """A stub DMQ in the required mode: every admin request is InvalidClientTokenId."""

    class Refuse(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            body = json.dumps({"code": "InvalidClientTokenId", "message": "The security token "
                               "included in the request is invalid."}).encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _refuse

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_refused_without_credentials_is_one_line_and_status_2(
    no_aws: None, refusing: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["keys", "list", "--endpoint", refusing]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("dmq: error: InvalidClientTokenId")
    assert "AWS_ACCESS_KEY_ID" in err and "~/.aws/credentials" in err


def test_refused_credentials_name_the_key_and_where_it_came_from(
    no_aws: None, refusing: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREVOKEDKEY9876")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    assert cli.main(["regions", "status", "--endpoint", refusing]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "signed with key …9876 from the environment (AWS_ACCESS_KEY_ID)" in err
