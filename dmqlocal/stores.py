"""The local store choices: DynamoDB Local (the default), in memory, or an endpoint.

`DMQ_STORE` picks one: `dynamodb-local` keeps its database under the data folder, so
queues and messages survive restarts and crashes; `memory` keeps nothing: DMQ's own
in-memory DynamoDB (`dmqlocal.memstore`) in a process of its own, no Java needed; an
endpoint in `DMQ_DYNAMODB_ENDPOINT` (LocalStack, another DynamoDB Local, AWS) wins over
both.
"""

from __future__ import annotations

import enum
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from chalicelib.settings import Settings
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY, DynamoDBLocal
from dmqlocal.memstore.process import MemoryStoreProcess
from dmqlocal.store_key import store_access_key


def _never() -> bool:
    return False


class StoreKind(enum.Enum):
    """Where the local server keeps its tables."""

    DYNAMODB_LOCAL = "dynamodb-local"
    MEMORY = "memory"
    ENDPOINT = "endpoint"

    @classmethod
    def parse(cls, text: str) -> StoreKind:
        """A store name as DMQ_STORE gives it; ValueError names the choices."""
        for kind in (cls.DYNAMODB_LOCAL, cls.MEMORY):
            if text.strip().lower() == kind.value:
                return kind
        raise ValueError(f"DMQ_STORE={text!r} is not a store: use dynamodb-local (the "
                         "default) or memory, or set DMQ_DYNAMODB_ENDPOINT")


class LocalStore:
    """Starts and stops the chosen store and says how DMQ's settings reach it."""

    def __init__(self, kind: StoreKind, data_dir: Path,
                 on_exit: Callable[[int], None] | None = None,
                 sync_every_write: bool = False, cancelled: Callable[[], bool] = _never) -> None:
        self.kind = kind
        self.sync_every_write = sync_every_write
        self.data_dir = data_dir.expanduser().absolute()
        self._cancelled = cancelled
        self._on_exit = on_exit
        self.memory: MemoryStoreProcess | None = None
        self.dynamodb_local: DynamoDBLocal | None = None
        self._scratch: Path | None = None  # the memory store's large bodies, removed at stop

    @property
    def description(self) -> str:
        """What the ready line says about the store."""
        if self.kind is StoreKind.DYNAMODB_LOCAL:
            return f"DynamoDB Local, data in {self.data_dir / 'dynamodb'}"
        if self.kind is StoreKind.MEMORY:
            return "in-memory store: nothing is kept"
        return "external store"

    def spawn(self) -> None:
        """Start the store's process without waiting for it (it boots while DMQ loads);
        `start` waits. Nothing for an endpoint."""
        if self.kind is StoreKind.MEMORY and self.memory is None:
            self.memory = MemoryStoreProcess(on_exit=self._on_exit, cancelled=self._cancelled)
            self.memory.spawn()
        if self.dynamodb_local is None and self.kind is StoreKind.DYNAMODB_LOCAL:
            self.dynamodb_local = self._new_dynamodb_local()
            self.dynamodb_local.spawn()

    def _new_dynamodb_local(self) -> DynamoDBLocal:
        return DynamoDBLocal(self.data_dir / "dynamodb", on_exit=self._on_exit,
                             sync_every_write=self.sync_every_write, cancelled=self._cancelled)

    def start(self, settings: Settings) -> Settings:
        """Start the store (unless `spawn` began it); return the settings that point DMQ
        at it."""
        if self.kind is StoreKind.MEMORY:
            if self.memory is None:
                self.memory = MemoryStoreProcess(on_exit=self._on_exit,
                                                 cancelled=self._cancelled)
            endpoint = self.memory.start()
            settings = replace(settings, dynamodb_endpoint=endpoint,
                               store_credentials=(ACCESS_KEY, SECRET_KEY))
            if settings.s3_endpoint is None and settings.bodies_dir is None:
                self._scratch = Path(tempfile.mkdtemp(prefix="dmq-memory-bodies-"))
                settings = replace(settings, bodies_dir=str(self._scratch))
            return settings
        if self.kind is StoreKind.DYNAMODB_LOCAL:
            if self.dynamodb_local is None:
                self.dynamodb_local = self._new_dynamodb_local()
            key = store_access_key(self.data_dir, self.data_dir / "dynamodb")
            endpoint = self.dynamodb_local.start()
            settings = replace(settings, dynamodb_endpoint=endpoint,
                               store_credentials=(key, key))
        if settings.s3_endpoint is None and settings.bodies_dir is None:
            # Large bodies stay durable beside the tables, unless an S3 endpoint is given.
            settings = replace(settings, bodies_dir=str(self.data_dir / "bodies"))
        return settings

    def stop(self, at_once: bool = False) -> None:
        """Stop what start started (an external store is left alone); `at_once` kills
        the store's process instead of asking it to stop."""
        if self.memory is not None:
            self.memory.stop(at_once=at_once)
            self.memory = None
        if self.dynamodb_local is not None:
            self.dynamodb_local.stop(at_once=at_once)
            self.dynamodb_local = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
