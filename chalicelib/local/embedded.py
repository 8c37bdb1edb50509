"""The embedded store: moto's DynamoDB, Streams and S3, in process."""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

_LOCK = threading.RLock()
_PATCHED = False

LOCAL_ENV = {
    "AWS_ACCESS_KEY_ID": "dmq-local",
    "AWS_SECRET_ACCESS_KEY": "dmq-local",
    "AWS_SESSION_TOKEN": "dmq-local",
    # In-process moto: without this the Streams client targets an account-scoped host.
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}


def _serialise_moto() -> None:
    """Run one moto request at a time.

    moto's backends are not written for concurrent requests: a conditional write
    is a read then a write, and two threads could both pass the check. Real
    DynamoDB applies conditions atomically, so the embedded store must as well.
    """
    global _PATCHED
    if _PATCHED:
        return
    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.process_request

    @functools.wraps(original)
    def locked(self: Any, request: Any) -> Any:
        with _LOCK:
            return original(self, request)

    BotocoreStubber.process_request = locked  # type: ignore[method-assign]
    _PATCHED = True


class EmbeddedAws:
    """Starts and stops in-process moto for the local server and the tests."""

    def __init__(self) -> None:
        self._mock: Any = None

    def start(self) -> None:
        """Patch botocore so that every client in this process talks to moto."""
        for key, value in LOCAL_ENV.items():
            os.environ.setdefault(key, value)
        os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"
        from moto import mock_aws

        _serialise_moto()
        self._mock = mock_aws()
        self._mock.start()

    def stop(self) -> None:
        """Stop moto; its data is dropped."""
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
