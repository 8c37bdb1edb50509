"""Pure transforms that apply incremental exports to a full export (see `chains`).

Inputs:
- `full_items`: (table, region, item) of the full exports;
- `changes`: (table, region, position, write_us, keys, new_image, old_image), one row per
  line of the incremental exports, `position` being the export's place in its chain.

A changed item takes its newest line (the latest export, then the latest write time):
its `NewImage`, or nothing when that line deletes it. Items are matched by their key
attributes, which are the names in the lines' `Keys`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

TABLE = ["table", "region"]


def _key(image: Column, names: Column) -> Column:
    """An item's key as one string: `name=value` for each key attribute, in name order."""
    def part(name: Column) -> Column:
        value = image[name]
        return F.concat_ws("=", name, F.coalesce(value["S"], value["N"], F.lit("")))

    return F.array_join(F.transform(names, part), "|")


def key_names(changes: DataFrame) -> DataFrame:
    """(table, region, _names): the key attribute names of each table with changes."""
    return (changes.select(*TABLE, F.explode(F.map_keys("keys")).alias("_name")).distinct()
            .groupBy(*TABLE).agg(F.array_sort(F.collect_set("_name")).alias("_names")))


def latest_changes(changes: DataFrame) -> DataFrame:
    """(table, region, _key, new_image, old_image, keys): each changed item's newest line."""
    names = key_names(changes)
    order = F.struct("position", F.coalesce("write_us", F.lit(0)).alias("write_us"))
    last = F.max_by(F.struct("new_image", "old_image", "keys"), order)
    return (changes.join(names, TABLE).withColumn("_key", _key(F.col("keys"), F.col("_names")))
            .groupBy(*TABLE, "_key").agg(last.alias("_last"))
            .select(*TABLE, "_key", "_last.new_image", "_last.old_image", "_last.keys"))


def apply_changes(full_items: DataFrame, changes: DataFrame) -> DataFrame:
    """(table, region, item, live, changed): every item the chains end with (`live`), and
    every item the incremental exports changed (`changed`; a deleted one keeps its last
    image, and is not live)."""
    latest = latest_changes(changes)
    keyed = full_items.select(*TABLE, "item").join(key_names(changes), TABLE, "left") \
        .withColumn("_key", F.when(F.col("_names").isNotNull(),
                                   _key(F.col("item"), F.col("_names"))))
    unchanged = keyed.join(latest.select(*TABLE, "_key"), [*TABLE, "_key"], "left_anti") \
        .select(*TABLE, "item", F.lit(True).alias("live"), F.lit(False).alias("changed"))
    changed = latest.select(
        *TABLE, F.coalesce("new_image", "old_image", "keys").alias("item"),
        F.col("new_image").isNotNull().alias("live"), F.lit(True).alias("changed"))
    return unchanged.unionByName(changed)
