"""What only the local runtime hands to the runtime (`LocalParts`)."""

from __future__ import annotations

from typing import Protocol

from chalicelib.backend.archive import Sink
from chalicelib.backend.bodies import BodyStore


class LocalParts(Protocol):
    """What only the local runtime builds, from a folder: message bodies, the audit
    archive and key files on disk (`dmqlocal.folders`). The Lambda package carries none
    of it."""

    def key(self, path: str, size: int) -> bytes:
        """The `size`-byte key in the file `path`, made at random on first use."""
        ...

    def secret(self, path: str) -> str:
        """The secret text in the file `path`, made at random on first use."""
        ...

    def bodies(self, folder: str) -> BodyStore:
        """Message bodies kept in `folder`."""
        ...

    def archive(self, folder: str) -> Sink:
        """The audit archive under `folder`."""
        ...
