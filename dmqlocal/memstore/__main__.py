"""`python -m dmqlocal.memstore [--port N]`: the in-memory store in a process of its own.

It prints `listening on <port>` once it answers, and stops promptly on SIGTERM, SIGINT
or SIGHUP, or when its standard input closes (`--until-stdin-closes`: its parent is
gone)."""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Sequence
from types import FrameType

from dmqlocal.memstore.engine import Engine
from dmqlocal.memstore.server import StoreServer


def _watch_stdin(stop: threading.Event) -> None:
    # The file descriptor, not sys.stdin: a daemon thread blocked in a buffered read holds
    # its lock, and the interpreter's exit then aborts.
    while os.read(0, 4096):
        pass
    stop.set()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until told to stop."""
    parser = argparse.ArgumentParser(prog="python -m dmqlocal.memstore")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--until-stdin-closes", action="store_true")
    args = parser.parse_args(argv)
    engine = Engine()
    server = StoreServer(engine, args.host, args.port)

    def stop(signum: int, frame: FrameType | None) -> None:
        server.stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    threading.Thread(target=engine.sweep_until, args=(server.stop,), daemon=True,
                     name="memstore-ttl").start()
    if args.until_stdin_closes:
        threading.Thread(target=_watch_stdin, args=(server.stop,), daemon=True,
                         name="memstore-parent").start()
    print(f"listening on {server.port}", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
