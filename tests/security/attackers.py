"""Shared pieces of the attack tests: the required mode's root key and settings with a data
folder (so usage is metered and keys are kept in files)."""

from __future__ import annotations

from pathlib import Path

from chalicelib.settings import Settings

ROOT, ROOT_SECRET = "AKIAROOTROOTROOTROOT", "root-secret-root-secret-root-secret-0000"
ACCOUNT = "000000000000"
# The receipt key DMQ once shipped in its source: an attacker knows it.
PUBLISHED_KEY = "dmq-local-development-key"


def required_settings(data_dir: Path, **changes: object) -> Settings:
    """DMQ_AUTH=required with the root key, a data folder, and any other changes."""
    base = dict(long_poll_interval_ms=50, metadata_cache_seconds=0.0, auth="required",
                root_access_key_id=ROOT, root_secret_access_key=ROOT_SECRET,
                data_dir=str(data_dir))
    return Settings(**{**base, **changes})  # type: ignore[arg-type]


def new_data_dir(tmp_path: Path) -> Path:
    """A data folder for the test's DMQ."""
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    return folder
