"""The local server's collector settings (`dmqlocal.heap`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dmqlocal.heap import YOUNG_THRESHOLD, settle_heap


@pytest.fixture
def restored_collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_collector")
def test_settling_freezes_what_start_up_built_and_lets_young_objects_die_young() -> None:
    gc.unfreeze()
    middle, oldest = gc.get_threshold()[1:]
    built_at_start = {"kept": [object() for _ in range(10)]}
    settle_heap()
    assert gc.get_freeze_count() > 0
    assert all(o is not built_at_start for o in gc.get_objects())  # never walked again
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, oldest)


@pytest.mark.usefixtures("restored_collector")
def test_young_collections_still_run_on_their_own() -> None:
    settle_heap()
    assert gc.isenabled()
    before = gc.get_stats()[0]["collections"]
    made: list[list[int]] = [[] for _ in range(YOUNG_THRESHOLD + 100)]  # tracked
    assert gc.get_stats()[0]["collections"] > before
    assert len(made) > YOUNG_THRESHOLD
