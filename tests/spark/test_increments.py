"""GIVEN a full export and incremental exports after it (hand-made rows) WHEN the changes
are applied THEN the table ends as the stream left it: a delete after the full export
removes the item, an insert adds it, a modify replaces it, the newest export wins, and
tables without changes keep their full export."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from glue_jobs.common.increments import apply_changes
from tests.spark.events import rows

IMAGE = "map<string, struct<S: string, N: string>>"
FULL = f"table string, region string, item {IMAGE}"
CHANGES = (f"table string, region string, position long, write_us long, keys {IMAGE}, "
           f"new_image {IMAGE}, old_image {IMAGE}")
PK = "000000000000/orders#0"


def _keys(sk: str) -> dict[str, Any]:
    return {"pk": (PK, None), "sk": (sk, None)}


def _item(sk: str, rc: int) -> dict[str, Any]:
    return {**_keys(sk), "rc": (None, str(rc))}


def _full(spark: Any, *items: tuple[str, dict[str, Any]]) -> Any:
    return spark.createDataFrame([(table, "r1", item) for table, item in items], FULL)


def _change(position: int, sk: str, new: dict[str, Any] | None, old: dict[str, Any] | None,
            table: str = "dmq-messages", write_us: int = 0) -> tuple[Any, ...]:
    return (table, "r1", position, write_us, _keys(sk), new, old)


def _ended(applied: Any) -> Any:
    return applied.select("table", F.col("item")["sk"]["S"].alias("sk"),
                          F.col("item")["rc"]["N"].alias("rc"), "live", "changed")


def test_deletes_inserts_and_modifies_after_the_full_export_apply_in_order(spark: Any) -> None:
    # GIVEN a full export with a, b and c (and another table's q)
    full = _full(spark, ("dmq-messages", _item("a", 0)), ("dmq-messages", _item("b", 0)),
                 ("dmq-messages", _item("c", 0)), ("dmq-queues", _item("q", 0)))
    # AND two incremental exports after it: b deleted, d inserted, c modified; then d modified
    changes = spark.createDataFrame([
        _change(0, "b", None, _item("b", 0)),
        _change(0, "d", _item("d", 0), None),
        _change(0, "c", _item("c", 1), _item("c", 0)),
        _change(1, "d", _item("d", 2), _item("d", 0)),
    ], CHANGES)
    # WHEN they are applied
    applied = _ended(apply_changes(full, changes))
    # THEN a and q are as exported; c and d as last changed; b is gone (its last image kept)
    assertDataFrameEqual(applied, rows(
        {"table": "dmq-messages", "sk": "a", "rc": "0", "live": True, "changed": False},
        {"table": "dmq-messages", "sk": "b", "rc": "0", "live": False, "changed": True},
        {"table": "dmq-messages", "sk": "c", "rc": "1", "live": True, "changed": True},
        {"table": "dmq-messages", "sk": "d", "rc": "2", "live": True, "changed": True},
        {"table": "dmq-queues", "sk": "q", "rc": "0", "live": True, "changed": False},
    ))


def test_the_newest_change_wins_whatever_the_order_of_the_rows(spark: Any) -> None:
    # GIVEN an item deleted by the later export, then written again within it (later write)
    full = _full(spark, ("dmq-messages", _item("a", 0)))
    changes = spark.createDataFrame([
        _change(1, "a", _item("a", 5), _item("a", 1), write_us=20),
        _change(1, "a", None, _item("a", 1), write_us=10),
        _change(0, "a", _item("a", 1), _item("a", 0), write_us=30),
    ], CHANGES)
    # THEN the last write of the last export stands
    assertDataFrameEqual(_ended(apply_changes(full, changes)), rows(
        {"table": "dmq-messages", "sk": "a", "rc": "5", "live": True, "changed": True}))


def test_no_incremental_export_leaves_the_full_export_as_it_is(spark: Any) -> None:
    full = _full(spark, ("dmq-messages", _item("a", 0)))
    applied = _ended(apply_changes(full, spark.createDataFrame([], CHANGES)))
    assertDataFrameEqual(applied, rows(
        {"table": "dmq-messages", "sk": "a", "rc": "0", "live": True, "changed": False}))


def test_an_item_that_came_and_went_around_the_full_export_is_gone(spark: Any) -> None:
    # GIVEN x, sent just before the full export's scan read it and deleted just after:
    # the incremental export whose window holds both has a line without images for it
    full = _full(spark, ("dmq-messages", _item("x", 0)))
    changes = spark.createDataFrame([_change(0, "x", None, None)], CHANGES)
    # THEN the table ends without it (it was changed: the chain judges it)
    assertDataFrameEqual(_ended(apply_changes(full, changes)), rows(
        {"table": "dmq-messages", "sk": "x", "rc": None, "live": False, "changed": True}))
