"""GIVEN several processes (threads here) starting at once over a new data folder WHEN
each makes or reads the same key file THEN every one gets the same whole key, none fails
because another made the file first, and the file is private to its owner."""

from __future__ import annotations

import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chalicelib.encryption import wiring
from chalicelib.encryption.deployment_keys import receipt_key
from chalicelib.encryption.keys import LocalKeys
from chalicelib.encryption.secret_cipher import LocalCipher
from chalicelib.settings import ConfigurationError, Settings
from dmqlocal.key_files import KEY_BYTES, read_or_create, read_or_create_bytes
from tests.key_loaders import file_key

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
    path = tmp_path / "secrets.key"
    sealed = _race(lambda: LocalCipher(file_key(path)).encrypt(b"secret", "AKID"))
    assert all(isinstance(s, bytes) for s in sealed), sealed
    opener = LocalCipher(file_key(path))
    assert {opener.decrypt(s, "AKID") for s in sealed} == {b"secret"}


def test_message_key_wrappers_starting_together_share_one_master_key(tmp_path: Path) -> None:
    path = tmp_path / "sse.key"
    wrapped = _race(lambda: LocalKeys(file_key(path)).generate("alias/q"))
    assert not [w for w in wrapped if isinstance(w, Exception)], wrapped
    opener = LocalKeys(file_key(path))
    assert all(opener.unwrap(w.ref, w.wrapped) == w.plaintext for w in wrapped)


def test_outside_the_local_server_a_named_key_file_is_read_never_made(tmp_path: Path) -> None:
    # On Lambda (no local parts) each container would make a key of its own: a key file
    # a setting names must exist, and is only read
    missing = str(tmp_path / "keys" / "sse.key")
    with pytest.raises(ConfigurationError, match="DMQ_SSE_KEY_FILE"):
        wiring.key_wrapper(Settings(sse_keys="local", sse_key_file=missing), None) \
            .generate("alias/q")
    assert not Path(missing).exists()
    shared = tmp_path / "shared.key"
    shared.write_bytes(bytes(range(KEY_BYTES)))
    wrapped = wiring.key_wrapper(Settings(sse_keys="local", sse_key_file=str(shared)), None) \
        .generate("alias/q")
    opener = LocalKeys(file_key(shared))
    assert opener.unwrap(wrapped.ref, wrapped.wrapped) == wrapped.plaintext


def test_outside_the_local_server_a_data_folder_key_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="DMQ_RECEIPT_KEY_PARAMETER"):
        receipt_key(Settings(data_dir=str(tmp_path)))
    assert not (tmp_path / "keys").exists()
