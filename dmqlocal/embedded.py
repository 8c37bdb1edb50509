"""The embedded store: moto's DynamoDB, Streams and S3, in process."""

from __future__ import annotations

import os
from typing import Any

from dmqlocal import moto_patches

LOCAL_ENV = {
    "AWS_ACCESS_KEY_ID": "dmq-local",
    "AWS_SECRET_ACCESS_KEY": "dmq-local",
    "AWS_SESSION_TOKEN": "dmq-local",
    # In-process moto: without this the Streams client targets an account-scoped host.
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}


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

        moto_patches.apply_all()
        self._mock = mock_aws()
        self._mock.start()

    def stop(self) -> None:
        """Stop moto; its data is dropped."""
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
