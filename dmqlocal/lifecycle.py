"""Start, serve and stop the local server, with the main thread in charge.

The main thread starts DMQ (polling the stop requests while it does), then sleeps on the
stop requests' pipe while serving. The stop runs in a thread of its own while the main
thread keeps listening: a second signal makes the stop skip its slow parts (the export
flush, a polite wait for DynamoDB Local), and a third signal, or a stop that outlives its
budget, kills DynamoDB Local and ends the process at once. What DynamoDB Local
acknowledged is in its files either way.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import ssl
import sys
import threading
import time
from pathlib import Path

from dmqlocal import console_logs
from dmqlocal.dynamodb_local import DynamoDBLocalError, StartCancelledError
from dmqlocal.heap import settle_heap
from dmqlocal.instance import DataFolder
from dmqlocal.runner import LocalDmq, LocalOptions
from dmqlocal.stop_requests import StopRequests
from dmqlocal.stores import LocalStore, StoreKind
from dmqlocal.tls import TlsFiles, given_certificates, local_certificates, server_context

logger = logging.getLogger("dmq.local")
READY = "DMQ is listening on"
STOPPED = "DMQ stopped."
HURRY_GRACE_S = 3.0  # after a second signal, how long the stop may still take
STOP_BUDGET_S = 30.0  # a stop that takes longer than this is forced
POLL_S = 0.1


def _say(text: str, error: bool = False) -> None:
    print(f"error: {text}" if error else text, file=sys.stderr if error else sys.stdout,
          flush=True)


class Lifecycle:
    """One run of the local server, from its options to its exit status."""

    def __init__(self, args: argparse.Namespace, store: StoreKind, folder: DataFolder,
                 listener: socket.socket, requests: StopRequests,
                 prepared: LocalStore | None = None) -> None:
        self._args = args
        self._prepared = prepared  # the store, spawned already (startup.py)
        self._store = store
        self._folder = folder
        self._listener = listener
        self._requests = requests
        self._log_file: Path | None = None

    def run(self) -> int:
        """Start, serve until asked to stop, stop; the exit status."""
        os.environ["DMQ_LOG_FORMAT"] = self._args.log_format
        self._log_file = console_logs.configure(self._args.log_format, self._folder.path,
                                                os.environ.get("DMQ_LOG_LEVEL", "INFO"))
        tls_files = self._tls_files()
        tls = server_context(tls_files) if tls_files else None
        local = self._local(tls)
        if local is None:
            return 1
        code = self._start_and_serve(local, tls_files)
        return max(code, self._stop(local))

    def _tls_files(self) -> TlsFiles | None:
        """The certificate to serve HTTPS with: a given one, a generated one, or none."""
        if self._args.tls_cert or self._args.tls_key:
            return given_certificates(self._args.tls_cert, self._args.tls_key)
        return local_certificates(self._folder.path) if self._args.tls else None

    def _local(self, tls: ssl.SSLContext | None) -> LocalDmq | None:
        """The app (imported now: DMQ_* settings are final) wrapped for local serving."""
        try:
            import app as dmq_app
        except Exception as exc:  # one paragraph; the traceback goes to the log
            logger.error("DMQ's app could not be loaded", exc_info=True)
            _say(f"DMQ could not load its app ({type(exc).__name__}: {exc}). "
                 f"{self._see_log()}", error=True)
            return None
        if self._args.log_format == "text":
            console_logs.adopt(dmq_app.app.log.name)
        options = LocalOptions(
            host=self._args.host, port=self._args.port, data_dir=self._args.data_dir,
            store=self._store, on_store_exit=self._requests.store_exited,
            sync_every_write=self._args.sync == "always", tls=tls,
            listener=self._listener, cancelled=lambda: self._requests.requested,
            prepared_store=self._prepared)
        return LocalDmq(dmq_app.app, dmq_app.runtime, options)

    def _see_log(self) -> str:
        return f"Its traceback is in {self._log_file}." if self._log_file else ""

    def _start_and_serve(self, local: LocalDmq, tls_files: TlsFiles | None) -> int:
        """Start (a stop request cuts it short), announce, serve until a stop request."""
        try:
            url = local.start()
        except StartCancelledError:
            return 0
        except DynamoDBLocalError as exc:
            _say(str(exc), error=True)
            return 1
        except Exception as exc:  # one paragraph; the traceback goes to the log
            if self._requests.store_exit is not None:
                return 1  # the stop says why
            if self._requests.signals:
                return 0  # stopped while starting: what failed was cut short
            logger.error("DMQ could not start", exc_info=True)
            _say(f"DMQ could not start ({type(exc).__name__}: {exc}). {self._see_log()}",
                 error=True)
            return 1
        ca = tls_files.ca.absolute() if tls_files is not None and tls_files.ca else None
        if ca is not None:
            _say(f"HTTPS with a generated certificate: its CA is {ca} (boto3 verify=, aws "
                 "--ca-bundle, AWS_CA_BUNDLE or SSL_CERT_FILE).")
        self._folder.announce(url, local.auth_mode, ca)
        _say(f"{READY} {url} ({local.store_description}). Ctrl-C stops it.")
        settle_heap()  # a full collection: after the ready line, not before it
        while not self._requests.requested:
            self._requests.wait(1.0)
        return 0

    def _stop(self, local: LocalDmq) -> int:
        """Stop in a thread while the main thread listens for more signals."""
        store_exit = self._requests.store_exit
        if store_exit is not None:
            self._store_died(local, store_exit)
        else:
            _say("Stopping DMQ (Ctrl-C again stops at once) ...")
        seen = self._requests.signals
        stopper = threading.Thread(target=local.stop, kwargs={"store_alive": store_exit is None},
                                   name="dmq-stop", daemon=True)
        stopper.start()
        started, hurried = time.monotonic(), 0.0
        while stopper.is_alive():
            self._requests.wait(POLL_S)
            extra, now = self._requests.signals - seen, time.monotonic()
            if extra >= 1 and not hurried:
                hurried = now
                local.hurry()
            if extra >= 2 or (hurried and now - hurried > HURRY_GRACE_S) \
                    or now - started > STOP_BUDGET_S:
                self._force(local)
        if store_exit is None and self._requests.store_exit is not None:
            self._store_died(local, self._requests.store_exit)
        _say(STOPPED)
        return 0 if self._requests.store_exit is None else 1

    def _store_died(self, local: LocalDmq, code: int) -> None:
        if local.store_kind is StoreKind.MEMORY:
            _say(f"The in-memory store stopped unexpectedly (exit code {code}), so DMQ stops "
                 "too. What it held is gone (it keeps nothing): start DMQ again with "
                 "DMQ_STORE=memory make run.", error=True)
            return
        _say(f"DynamoDB Local stopped unexpectedly (exit code {code}), so DMQ stops too. "
             f"{local.store_report()} What it acknowledged is kept: start DMQ again with "
             "make run.", error=True)

    def _force(self, local: LocalDmq) -> None:
        """End the process now: DynamoDB Local killed, the data folder released."""
        local.kill_store()
        self._folder.release()
        _say("DMQ stopped at once (the last export flush and a clean store shutdown were "
             f"skipped; acknowledged messages are kept). {STOPPED}")
        os._exit(1)
