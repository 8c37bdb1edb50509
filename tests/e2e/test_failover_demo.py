"""GIVEN the failover demo WHEN it runs in sync and async mode THEN sync loses nothing and
async reports its loss honestly on the summary line."""

from __future__ import annotations

import re

import pytest

from dmqlocal import failover_demo

SUMMARY = re.compile(
    r"^mode=(sync|async) acknowledged=(\d+) delivered=(\d+) lost=(\d+) "
    r"failover_seconds=([0-9.]+)$")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_demo_fails_over_and_prints_its_summary_last(
    mode: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert failover_demo.main(["--mode", mode, "--messages", "60", "--timeout", "90"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = SUMMARY.match(last)
    assert match, last
    acknowledged, delivered, lost = (int(match.group(i)) for i in (2, 3, 4))
    assert acknowledged == 60
    assert delivered + lost == acknowledged
    assert 0 < float(match.group(5)) < 30
    if mode == "sync":
        assert lost == 0
