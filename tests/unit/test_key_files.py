"""GIVEN several processes (threads here) starting at once over a new data folder WHEN
each makes or reads the same key file THEN every one gets the same whole key, none fails
because another made the file first, and the file is private to its owner."""

from __future__ import annotations

import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chalicelib.backend.keys import LocalKeys
from chalicelib.key_files import KEY_BYTES, read_or_create, read_or_create_bytes
from chalicelib.metadata.secret_cipher import LocalCipher

RACERS = 16


def _race(make: Callable[[], Any]) -> list[Any]:
    """`make()` in RACERS threads released together; their results (or their errors)."""
    start = threading.Barrier(RACERS)
    results: list[Any] = [None] * RACERS

    def run(index: int) -> None:
        start.wait(timeout=10)
        try:
            results[index] = make()
        except Exception as exc:  # noqa: BLE001 - the test reports any error
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_racing_makers_of_a_raw_key_all_read_the_same_whole_key(tmp_path: Path) -> None:
    path = tmp_path / "data" / "master.key"
    keys = _race(lambda: read_or_create_bytes(path))
    assert all(isinstance(k, bytes) and len(k) == KEY_BYTES for k in keys), keys
    assert len(set(keys)) == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["master.key"]  # no temporary left


def test_racing_makers_of_a_text_secret_all_read_the_same_secret(tmp_path: Path) -> None:
    secrets = _race(lambda: read_or_create(tmp_path / "receipt.key"))
    assert all(isinstance(s, str) and len(s) >= KEY_BYTES for s in secrets), secrets
    assert len(set(secrets)) == 1


def test_access_key_ciphers_starting_together_share_one_key_file(tmp_path: Path) -> None:
    # The access-key cipher once made its file in place: a second process starting at the
    # same moment failed (the file existed) or read it empty
    path = str(tmp_path / "secrets.key")
    sealed = _race(lambda: LocalCipher(path).encrypt(b"secret", "AKID"))
    assert all(isinstance(s, bytes) for s in sealed), sealed
    opener = LocalCipher(path)
    assert {opener.decrypt(s, "AKID") for s in sealed} == {b"secret"}


def test_message_key_wrappers_starting_together_share_one_master_key(tmp_path: Path) -> None:
    path = tmp_path / "sse.key"
    wrapped = _race(lambda: LocalKeys(path).generate("alias/q"))
    assert not [w for w in wrapped if isinstance(w, Exception)], wrapped
    opener = LocalKeys(path)
    assert all(opener.unwrap(w.ref, w.wrapped) == w.plaintext for w in wrapped)
