"""GIVEN a local server started with TLS, or with authentication required, on a data folder
of its own WHEN `dmq` runs with no flags and no AWS configuration, only DMQ_DATA_DIR THEN
it finds the server through its `server.json`, verifies HTTPS with the CA file named
there, and, where credentials are required, says in one line which credential it needs
and where it looked; with the right credentials it works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

pytestmark = pytest.mark.e2e

DMQ = Path(sys.executable).parent / "dmq"
RUN_TIMEOUT_S = 60
ROOT_KEY, ROOT_SECRET = "AKIACLIROOTCLIROOTCL", "cli-root-secret-cli-root-secret-cli-root"


@dataclass
class Served:
    """A server and the data folder it announced itself in."""

    process: DmqProcess
    data_dir: Path

    def dmq(self, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`dmq` with nothing but DMQ_DATA_DIR (no AWS configuration, an empty HOME)."""
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "",
                "LANG": "C.UTF-8", "DMQ_DATA_DIR": str(self.data_dir),
                "AWS_EC2_METADATA_DISABLED": "true"}
        done = subprocess.run([str(DMQ), *argv], cwd=ROOT, env={**base, **env},
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              check=False)
        assert "Traceback" not in done.stderr, done.stderr
        return done


def _serve(**env: str) -> Iterator[Served]:
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-cli-data-"))
    process = launch(DMQ_STORE="memory", DMQ_DATA_DIR=str(data_dir), **env)
    try:
        assert process.wait_ready(START_TIMEOUT_S), process.output
        yield Served(process, data_dir)
    finally:
        code = process.stop(STOP_TIMEOUT_S)
        announced = (data_dir / "server.json").exists()
        shutil.rmtree(data_dir, ignore_errors=True)
    assert code == 0, process.output
    assert "Traceback" not in process.output, process.output
    assert not announced  # removed on a clean stop


@pytest.fixture(scope="module")
def tls() -> Iterator[Served]:
    """An open server over HTTPS with a generated certificate."""
    yield from _serve(DMQ_TLS="1")


@pytest.fixture(scope="module")
def required() -> Iterator[Served]:
    """A server that verifies every signature against its keys."""
    yield from _serve(DMQ_AUTH="required", DMQ_ROOT_ACCESS_KEY_ID=ROOT_KEY,
                      DMQ_ROOT_SECRET_ACCESS_KEY=ROOT_SECRET)


def test_https_is_verified_with_the_ca_the_server_announced(tls: Served) -> None:
    record = json.loads((tls.data_dir / "server.json").read_text())
    assert record["endpoint"].startswith("https://") and record["ca"]
    shown = json.loads(tls.dmq("config", "--json").stdout)
    assert (shown["endpoint"], shown["ca"]) == (record["endpoint"], record["ca"])
    made = tls.dmq("queues", "create", "over-tls", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["QueueUrl"].startswith("https://")
    assert tls.dmq("keys", "list").returncode == 0  # the admin API over HTTPS too


def test_https_without_the_servers_ca_fails_in_one_line(tls: Served, tmp_path: Path) -> None:
    record = json.loads((tls.data_dir / "server.json").read_text())
    # Another data folder: nothing names the CA, so the system's CAs do not trust it.
    done = tls.dmq("queues", "list", "--endpoint", record["endpoint"],
                   DMQ_DATA_DIR=str(tmp_path))
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"cannot reach DMQ at {record['endpoint']}" in done.stderr


def test_required_auth_without_credentials_names_what_is_needed(required: Served) -> None:
    assert json.loads((required.data_dir / "server.json").read_text())["auth"] == "required"
    done = required.dmq("queues", "list")
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    for words in ("no AWS credentials", "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
                  "AWS_PROFILE", "~/.aws/credentials"):
        assert words in lines[0], lines[0]


def test_required_auth_with_a_key_it_does_not_know(required: Served) -> None:
    done = required.dmq("keys", "list", AWS_ACCESS_KEY_ID="AKIAUNKNOWNKEY000042",
                        AWS_SECRET_ACCESS_KEY="nope")
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("dmq: error: InvalidClientTokenId")
    assert "needs an admin's access key" in done.stderr
    assert "key …0042 from the environment (AWS_ACCESS_KEY_ID)" in done.stderr


def test_required_auth_with_the_root_key_works(required: Served) -> None:
    creds = {"AWS_ACCESS_KEY_ID": ROOT_KEY, "AWS_SECRET_ACCESS_KEY": ROOT_SECRET}
    assert required.dmq("queues", "create", "signed", **creds).returncode == 0
    listed = required.dmq("queues", "list", "--json", **creds)
    assert listed.returncode == 0, listed.stderr
    assert [u.rsplit("/", 1)[-1] for u in json.loads(listed.stdout)["QueueUrls"]] == ["signed"]
    assert required.dmq("keys", "list", **creds).returncode == 0
