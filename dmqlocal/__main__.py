"""`python -m dmqlocal`: what `make run` starts."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from dmqlocal.runner import LocalDmq, LocalOptions


def main(argv: list[str] | None = None) -> int:
    """Run DMQ locally until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description="Run DMQ locally.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9324)
    parser.add_argument("--data-dir", default=os.environ.get("DMQ_DATA_DIR") or ".dmq",
                        help="where the audit archive, usage records and table exports go")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("werkzeug", "botocore", "pynamodb"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    import app as dmq_app

    options = LocalOptions(host=args.host, port=args.port, data_dir=args.data_dir)
    local = LocalDmq(dmq_app.app, dmq_app.runtime, options)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        url = local.start()
        store = "embedded store" if local.embedded else "external store"
        print(f"DMQ is listening on {url} ({store}). Ctrl-C stops it.", flush=True)
        stopped.wait()
    except KeyboardInterrupt:
        print("Stopping DMQ: writing the last table export ...", flush=True)
    finally:
        # A second Ctrl-C must not cut the shutdown short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        local.stop()  # also releases what a start cut short had begun
        print("DMQ stopped.", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
