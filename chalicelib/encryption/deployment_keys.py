"""The deployment's own secrets: the receipt signing key and the console's form-token key.

Each is found in this order, and no key is ever written in the source:

1. the value itself in the environment (`DMQ_RECEIPT_KEY`, `DMQ_CONSOLE_KEY`);
2. an SSM SecureString the environment names (`..._PARAMETER`, what `infra/deploy.py` sets
   on a deployed stage), read once per container;
3. a random key made on first start in the data folder (`keys/receipt.key`,
   `keys/console.key`, mode 0600 in a 0700 folder) and kept across restarts: the local
   runtime's key files make it (`dmqlocal/key_files.py`), handed in as `secret_file`;
4. without a data folder (the in-memory store, `chalice local`), a random key for this
   process, with a warning: what it signed is not valid after a restart.

On Lambda there is no fourth choice: each container would sign with its own key, so the
settings refuse to start without the first or second (`Settings.from_env`).
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import boto3

from chalicelib.settings import ConfigurationError, Settings

logger = logging.getLogger("dmq.secrets")
# Keys of a process without a data folder: one per process (and per name), so that
# rebuilding the runtime (tests, a store that came back) keeps what was signed before.
_PROCESS_KEYS: dict[str, str] = {}
_process_lock = threading.Lock()
# The secret kept in a key file (made at random on first use): only the local runtime
# has one to give.
SecretFile = Callable[[str], str]


def receipt_key(settings: Settings, ssm: Any | None = None,
                secret_file: SecretFile | None = None) -> str:
    """The key that signs receipt handles."""
    return _resolve("receipt", settings.receipt_key, settings.receipt_key_parameter,
                    settings.receipt_key_path, settings, ssm, secret_file)


def console_key(settings: Settings, ssm: Any | None = None,
                secret_file: SecretFile | None = None) -> str:
    """The key of the web console's form tokens (separate from the receipt key)."""
    return _resolve("console", settings.console_key, settings.console_key_parameter,
                    settings.console_key_path, settings, ssm, secret_file)


def _new_secret() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode("ascii").rstrip("=")


def _resolve(name: str, value: str | None, parameter: str | None, path: str | None,
             settings: Settings, ssm: Any | None, secret_file: SecretFile | None) -> str:
    if value:
        return value
    if parameter:
        client = ssm or boto3.client("ssm", region_name=settings.region)
        found = client.get_parameter(Name=parameter, WithDecryption=True)
        return str(found["Parameter"]["Value"])
    if path:
        if secret_file is None:
            raise ConfigurationError(
                f"The {name} key's file under DMQ_DATA_DIR is made by the local server "
                f"(python -m dmqlocal); elsewhere set DMQ_{name.upper()}_KEY or "
                f"DMQ_{name.upper()}_KEY_PARAMETER.")
        return secret_file(path)
    if settings.on_lambda:
        env = name.upper()
        raise ConfigurationError(
            f"DMQ on AWS needs a {name} key: set DMQ_{env}_KEY_PARAMETER to an SSM "
            f"SecureString (python infra/deploy.py --stage STAGE makes one) or DMQ_{env}_KEY.")
    with _process_lock:
        if name not in _PROCESS_KEYS:
            logger.warning("No data folder and no DMQ_%s_KEY: the %s key is made for this "
                           "process only, so what it signs is not valid after a restart.",
                           name.upper(), name)
            _PROCESS_KEYS[name] = _new_secret()
        return _PROCESS_KEYS[name]
