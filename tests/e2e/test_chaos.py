"""GIVEN the real local server with 5% of its DynamoDB calls failed (throttles, timeouts
after the write, a claim's failed condition) WHEN producers and consumers run through it
THEN no acknowledged message is lost, and every copy of a send is explained by a write
whose answer was lost (a small `make chaos`, without the Spark audit)."""

from __future__ import annotations

from pathlib import Path

from bench import chaos

MESSAGES = 300
NOBODY = "no injected fault touched it"


def test_a_small_chaos_run_loses_nothing(tmp_path: Path) -> None:
    result = chaos.run(MESSAGES, producers=2, consumers=2, data_dir=tmp_path / "data",
                       rate=0.05, seed=11, visibility_s=4, timeout_s=120)
    print("\n" + "\n".join(chaos.report(result)))
    # GIVEN faults really happened
    assert sum(result.faults.values()) > 0
    # THEN every message was acknowledged (clients retry) and none is lost
    assert result.acked == MESSAGES and result.tally.given_up == 0
    assert result.lost == []
    # AND a second copy of a send only follows a send whose write landed unanswered
    assert all(cause.endswith("timeout-after-write") for cause in result.send_copies), \
        result.send_copies
    assert result.duplicates == sum(result.tally.deliveries.values()) - MESSAGES
    assert not result.notes
