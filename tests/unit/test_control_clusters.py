"""GIVEN a control table whose first BatchGetItem answer leaves cluster keys unprocessed
WHEN the cluster loads are read THEN the unprocessed clusters are read again and come back
with their recorded capacity and utilization, not the defaults of an unrecorded cluster."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.clusters.placement import ClusterLoad
from chalicelib.domain.exceptions import StoreThrottledError
from chalicelib.metadata.control import DEFAULT_CAPACITY, ControlRepository

TABLE = "dmq-control"
RECORDS = {f"cluster#{name}": {"key": {"S": f"cluster#{name}"}, "capacity": {"N": cap},
                               "utilization": {"N": used}}
           for name, cap, used in (("c1", "40", "3"), ("c2", "80", "5"), ("c3", "20", "1"))}


class HalfAnswering:
    """Answers the first `stingy` BatchGetItem calls with only the first of several keys
    (and none of one)."""

    def __init__(self, stingy: int) -> None:
        self.stingy = stingy
        self.calls: list[list[dict[str, Any]]] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        request = RequestItems[TABLE]
        keys = list(request["Keys"])
        self.calls.append(keys)
        first = 1 if len(keys) > 1 else 0
        done, left = ((keys[:first], keys[first:]) if len(self.calls) <= self.stingy
                      else (keys, []))
        return {"Responses": {TABLE: [RECORDS[k["key"]["S"]] for k in done]},
                "UnprocessedKeys": {TABLE: {**request, "Keys": left}} if left else {}}


def test_clusters_left_unprocessed_are_read_again_not_defaulted() -> None:
    client = HalfAnswering(stingy=1)
    loads = ControlRepository(client, TABLE, ["c1", "c2", "c3"]).loads()  # type: ignore[arg-type]
    assert loads == [ClusterLoad("c1", 40.0, 3.0), ClusterLoad("c2", 80.0, 5.0),
                     ClusterLoad("c3", 20.0, 1.0)]
    assert [len(keys) for keys in client.calls] == [3, 2]
    assert all(load.capacity != DEFAULT_CAPACITY for load in loads)


def test_clusters_that_stay_unprocessed_fail_the_read_instead_of_defaulting() -> None:
    client = HalfAnswering(stingy=100)
    with pytest.raises(StoreThrottledError):
        ControlRepository(client, TABLE, ["c1", "c2"]).loads()  # type: ignore[arg-type]
