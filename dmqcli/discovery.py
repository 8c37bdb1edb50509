"""Which DMQ `dmq` talks to: `--endpoint`, else DMQ_ENDPOINT, else the address the running
local server recorded in its data folder (`server.json`), else the local default.

The local server writes `<data folder>/server.json` once it listens:
`{"endpoint": "http://127.0.0.1:9324", "pid": 12345, "auth": "open" | "required",
"ca": "/abs/path/ca.pem" | null}`, and removes it when it stops cleanly. A file whose
process is gone is left over from a crash and is ignored.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from dmqcli.errors import USAGE, CliError
from dmqcli.settings import CliSettings

DEFAULT_ENDPOINT = "http://127.0.0.1:9324"
SERVER_FILE = "server.json"
FLAG, ENV, FILE, DEFAULT = "--endpoint", "DMQ_ENDPOINT", "server.json", "default"


@dataclass(frozen=True)
class LocalServer:
    """What a running local server recorded about itself."""

    endpoint: str
    pid: int
    auth: str | None
    ca: str | None
    path: Path


def pid_alive(pid: int) -> bool:
    """True when a process with this id exists (it may belong to another user)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def read_server_file(data_dir: Path) -> LocalServer | None:
    """The local server recorded in `data_dir`, if its process is alive."""
    path = data_dir / SERVER_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    endpoint, pid = data.get("endpoint"), data.get("pid")
    if not isinstance(endpoint, str) or type(pid) is not int or not pid_alive(pid):
        return None
    auth, ca = data.get("auth"), data.get("ca")
    return LocalServer(endpoint=endpoint.rstrip("/"), pid=pid,
                       auth=auth if isinstance(auth, str) else None,
                       ca=ca if isinstance(ca, str) and ca else None, path=path)


def check_url(url: str) -> str:
    """An endpoint as given, if it is an http(s) URL with a host; a usage error else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"{url!r} is not an endpoint URL (e.g. http://127.0.0.1:9324)", USAGE)
    return url.rstrip("/")


def is_loopback(url: str) -> bool:
    """True when the URL names this machine (localhost, 127.0.0.0/8, ::1)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Target:
    """The endpoint of one run, where it came from, and the local server serving it."""

    url: str
    source: str = FLAG
    server: LocalServer | None = None
    data_dir: Path | None = None

    @property
    def auth(self) -> str | None:
        """"open" or "required" when the local server said so; None when unknown."""
        return self.server.auth if self.server else None

    @property
    def ca(self) -> str | None:
        """The CA file to verify an https endpoint with, when the local server has one."""
        return self.server.ca if self.server and self.url.startswith("https://") else None

    @property
    def loopback(self) -> bool:
        """True when the endpoint is on this machine."""
        return is_loopback(self.url)

    @property
    def open_locally(self) -> bool:
        """True when requests may be signed with placeholder credentials: a local server
        that needs none (the open mode, or unknown on a loopback address)."""
        return self.auth != "required" and (self.loopback or self.auth == "open")

    def connect_hint(self) -> str:
        """What to do when nothing answers, depending on where the endpoint came from."""
        if self.source == ENV:
            return "is DMQ running there? Start it with `make run`, or fix DMQ_ENDPOINT"
        if self.source == FILE and self.server is not None:
            return (f"{self.server.path} says DMQ (pid {self.server.pid}) listens there; "
                    "it may still be starting")
        if self.source == DEFAULT:
            folder = self.data_dir or Path(".dmq")
            return (f"no running local server is recorded in {folder / SERVER_FILE}: start "
                    "one with `make run`, or pass --endpoint or set DMQ_ENDPOINT")
        return "is DMQ running there? Start it with `make run`, or fix --endpoint"


def _same(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def resolve(flag: str | None, settings: CliSettings) -> Target:
    """The endpoint of this run: the flag, DMQ_ENDPOINT, the local server's file, the default."""
    running = read_server_file(settings.data_dir)
    if flag:
        url, source = check_url(flag), FLAG
    elif settings.endpoint:
        url, source = check_url(settings.endpoint), ENV
    elif running is not None:
        url, source = check_url(running.endpoint), FILE
    else:
        url, source = DEFAULT_ENDPOINT, DEFAULT
    server = running if running is not None and _same(running.endpoint, url) else None
    return Target(url=url, source=source, server=server, data_dir=settings.data_dir)
