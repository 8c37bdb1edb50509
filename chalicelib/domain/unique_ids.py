"""Identifiers that must be unique, not secret: a request's id, the random part of a
message id, the names of a call's offloaded bodies.

They come from the process's pseudo-random generator (seeded from the operating system,
and seeded again in a forked child), not from `os.urandom`: each urandom call is a system
call that lets go of the interpreter's lock, and on a busy server taking the lock back can
cost a request milliseconds, several times per request. What must not be guessed (claim
tokens in receipt handles, keys, nonces) still comes from `os.urandom` or `secrets`.
"""

from __future__ import annotations

import random
import uuid


def random_uuid() -> str:
    """A version 4 UUID, as text."""
    return str(uuid.UUID(int=random.getrandbits(128), version=4))


def random_bytes(count: int) -> bytes:
    """`count` random bytes."""
    return random.randbytes(count)
