"""GIVEN a deployed messages table WHEN the LocalStack deploy script checks it THEN the
visibility index passes with the current projection or the one earlier versions made
(DMQ reads both), and any other projection is a mismatch."""

from __future__ import annotations

from typing import Any

from infra import provision
from localstack.deploy import _index_differences


def _index(projection: dict[str, Any]) -> list[dict[str, Any]]:
    (index,) = provision.resources()["MessagesTable"]["Properties"]["LocalSecondaryIndexes"]
    return [{**index, "Projection": projection}]


def test_the_current_and_the_earlier_projections_pass_any_other_is_a_mismatch() -> None:
    want = _index(provision.resources()["MessagesTable"]["Properties"][
        "LocalSecondaryIndexes"][0]["Projection"])
    earlier = {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["rc", "expires_ms"]}
    assert list(_index_differences("LSI", want, want)) == []
    assert list(_index_differences("LSI", want, _index(earlier))) == []
    (problem,) = _index_differences("LSI", want, _index({"ProjectionType": "KEYS_ONLY"}))
    assert problem.startswith("LSI visible-index projection")
