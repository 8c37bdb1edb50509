"""The local runtime's folders: message bodies and the audit archive on disk, where AWS
keeps them in S3. The runner hands them to the runtime (`LocalFolders`), so the Lambda
package never carries them."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

from chalicelib.backend.archive import Sink
from chalicelib.backend.bodies import BodyStore
from chalicelib.domain.exceptions import StoreError
from dmqlocal import key_files


class FolderBodyStore(BodyStore):
    """The same body store over a local folder (local runs without an S3 endpoint).

    Keys become relative paths; every write goes to a temporary file first and is then
    renamed into place, so a crash never leaves half a body behind.
    """

    def __init__(self, folder: str) -> None:
        self._folder = Path(folder)

    def _path(self, key: str) -> Path:
        path = (self._folder / key).resolve()
        if self._folder.resolve() not in path.parents:
            raise StoreError(f"body key outside the body folder: {key}")
        return path

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)

    def put(self, key: str, body: str) -> None:
        """Store a body."""
        try:
            self._write(self._path(key), body.encode("utf-8"))
        except OSError as exc:
            raise StoreError(f"could not write body {key}: {exc}") from exc

    def get(self, key: str) -> str:
        """Read a body back."""
        try:
            return self._path(key).read_bytes().decode("utf-8")
        except OSError as exc:
            raise StoreError(f"could not read body {key}: {exc}") from exc

    def copy(self, source_key: str, target_key: str) -> None:
        """Copy a body (a dead-letter move keeps its own copy)."""
        try:
            self._write(self._path(target_key), self._path(source_key).read_bytes())
        except OSError as exc:
            raise StoreError(f"could not copy body {source_key}: {exc}") from exc

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete bodies; one already gone is not an error."""
        for key in keys:
            self._path(key).unlink(missing_ok=True)


class DirectorySink:
    """A folder on disk. Objects appear atomically: readers never see half a file."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def put(self, key: str, data: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        # A leading dot keeps Spark from reading the file before it is complete.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)


class LocalFolders:
    """What the runtime builds from a folder (`chalicelib.runtime_types.LocalParts`)."""

    def bodies(self, folder: str) -> BodyStore:
        """Message bodies kept in `folder`."""
        return FolderBodyStore(folder)

    def archive(self, folder: str) -> Sink:
        """The audit archive under `folder`."""
        return DirectorySink(folder)

    def key(self, path: str, size: int) -> bytes:
        """The `size`-byte key in the file `path`, made at random on first use."""
        return key_files.read_or_create_bytes(Path(path), size)

    def secret(self, path: str) -> str:
        """The secret text in the file `path`, made at random on first use."""
        return key_files.read_or_create(Path(path))
