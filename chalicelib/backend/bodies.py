"""Large bodies: those beyond the DynamoDB item limit live in S3 (or, locally, a folder)
behind a pointer."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chalicelib.domain.exceptions import StoreError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class BodyStore:
    """Reads and writes message bodies in one S3 bucket."""

    def __init__(self, s3: S3Client, bucket: str) -> None:
        self._s3 = s3
        self._bucket = bucket

    @staticmethod
    def key_for(queue_id: str, message_id: str) -> str:
        """The object key of a message body."""
        return f"bodies/{queue_id}/{message_id}"

    @staticmethod
    def attributes_key_for(queue_id: str, message_id: str) -> str:
        """The object key of attributes too large to stay in the item."""
        return f"bodies/{queue_id}/{message_id}.attributes"

    def put(self, key: str, body: str) -> None:
        """Store a body."""
        self._s3.put_object(Bucket=self._bucket, Key=key, Body=body.encode("utf-8"))

    def get(self, key: str) -> str:
        """Read a body back."""
        return self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read().decode("utf-8")

    def copy(self, source_key: str, target_key: str) -> None:
        """Copy a body server-side (a dead-letter move keeps its own copy)."""
        self._s3.copy_object(
            Bucket=self._bucket, Key=target_key,
            CopySource={"Bucket": self._bucket, "Key": source_key},
        )

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete bodies, 1,000 to a request."""
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            self._s3.delete_objects(
                Bucket=self._bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )


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
