"""GIVEN the local server in its default open mode WHEN people type the installed `dmq` as
they would (global options after the command, the AWS CLI's --endpoint-url, no AWS
configuration at all, no flags but a running server's `server.json`, a purge from a
script, a failover of the only region) THEN it works, finds the server, asks or refuses
before deleting, refuses to take down the last healthy region, and shows ISO times."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, free_port
from tests.e2e.test_dmq_cli import Done

pytestmark = pytest.mark.e2e

DMQ = Path(sys.executable).parent / "dmq"
RUN_TIMEOUT_S = 60
ACCOUNT = "000000000000"
ISO = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b")



Run = Callable[..., Done]


def _bare_env(data_dir: Path) -> dict[str, str]:
    """An environment with no AWS configuration, an empty HOME and no DMQ_ENDPOINT."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "",
            "LANG": "C.UTF-8", "DMQ_DATA_DIR": str(data_dir),
            # No instance metadata lookups from a test machine (dmq skips them locally).
            "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture
def bare(tmp_path: Path) -> Run:
    """Run `dmq` with no AWS configuration at all and an empty data folder."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()

    def run(*argv: str, stdin: int | None = subprocess.DEVNULL, **extra_env: str) -> Done:
        done = subprocess.run([str(DMQ), *argv], cwd=ROOT, env={**_bare_env(data_dir),
                                                                **extra_env},
                              stdin=stdin, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False)
        assert "Traceback" not in done.stderr, done.stderr
        return Done(done.returncode, done.stdout, done.stderr)

    run.data_dir = data_dir  # type: ignore[attr-defined]
    return run


def _one_error_line(done: Done, code: int, *words: str) -> None:
    assert done.code == code, done
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    for word in words:
        assert word in lines[0], lines[0]
    assert done.out == ""


def test_global_options_go_anywhere_and_endpoint_url_is_an_alias(
    bare: Run, dmq_url: str, unique_name: Any,
) -> None:
    name = unique_name("flags")
    made = bare("queues", "create", name, "--endpoint", dmq_url, "--json")
    assert made.code == 0, made
    assert made.json()["QueueUrl"].endswith(f"/{ACCOUNT}/{name}")
    for argv in (["queues", "list", "--endpoint", dmq_url, "--prefix", name, "--json"],
                 ["queues", "list", "--prefix", name, "--endpoint-url", dmq_url, "--json"],
                 ["--endpoint-url", dmq_url, "queues", "--json", "list", "--prefix", name],
                 ["queues", "list", f"--endpoint-url={dmq_url}", "--prefix", name, "--json",
                  "--region", "us-east-1"]):
        done = bare(*argv)
        assert done.code == 0, (argv, done)
        assert [u.rsplit("/", 1)[-1] for u in done.json()["QueueUrls"]] == [name]


def test_no_credentials_and_an_empty_home_against_the_open_server(
    bare: Run, dmq_url: str, unique_name: Any,
) -> None:
    name = unique_name("nocreds")
    assert bare("queues", "create", name, "--endpoint", dmq_url).code == 0
    sent = bare("messages", "send", name, "hello", "--endpoint", dmq_url)
    assert sent.code == 0, sent
    # The admin API too: the placeholder credentials act as the open mode's admin.
    peeked = bare("messages", "peek", name, "--endpoint", dmq_url, "--json")
    assert peeked.code == 0, peeked
    assert [m["body"] for m in peeked.json()["messages"]] == ["hello"]
    assert bare("keys", "list", "--endpoint", dmq_url).code == 0
    assert bare("regions", "status", "--endpoint", dmq_url).code == 0
    shown = bare("config", "--endpoint", dmq_url, "--json").json()
    assert shown["access_key"] == "dmq-local" and "placeholder" in shown["credentials"]


def _server_file(folder: Path, endpoint: str, pid: int) -> None:
    folder.joinpath("server.json").write_text(json.dumps(
        {"endpoint": endpoint, "pid": pid, "auth": "open", "ca": None}), encoding="utf-8")


def test_the_running_server_is_found_by_its_server_json(bare: Run, dmq_url: str,
                                                        unique_name: Any) -> None:
    name = unique_name("found")
    _server_file(bare.data_dir, dmq_url, os.getpid())  # type: ignore[attr-defined]
    shown = bare("config", "--json").json()
    assert (shown["endpoint"], shown["endpoint_source"]) == (
        dmq_url, "the local server's server.json")
    assert bare("queues", "create", name).code == 0
    listed = bare("queues", "list", "--prefix", name, "--json")
    assert listed.code == 0, listed
    assert listed.json()["QueueUrls"] == [f"{dmq_url}/{ACCOUNT}/{name}"]


def test_a_stale_server_json_is_ignored(bare: Run, dmq_url: str) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    _server_file(bare.data_dir, dmq_url, ended.pid)  # type: ignore[attr-defined]
    shown = bare("config", "--json").json()
    assert (shown["endpoint"], shown["endpoint_source"], shown["server_pid"]) == (
        "http://127.0.0.1:9324", "the default", None)
    # DMQ_ENDPOINT still wins over the default.
    assert bare("config", "--json", DMQ_ENDPOINT=dmq_url).json()["endpoint"] == dmq_url


def test_an_unreachable_endpoint_is_one_line_with_status_1(bare: Run) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    _one_error_line(bare("queues", "list", "--endpoint", endpoint), 1,
                    f"cannot reach DMQ at {endpoint}", "make run")
    _one_error_line(bare("keys", "list", "--endpoint-url", endpoint), 1,
                    f"cannot reach DMQ at {endpoint}")


def test_a_wrong_flag_is_one_line_with_status_2(bare: Run) -> None:
    _one_error_line(bare("queues", "list", "--bogus"), 2, "unrecognized arguments: --bogus")
    _one_error_line(bare("queues", "list", "--endpoint"), 2, "--endpoint",
                    "expected one argument")


def _visible(bare: Run, dmq_url: str, name: str) -> int:
    done = bare("stats", name, "--endpoint", dmq_url, "--json")
    assert done.code == 0, done
    return int(done.json()["queues"][0]["visible"])


def _visible_soon(bare: Run, dmq_url: str, name: str, expected: int) -> int:
    """The visible count once it is `expected` (a purge's messages are removed within
    seconds after it answers, as SQS allows it 60 s), or as it stands after 30 s."""
    deadline = time.monotonic() + 30.0
    while (found := _visible(bare, dmq_url, name)) != expected and time.monotonic() < deadline:
        time.sleep(0.3)
    return found


def test_purge_from_a_script_needs_yes(bare: Run, dmq_url: str, unique_name: Any) -> None:
    name = unique_name("purge")
    bare("queues", "create", name, "--endpoint", dmq_url)
    bare("messages", "send", name, "keep me", "--endpoint", dmq_url)
    _one_error_line(bare("queues", "purge", name, "--endpoint", dmq_url), 2,
                    f"purging '{name}' needs confirmation", "pass --yes")
    _one_error_line(bare("queues", "delete", name, "--endpoint", dmq_url), 2, "pass --yes")
    assert _visible(bare, dmq_url, name) == 1
    purged = bare("queues", "purge", name, "--endpoint", dmq_url, "--yes")
    assert purged.code == 0 and "purged" in purged.out, purged
    assert _visible_soon(bare, dmq_url, name, 0) == 0
    assert bare("queues", "delete", name, "-y", "--endpoint", dmq_url).code == 0


def _on_a_terminal(bare: Run, answer: str, *argv: str) -> Done:
    """Run `dmq` with a terminal as stdin, the answer already typed."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode())
        return bare(*argv, stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)


def test_on_a_terminal_purge_asks_first(bare: Run, dmq_url: str, unique_name: Any) -> None:
    name = unique_name("ask")
    bare("queues", "create", name, "--endpoint", dmq_url)
    bare("messages", "send", name, "keep me", "--endpoint", dmq_url)
    declined = _on_a_terminal(bare, "n\n", "queues", "purge", name, "--endpoint", dmq_url)
    assert declined.code == 1, declined
    assert declined.err.startswith(f"Purge all messages of '{name}'? [y/N] ")
    assert "not confirmed" in declined.err and _visible(bare, dmq_url, name) == 1
    accepted = _on_a_terminal(bare, "y\n", "queues", "purge", name, "--endpoint", dmq_url)
    assert accepted.code == 0, accepted
    assert _visible_soon(bare, dmq_url, name, 0) == 0


def test_failover_of_the_only_region_is_refused_and_changes_nothing(
    bare: Run, dmq_url: str, unique_name: Any,
) -> None:
    _one_error_line(bare("regions", "failover", "us-east-1", "--endpoint", dmq_url), 2,
                    "pass --yes")
    refused = bare("regions", "failover", "us-east-1", "--yes", "--endpoint", dmq_url)
    _one_error_line(refused, 1, "FailoverRefused", "No other healthy region can take over",
                    "--force marks it down anyway")
    assert "force=true" not in refused.err
    regions = bare("regions", "status", "--endpoint", dmq_url, "--json").json()["regions"]
    assert [(r["region"], r["up"]) for r in regions] == [("us-east-1", True)]
    name = unique_name("still")
    assert bare("queues", "create", name, "--endpoint", dmq_url).code == 0
    assert bare("messages", "send", name, "served", "--endpoint", dmq_url).code == 0


def test_times_are_iso_in_tables_and_raw_in_json(bare: Run, dmq_url: str,
                                                 unique_name: Any) -> None:
    name = unique_name("times")
    bare("queues", "create", name, "--endpoint", dmq_url)
    bare("messages", "send", name, "when", "--endpoint", dmq_url)
    raw = bare("messages", "peek", name, "--endpoint", dmq_url, "--json").json()["messages"][0]
    assert isinstance(raw["sent_ms"], int) and isinstance(raw["visible_at"], int)
    table = bare("messages", "peek", name, "--endpoint", dmq_url)
    assert table.code == 0 and len(ISO.findall(table.out)) >= 2, table.out
    assert str(raw["sent_ms"]) not in table.out
    made = bare("keys", "create", "111122223333", "--user", "times", "--endpoint", dmq_url,
                "--json").json()
    assert isinstance(made["created"], int)
    keys = bare("keys", "list", "--account", "111122223333", "--endpoint", dmq_url)
    assert keys.code == 0 and made["accessKeyId"] in keys.out
    assert ISO.search(keys.out) and str(made["created"]) not in keys.out, keys.out
    described = bare("queues", "describe", name, "--endpoint", dmq_url)
    assert re.search(r"CreatedTimestamp\s*│\s*\d{4}-\d\d-\d\dT", described.out), described.out
    assert bare("regions", "tick", "us-east-1", "--endpoint", dmq_url).code == 0  # a beat
    heartbeat = bare("regions", "status", "--endpoint", dmq_url)
    assert ISO.search(heartbeat.out), heartbeat.out
