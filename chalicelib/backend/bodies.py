"""Large bodies: those beyond the DynamoDB item limit live in S3 behind a pointer (the
local runtime keeps them in a folder: `dmqlocal.folders`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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
