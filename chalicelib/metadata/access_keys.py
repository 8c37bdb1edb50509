"""Access keys in the control table: one item per key, and one index item listing them.

Items: `accesskey#<id>` holds the account, the user (absent for the account's root), the
admin flag, the status, the creation time (epoch ms) and the secret, encrypted by the
caller (`secret_cipher`); `accesskeys` holds the set of key ids, so listing is one
GetItem and one BatchGetItem per 100 keys, whatever else the control table holds.
A key and the index change together, in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.domain.exceptions import ConditionFailedError, TransactionCancelledError
from chalicelib.dynamo_batches import get_all, transact_write
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PREFIX = "accesskey#"
INDEX_KEY = "accesskeys"
ACTIVE = "Active"


class AccessKeyExistsError(Exception):
    """A key with that id is already stored."""


@dataclass(frozen=True)
class AccessKeyRecord:
    """One stored access key (its secret still encrypted)."""

    access_key_id: str
    account: str
    user: str | None  # None: the account's root
    admin: bool
    status: str
    created_ms: int
    secret_blob: bytes


def _item(record: AccessKeyRecord) -> dict[str, Any]:
    item: dict[str, Any] = {
        "key": {"S": PREFIX + record.access_key_id},
        "account": {"S": record.account},
        "admin": {"BOOL": record.admin},
        "status": {"S": record.status},
        "created_ms": {"N": str(record.created_ms)},
        "secret": {"B": record.secret_blob},
    }
    if record.user is not None:
        item["user"] = {"S": record.user}
    return item


def _record(item: dict[str, Any]) -> AccessKeyRecord:
    return AccessKeyRecord(
        access_key_id=str(item["key"]["S"])[len(PREFIX):],
        account=str(item["account"]["S"]),
        user=str(item["user"]["S"]) if "user" in item else None,
        admin=bool(item["admin"]["BOOL"]),
        status=str(item["status"]["S"]),
        created_ms=int(item["created_ms"]["N"]),
        secret_blob=bytes(item["secret"]["B"]),
    )


class AccessKeyRepository:
    """Reads and writes access keys in the control table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._db = client
        self._table = table

    def get(self, access_key_id: str) -> AccessKeyRecord | None:
        """One key, read consistently (None when unknown)."""
        with translate_errors():
            found = self._db.get_item(TableName=self._table, ConsistentRead=True,
                                      Key={"key": {"S": PREFIX + access_key_id}}).get("Item")
        return _record(dict(found)) if found else None

    def add(self, record: AccessKeyRecord) -> None:
        """Store a new key and list it; AccessKeyExistsError when the id is taken."""
        try:
            transact_write(self._db, [
                {"Put": {"TableName": self._table, "Item": _item(record),
                         "ConditionExpression": "attribute_not_exists(#k)",
                         "ExpressionAttributeNames": {"#k": "key"}}},
                {"Update": {"TableName": self._table, "Key": {"key": {"S": INDEX_KEY}},
                            "UpdateExpression": "ADD ids :id",
                            "ExpressionAttributeValues": {
                                ":id": {"SS": [record.access_key_id]}}}},
            ])
        except TransactionCancelledError as exc:
            first = str(exc.reasons[0].get("Code", "")) if exc.reasons else ""
            if first == "ConditionalCheckFailed":
                raise AccessKeyExistsError(record.access_key_id) from exc
            raise

    def remove(self, access_key_id: str) -> bool:
        """Delete a key and unlist it; False when it was not stored."""
        try:
            transact_write(self._db, [
                {"Delete": {"TableName": self._table,
                            "Key": {"key": {"S": PREFIX + access_key_id}},
                            "ConditionExpression": "attribute_exists(#k)",
                            "ExpressionAttributeNames": {"#k": "key"}}},
                {"Update": {"TableName": self._table, "Key": {"key": {"S": INDEX_KEY}},
                            "UpdateExpression": "DELETE ids :id",
                            "ExpressionAttributeValues": {":id": {"SS": [access_key_id]}}}},
            ])
        except (TransactionCancelledError, ConditionFailedError):
            return False
        return True

    def all(self) -> list[AccessKeyRecord]:
        """Every stored key, ordered by creation time."""
        with translate_errors():
            index = self._db.get_item(TableName=self._table, ConsistentRead=True,
                                      Key={"key": {"S": INDEX_KEY}}).get("Item") or {}
        ids = sorted(str(i) for i in index.get("ids", {}).get("SS", []))
        records = [_record(item) for item in
                   get_all(self._db, self._table, [{"key": {"S": PREFIX + i}} for i in ids])]
        return sorted(records, key=lambda r: (r.created_ms, r.access_key_id))
