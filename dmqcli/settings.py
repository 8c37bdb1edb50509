"""What `dmq` reads from its environment, read once when a command starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = ".dmq"  # the local server's data folder, relative to where it was started


@dataclass(frozen=True)
class CliSettings:
    """DMQ_ENDPOINT, and the data folder where a running local server records itself."""

    endpoint: str | None
    data_dir: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> CliSettings:
        """The settings of this environment (`os.environ` unless given)."""
        env = os.environ if env is None else env
        data_dir = Path(env.get("DMQ_DATA_DIR") or DATA_DIR).expanduser()
        if not data_dir.is_absolute():
            data_dir = (cwd or Path.cwd()) / data_dir
        return cls(endpoint=env.get("DMQ_ENDPOINT") or None, data_dir=data_dir)
