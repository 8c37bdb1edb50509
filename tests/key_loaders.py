"""Key files as the local runtime reads them, for tests of the ciphers built over them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dmqlocal.folders import LocalFolders
from dmqlocal.key_files import KEY_BYTES, read_or_create_bytes

# The local runtime's key files (made at random on first use).
FILES = LocalFolders()


def file_key(path: str | Path) -> Callable[[], bytes]:
    """What reads the 256-bit key in `path`, made on first use."""
    return lambda: read_or_create_bytes(Path(path), KEY_BYTES)
