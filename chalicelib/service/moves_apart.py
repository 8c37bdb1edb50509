"""Redrive moves that cannot be one transaction: a cluster in a store of its own.

A move task's step moves messages in transactions that delete each from the dead-letter
queue, put its copy into its target and count it on the task (`backend.dynamo_moves`).
A transaction belongs to one store, and a cluster with an endpoint of its own
(DMQ_CLUSTER_ENDPOINTS) is another store than the control table and the other clusters.
When the source shard or a target is on such a cluster, each message is claimed, written
to its target, then deleted under the claim, as a dead-letter move across clusters is,
and the chunk is counted on the task afterwards. So: a failure between the write and the
delete leaves the message in the source as well, to be moved again once its claim runs
out (at least once, never lost); a crash before the count leaves the task's count short;
a cancel is seen at the count, so at most one chunk moves after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from chalicelib.backend.dynamo_moves import Move, MoveOutcome
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.messages import Candidate, MessageRef, new_claim_token

CLAIM_MS = 30_000  # how long a claimed message stays hidden if its move fails midway


class ApartMoves:
    """Moves one shard's messages one by one when no transaction can hold them."""

    def __init__(self, stores: ClusterStores) -> None:
        self._stores = stores
        self._clusters = {store.table: cluster for cluster, store in stores.items()}

    def needed(self, cluster: str, moves: Sequence[Move]) -> bool:
        """Whether moves out of a shard of `cluster` touch a cluster in a store of its own."""
        return self._stores.apart(cluster) or any(
            self._stores.apart(self._clusters.get(m.target_table, "")) for m in moves)

    def move(self, cluster: str, queue_id: str, shard: int,
             candidates: Mapping[str, Candidate], moves: Sequence[Move],
             count: Callable[[int], bool], now_ms: int) -> MoveOutcome:
        """Claim, write and delete each message; then `count(n)` the moved ones on the
        task (False: the task stopped)."""
        source = self._stores.of(cluster)
        moved = 0
        for move in moves:
            candidate = candidates.get(move.seen.message_id)
            if candidate is None:
                continue
            token = new_claim_token()
            if source.claim(queue_id, shard, candidate, now_ms + CLAIM_MS, token,
                            now_ms) is None:
                continue  # a receiver took it first
            target = self._stores.of(self._clusters[move.target_table])
            if target.put_messages(move.target_queue_id, [(move.target_shard, move.message)]):
                continue  # not written: it shows in the source again when the claim ends
            source.delete_claimed([MessageRef(queue_id, shard, move.seen.message_id, token)])
            moved += 1
        if moved and not count(moved):
            return MoveOutcome(moved, stopped=True)
        return MoveOutcome(moved)
