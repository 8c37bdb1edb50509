"""Which clients carry guards, and the calls the guards let through untouched: those the
breakers make themselves to share their state, which must never wait on (or be refused
by) the breaker they are about."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

_local = threading.local()


class Watcher(Protocol):
    """What the hooks of one client tell about the calls they guard."""

    def watches(self, table: str) -> bool:
        """True when a call naming `table` goes through a guard."""
        ...


_watchers: weakref.WeakKeyDictionary[Any, Watcher] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@contextmanager
def unguarded() -> Iterator[None]:
    """Store calls made by this thread inside the block pass every guard untouched."""
    before = getattr(_local, "exempt", False)
    _local.exempt = True
    try:
        yield
    finally:
        _local.exempt = before


def exempt() -> bool:
    """True inside `unguarded()` on this thread."""
    return bool(getattr(_local, "exempt", False))


def watcher_of(client: Any) -> Watcher | None:
    """The hooks registered on `client`, if any."""
    with _lock:
        return _watchers.get(client)


def set_watcher(client: Any, watcher: Watcher) -> Watcher:
    """Register the hooks of `client`, unless it has some: the ones it keeps."""
    with _lock:
        return _watchers.setdefault(client, watcher)


def watched(client: Any, table: str) -> bool:
    """True when a call of `client` naming `table` would go through a guard."""
    watcher = watcher_of(client)
    return watcher is not None and watcher.watches(table)
