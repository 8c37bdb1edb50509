"""Secrets kept in files of a private folder: made once, at random, and then reused.

The folder is made with mode 0700 (and tightened to it when it exists), the file with 0600.
A new key is written whole into a temporary file first and then linked to its name:
a link either appears complete or fails because another process linked first, so two
processes starting at once end up with the same key and neither ever reads half of one.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import uuid
from pathlib import Path

KEY_BYTES = 32
FOLDER_MODE = 0o700
FILE_MODE = 0o600


class KeyFileError(Exception):
    """A key file exists but cannot hold a usable key; the message names the file."""


def new_secret() -> str:
    """256 random bits as URL-safe text (what a key file holds)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii").rstrip("=")


def private_folder(folder: Path) -> Path:
    """The folder, made (with its parents) if missing and readable by its owner only."""
    folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    with contextlib.suppress(PermissionError):  # not ours: leave it as it is
        os.chmod(folder, FOLDER_MODE)
    return folder


def _create(path: Path, content: bytes) -> None:
    """Write `content` to `path` unless another process does first: whole into a
    temporary file, then linked to its name (the first link wins; the others' files go)."""
    private_folder(path.parent)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def read_or_create_bytes(path: Path, size: int = KEY_BYTES) -> bytes:
    """The raw key in `path`: `size` random bytes made on first use (the first writer
    wins, and no reader ever sees a file half written)."""
    if not path.exists():
        _create(path, secrets.token_bytes(size))
    return path.read_bytes()


def read_or_create_text(path: Path, make: str) -> str:
    """The text in `path`; `make` is written first when there is none (the first writer
    wins)."""
    if not path.exists():
        _create(path, f"{make}\n".encode())
    return path.read_text(encoding="utf-8", errors="replace").strip()


def read_or_create(path: Path) -> str:
    """The secret in `path`, made at random on first use (the first writer wins)."""
    text = read_or_create_text(path, new_secret())
    if len(text) < KEY_BYTES:
        raise KeyFileError(f"{path} does not hold a key (at least {KEY_BYTES} characters): "
                           "delete it to have a new one made.")
    return text
