"""Small sets of strings kept in a few items of one table, so that a background pass
reads the handful of members it must visit with one BatchGetItem instead of reading every
queue.

A set named `<name>` lives in PARTS items, `<name>#<part>`, each holding its members in a
string set attribute `m` (a member's part is the CRC-32 of the member, modulo PARTS), so
that no item nears DynamoDB's 400 KB limit before the set holds tens of thousands of
members. Adding and removing are `ADD` and `DELETE` on that set: they commute, so writers
never read first and never conflict.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from chalicelib.dynamo_batches import get_all
from chalicelib.dynamo_errors import translate_errors

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PARTS = 16
MEMBERS = "m"


def part_key(name: str, member: str) -> str:
    """The key of the item that holds `member` of the set `name`."""
    return f"{name}#{zlib.crc32(member.encode()) % PARTS}"


def members(client: DynamoDBClient, table: str, name: str, consistent: bool = False,
            ) -> set[str]:
    """Every member of the set (one BatchGetItem of its PARTS items)."""
    return members_and_mark(client, table, name, consistent)[0]


def members_and_mark(client: DynamoDBClient, table: str, name: str,
                     consistent: bool = False) -> tuple[set[str], bool]:
    """Every member of the set, and whether it was marked whole (`mark`), read together
    (one BatchGetItem of its PARTS items and its mark item, `<name>#mark`)."""
    keys = [{"key": {"S": f"{name}#{part}"}} for part in range(PARTS)]
    keys.append({"key": {"S": f"{name}#mark"}})
    found = get_all(client, table, keys, consistent=consistent)
    marked = any(str(item["key"]["S"]) == f"{name}#mark" for item in found)
    return {str(m) for item in found for m in item.get(MEMBERS, {}).get("SS", [])}, marked


def mark(client: DynamoDBClient, table: str, name: str) -> None:
    """Mark the set whole (once it was filled from what existed before it was kept)."""
    with translate_errors():
        client.put_item(TableName=table, Item={"key": {"S": f"{name}#mark"}})


def _change(client: DynamoDBClient, table: str, name: str, values: Iterable[str],
            verb: str) -> int:
    by_part: dict[str, set[str]] = {}
    for value in values:
        by_part.setdefault(part_key(name, value), set()).add(value)
    for key, part in sorted(by_part.items()):
        with translate_errors():
            client.update_item(TableName=table, Key={"key": {"S": key}},
                               UpdateExpression=f"{verb} {MEMBERS} :v",
                               ExpressionAttributeValues={":v": {"SS": sorted(part)}})
    return len(by_part)


def add(client: DynamoDBClient, table: str, name: str, values: Iterable[str]) -> int:
    """Add members (one UpdateItem per part touched); the writes made."""
    return _change(client, table, name, values, "ADD")


def remove(client: DynamoDBClient, table: str, name: str, values: Iterable[str]) -> int:
    """Remove members (one UpdateItem per part touched); the writes made."""
    return _change(client, table, name, values, "DELETE")
