"""The data folder one local server owns.

- `dmq.lock` is held (flock) for the server's whole life, so a second server on the same
  folder is refused at once, naming the first one's pid, before it starts a second
  DynamoDB Local over the live database. The kernel drops the lock when the process
  ends, however it ends.
- `server.json` says where the running server listens (`endpoint`, `pid`, `auth`, `ca`),
  so that `dmq` finds it without flags. It is written once the server listens and
  removed when it stops; a reader checks that the pid is alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from pathlib import Path

LOCK_FILE = "dmq.lock"
SERVER_FILE = "server.json"


class DataFolderError(Exception):
    """The data folder cannot be used; the message is one paragraph for the user."""


def absolute(path: str | Path) -> Path:
    """`path` made absolute against the current directory (`~` expanded): every path
    DMQ hands to a child process must be, since children run in other folders."""
    return Path(path).expanduser().absolute()


class DataFolder:
    """Claims a data folder for one server, and announces where the server listens."""

    def __init__(self, path: str | Path) -> None:
        self.path = absolute(path)
        self._lock_fd: int | None = None

    def claim(self) -> None:
        """Create the folder, check it is writable, and lock it for this process."""
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.path.chmod(0o700)  # what older versions left 0755 is private too
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise DataFolderError(self._unusable(exc)) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataFolderError(
                f"Another DMQ (pid {owner}) is already running on the data folder "
                f"{self.path}. Stop it first, or give this one a folder of its own: "
                "DMQ_DATA_DIR=/another/folder make run."
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        self._check_writable()

    def _check_writable(self) -> None:
        try:
            with tempfile.NamedTemporaryFile(dir=self.path, prefix=".write-check-"):
                pass
        except OSError as exc:
            self.release()
            raise DataFolderError(self._unusable(exc)) from exc

    def _unusable(self, exc: OSError) -> str:
        reason = exc.strerror or str(exc)
        return (f"The data folder {self.path} cannot be used: {reason}"
                f"{f' ({exc.filename})' if exc.filename else ''}. DMQ keeps its database "
                "there; give it a folder it can create and write: DMQ_DATA_DIR=/some/folder "
                "make run.")

    def announce(self, endpoint: str, auth: str, ca: Path | None) -> None:
        """Write `server.json` (atomically: a reader never sees half of it)."""
        text = json.dumps({"endpoint": endpoint, "pid": os.getpid(), "auth": auth,
                           "ca": str(absolute(ca)) if ca else None}, indent=2)
        temporary = self.path / f".{SERVER_FILE}.{os.getpid()}"
        temporary.write_text(text + "\n")
        os.replace(temporary, self.path / SERVER_FILE)

    def release(self) -> None:
        """Remove `server.json` (when it is this process's) and drop the lock."""
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError, ValueError):
            found = json.loads((self.path / SERVER_FILE).read_text())
            if found.get("pid") == os.getpid():
                (self.path / SERVER_FILE).unlink()
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)  # closing the descriptor drops the flock
        self._lock_fd = None
