"""The table calls: CreateTable, DescribeTable, UpdateTable, DeleteTable, ListTables, the
TTL and tag calls."""

from __future__ import annotations

import time
from typing import Any

from dmqlocal.memstore.database import Database, in_use
from dmqlocal.memstore.errors import invalid, not_found
from dmqlocal.memstore.streams import Stream
from dmqlocal.memstore.tables import Index, KeySchema, Table
from dmqlocal.memstore.values import item_size

Request = dict[str, Any]
Answer = dict[str, Any]


def _schema(key_schema: Any, types: dict[str, str]) -> KeySchema:
    if not isinstance(key_schema, list) or not 1 <= len(key_schema) <= 2:
        raise invalid("1 validation error detected: Value at 'keySchema' failed to satisfy "
                      "constraint: Member must have length less than or equal to 2")
    by_type = {k.get("KeyType"): k.get("AttributeName") for k in key_schema}
    hash_name, range_name = by_type.get("HASH"), by_type.get("RANGE")
    if hash_name is None or (len(key_schema) == 2 and range_name is None):
        raise invalid("Invalid KeySchema: The first KeySchemaElement is not a HASH key type")
    for name in (hash_name, range_name):
        if name is not None and name not in types:
            raise invalid("One or more parameter values were invalid: Some index key "
                          "attributes are not defined in AttributeDefinitions. Keys: "
                          f"[{name}], AttributeDefinitions: {sorted(types)}")
    return KeySchema(hash_name, types[hash_name], range_name,
                     types[range_name] if range_name is not None else None)


def _indexes(request: Request, types: dict[str, str], table: KeySchema) -> dict[str, Index]:
    found: dict[str, Index] = {}
    for local, field in ((True, "LocalSecondaryIndexes"), (False, "GlobalSecondaryIndexes")):
        for spec in request.get(field) or []:
            schema = _schema(spec.get("KeySchema"), types)
            if local and schema.hash_name != table.hash_name:
                raise invalid("One or more parameter values were invalid: Index KeySchema "
                              "does not have the same leading hash key as table KeySchema "
                              f"for index: {spec.get('IndexName')}")
            name = str(spec.get("IndexName", ""))
            if name in found:
                raise invalid(f"One or more parameter values were invalid: Duplicate index "
                              f"name: {name}")
            found[name] = Index(name, schema, dict(spec.get("Projection") or
                                                   {"ProjectionType": "ALL"}), local)
    return found


def create_table(db: Database, request: Request) -> Answer:
    """CreateTable: active at once."""
    name = request.get("TableName")
    if not isinstance(name, str) or not 3 <= len(name) <= 255:
        raise invalid("TableName must be at least 3 characters long and at most 255 "
                      "characters long")
    if name in db.tables:
        raise in_use(name)
    definitions = list(request.get("AttributeDefinitions") or [])
    types = {d["AttributeName"]: d["AttributeType"] for d in definitions}
    schema = _schema(request.get("KeySchema"), types)
    table = Table(name, db.arn(name), schema, definitions, _indexes(request, types, schema),
                  str(request.get("BillingMode") or "PROVISIONED"))
    table.tags = {t["Key"]: t["Value"] for t in request.get("Tags") or []}
    db.tables[name] = table
    _set_stream(db, table, request.get("StreamSpecification"))
    return {"TableDescription": describe(db, table)}


def _set_stream(db: Database, table: Table, spec: Any) -> None:
    if not spec:
        return
    if spec.get("StreamEnabled", True) is False:
        if table.stream_arn is not None:
            db.streams[table.stream_arn].close()
            table.stream_arn = table.stream_view = None
        return
    if table.stream_arn is not None:
        raise invalid(f"Table already has an enabled stream: {db.arn(table.name)}")
    view = str(spec.get("StreamViewType") or "NEW_AND_OLD_IMAGES")
    stream = Stream.new(table.arn, table.name, db.region, table.schema.wire(), view)
    while stream.arn in db.streams:  # a table made again within the same millisecond
        time.sleep(0.001)
        stream = Stream.new(table.arn, table.name, db.region, table.schema.wire(), view)
    db.streams[stream.arn] = stream
    table.stream_arn, table.stream_view = stream.arn, view


def describe(db: Database, table: Table) -> Answer:
    """The table as DescribeTable gives it."""
    found: Answer = {
        "TableName": table.name, "TableArn": table.arn, "TableId": table.arn,
        "TableStatus": "ACTIVE", "KeySchema": table.schema.wire(),
        "AttributeDefinitions": table.definitions, "CreationDateTime": table.created,
        "ItemCount": table.count,
        # Summed at each call, as DynamoDB Local does (DMQ's requests never ask for it).
        "TableSizeBytes": sum(item_size(item) for _, item in table.items()),
        "ProvisionedThroughput": {"ReadCapacityUnits": 0, "WriteCapacityUnits": 0,
                                  "NumberOfDecreasesToday": 0},
        "BillingModeSummary": {"BillingMode": table.billing}}
    local = [i.wire(table.arn) for i in table.indexes.values() if i.local]
    glob = [i.wire(table.arn) for i in table.indexes.values() if not i.local]
    if local:
        found["LocalSecondaryIndexes"] = local
    if glob:
        found["GlobalSecondaryIndexes"] = glob
    if table.stream_arn is not None:
        found["StreamSpecification"] = {"StreamEnabled": True,
                                        "StreamViewType": table.stream_view}
        found["LatestStreamArn"] = table.stream_arn
        found["LatestStreamLabel"] = db.streams[table.stream_arn].label
    return found


def describe_table(db: Database, request: Request) -> Answer:
    """DescribeTable."""
    name = request.get("TableName")
    if name not in db.tables:
        raise not_found(f"Table: {name} not found")
    return {"Table": describe(db, db.tables[name])}


def update_table(db: Database, request: Request) -> Answer:
    """UpdateTable: its stream and billing mode (throughput is not modelled)."""
    table = db.table(request.get("TableName"))
    if "StreamSpecification" in request:
        _set_stream(db, table, request["StreamSpecification"])
    if request.get("BillingMode"):
        table.billing = str(request["BillingMode"])
    return {"TableDescription": describe(db, table)}


def delete_table(db: Database, request: Request) -> Answer:
    """DeleteTable: its items go, its stream closes."""
    table = db.table(request.get("TableName"))
    described = describe(db, table)
    described["TableStatus"] = "DELETING"
    if table.stream_arn is not None:
        db.streams[table.stream_arn].close()
    del db.tables[table.name]
    db.rebuild_ttl()
    return {"TableDescription": described}


def list_tables(db: Database, request: Request) -> Answer:
    """ListTables, in name order, 100 a page at most."""
    limit = int(request.get("Limit") or 100)
    if not 1 <= limit <= 100:
        raise invalid("1 validation error detected: Value at 'limit' failed to satisfy "
                      "constraint: Member must have value less than or equal to 100")
    start = request.get("ExclusiveStartTableName")
    names = sorted(n for n in db.tables if start is None or n > start)
    answer: Answer = {"TableNames": names[:limit]}
    if len(names) > limit:
        answer["LastEvaluatedTableName"] = names[limit - 1]
    return answer


def update_time_to_live(db: Database, request: Request) -> Answer:
    """UpdateTimeToLive: expired items are deleted within about a second."""
    table = db.table(request.get("TableName"))
    spec = request.get("TimeToLiveSpecification") or {}
    enabled = bool(spec.get("Enabled"))
    if enabled == (table.ttl_attribute is not None):
        raise invalid("TimeToLive is already enabled" if enabled
                      else "TimeToLive is already disabled")
    table.ttl_attribute = str(spec.get("AttributeName")) if enabled else None
    db.rebuild_ttl()
    return {"TimeToLiveSpecification": spec}


def describe_time_to_live(db: Database, request: Request) -> Answer:
    """DescribeTimeToLive."""
    table = db.table(request.get("TableName"))
    if table.ttl_attribute is None:
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}
    return {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED",
                                      "AttributeName": table.ttl_attribute}}


def _by_arn(db: Database, arn: Any) -> Table:
    for table in db.tables.values():
        if table.arn == arn:
            return table
    raise not_found()


def tag_resource(db: Database, request: Request) -> Answer:
    """TagResource."""
    table = _by_arn(db, request.get("ResourceArn"))
    table.tags.update({t["Key"]: t["Value"] for t in request.get("Tags") or []})
    return {}


def untag_resource(db: Database, request: Request) -> Answer:
    """UntagResource."""
    table = _by_arn(db, request.get("ResourceArn"))
    for key in request.get("TagKeys") or []:
        table.tags.pop(key, None)
    return {}


def list_tags_of_resource(db: Database, request: Request) -> Answer:
    """ListTagsOfResource."""
    table = _by_arn(db, request.get("ResourceArn"))
    return {"Tags": [{"Key": k, "Value": v} for k, v in sorted(table.tags.items())]}


CALLS = {
    "CreateTable": create_table, "DescribeTable": describe_table,
    "UpdateTable": update_table, "DeleteTable": delete_table, "ListTables": list_tables,
    "UpdateTimeToLive": update_time_to_live, "DescribeTimeToLive": describe_time_to_live,
    "TagResource": tag_resource, "UntagResource": untag_resource,
    "ListTagsOfResource": list_tags_of_resource,
}
