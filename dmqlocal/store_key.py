"""The access key id DMQ signs its DynamoDB Local requests with: secret, per data folder.

DynamoDB Local (without `-sharedDb`) keeps one database per access key id and region and
accepts any credentials. Signing with a constant from the source would let any client
that reaches its port open DMQ's database; signing with a random key id kept 0600 in
the data folder hides DMQ's tables from every other client. A data folder made before
this key existed holds `dmqlocal_<region>.db` files: they are renamed to the new key
id's names once, while the folder is locked and DynamoDB Local is not running.
"""

from __future__ import annotations

import secrets
import string
from pathlib import Path

from dmqlocal.dynamodb_local import ACCESS_KEY
from dmqlocal.key_files import read_or_create_text

KEY_FILE = Path("keys") / "store-access-key"
ALPHABET = string.ascii_letters + string.digits  # DynamoDB Local takes only these
KEY_LENGTH = 32


def store_access_key(data_dir: Path, db_path: Path) -> str:
    """The data folder's store key id, made on first use; older database files adopted."""
    key = read_or_create_text(data_dir / KEY_FILE,
                              "".join(secrets.choice(ALPHABET) for _ in range(KEY_LENGTH)))
    for old in sorted(db_path.glob(f"{ACCESS_KEY}_*.db")) if db_path.is_dir() else []:
        renamed = db_path / f"{key}_{old.name[len(ACCESS_KEY) + 1:]}"
        if not renamed.exists():
            old.rename(renamed)
    return key
