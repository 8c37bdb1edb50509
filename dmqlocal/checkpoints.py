"""Where the stream pump stands in each shard, kept in a folder so a restart resumes there.

One JSON file per (stream, shard) records, for each handler, the sequence number of the
last record handed to it successfully, and whether the shard is finished (closed, read to
its end and handed over). A file is written to a temporary name and renamed over the old
one, so a crash leaves either the old or the new checkpoint, never half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmqlocal.handlers import table_of_stream_arn

logger = logging.getLogger("dmq.pump")


@dataclass
class ShardCheckpoint:
    """The last sequence number handed to each handler, and whether the shard is done."""

    handled: dict[str, str] = field(default_factory=dict)
    finished: bool = False


class Checkpoints:
    """Shard checkpoints in `folder`; in memory only (for this process) when it is None."""

    def __init__(self, folder: Path | str | None) -> None:
        self._folder = Path(folder) if folder is not None else None
        self._memory: dict[tuple[str, str], ShardCheckpoint] = {}
        if self._folder is not None:
            self._folder.mkdir(parents=True, exist_ok=True)

    def load(self, stream_arn: str) -> dict[str, ShardCheckpoint]:
        """The checkpoints of a stream's shards, by shard id; other streams' are ignored."""
        found = {shard: ShardCheckpoint(dict(cp.handled), cp.finished)
                 for (arn, shard), cp in self._memory.items() if arn == stream_arn}
        for data in self._files():
            if data.get("streamArn") == stream_arn:
                found[str(data["shardId"])] = ShardCheckpoint(
                    {str(k): str(v) for k, v in dict(data.get("handled", {})).items()},
                    bool(data.get("finished", False)))
        return found

    def save(self, stream_arn: str, shard_id: str, checkpoint: ShardCheckpoint) -> None:
        """Record a shard's checkpoint (atomically, when kept in a folder)."""
        self._memory[(stream_arn, shard_id)] = ShardCheckpoint(dict(checkpoint.handled),
                                                               checkpoint.finished)
        if self._folder is None:
            return
        path = self._path(stream_arn, shard_id)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps({
            "streamArn": stream_arn, "shardId": shard_id,
            "handled": checkpoint.handled, "finished": checkpoint.finished,
        }))
        os.replace(temporary, path)

    def forget_other_streams(self, stream_arn: str) -> None:
        """Delete the checkpoints of the same table's earlier streams (a recreated table)."""
        table = table_of_stream_arn(stream_arn)
        self._memory = {key: cp for key, cp in self._memory.items()
                        if key[0] == stream_arn or table_of_stream_arn(key[0]) != table}
        if self._folder is None:
            return
        for path in self._folder.glob(f"{table}--*.json"):
            data = _read(path)
            if data is not None and data.get("streamArn") != stream_arn:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _path(self, stream_arn: str, shard_id: str) -> Path:
        assert self._folder is not None
        digest = hashlib.sha256(f"{stream_arn}|{shard_id}".encode()).hexdigest()[:24]
        return self._folder / f"{table_of_stream_arn(stream_arn)}--{digest}.json"

    def _files(self) -> list[dict[str, Any]]:
        if self._folder is None:
            return []
        return [data for path in sorted(self._folder.glob("*.json"))
                if (data := _read(path)) is not None]


def _read(path: Path) -> dict[str, Any] | None:
    """A checkpoint file's content; None (start over: replays are safe) if unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        logger.warning("ignoring the unreadable stream checkpoint %s", path.name)
        return None
    return data if isinstance(data, dict) and "shardId" in data else None
