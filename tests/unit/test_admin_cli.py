"""GIVEN the admin CLI WHEN its endpoint, arguments or data folder are wrong
THEN it says so in one line and exits non-zero, without a traceback."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from dmqlocal import admin, audit


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_endpoint_comes_from_dmq_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DMQ_ENDPOINT", "http://127.0.0.1:9999")
    assert admin.parse_args(["queues"]).endpoint == "http://127.0.0.1:9999"
    assert admin.parse_args(["--endpoint", "http://h:1", "queues"]).endpoint == "http://h:1"


def test_nothing_listening_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(SystemExit) as exc:
        admin.main(["--endpoint", endpoint, "queues"])
    message = str(exc.value.code)
    assert exc.value.code != 0 and "\n" not in message
    assert f"cannot reach DMQ at {endpoint}" in message
    assert "DMQ_ENDPOINT" in message and "Traceback" not in message


@pytest.mark.parametrize("argv", [
    ["peek", "000000000000/q", "--limit", "abc"],
    ["peek", "000000000000/q", "--limit", "-1"],
    ["peek", "000000000000/q", "--limit", "0"],
    ["peek", "000000000000/q", "--limit", "1000000"],
    ["shards", "000000000000/q", "0"],
    ["shards", "000000000000/q", "x"],
    ["capacity", "c2", "-3"],
    ["capacity", "c2", "nan"],
    ["show", "orders"],
])
def test_bad_arguments_are_usage_errors(argv: list[str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        admin.main(["--endpoint", f"http://127.0.0.1:{_free_port()}", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "error:" in err and "Traceback" not in err


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
