"""The local server's options, and the checks made before any slow work: the options,
the data folder (created, writable, locked), the port (bound) and the tools the store
needs. Each failure is one paragraph on stderr."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from chalicelib.settings import ConfigurationError, Settings
from dmqlocal.dynamodb_local import DynamoDBLocalError, StartCancelledError
from dmqlocal.instance import DataFolder, DataFolderError
from dmqlocal.preflight import PreflightError, bind_listener, check_tools
from dmqlocal.stop_requests import StopRequests
from dmqlocal.stores import LocalStore, StoreKind
from dmqlocal.tls import TlsConfigurationError


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with defaults from the environment."""
    parser = argparse.ArgumentParser(prog="python -m dmqlocal", description="Run DMQ locally.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9324)
    parser.add_argument("--data-dir", default=os.environ.get("DMQ_DATA_DIR") or ".dmq",
                        help="where the store's database, large bodies, the audit archive, "
                             "usage records, table exports and the log go")
    parser.add_argument("--store", default=os.environ.get("DMQ_STORE") or "dynamodb-local",
                        help="dynamodb-local (default: keeps its data under --data-dir) or "
                             "memory (keeps nothing); DMQ_DYNAMODB_ENDPOINT overrides both")
    parser.add_argument("--sync", choices=("second", "always"),
                        default=os.environ.get("DMQ_DYNAMODB_LOCAL_SYNC") or "second",
                        help="DynamoDB Local's disk syncs: second (default: once a second; a "
                             "crash of either process loses nothing) or always (every write: "
                             "slow; also survives a power cut)")
    parser.add_argument("--log-format", choices=("text", "json"),
                        default=os.environ.get("DMQ_LOG_FORMAT") or "text",
                        help="text (default) or json: one JSON object per log line, with "
                             "the request's id, action, account and queue (DMQ_LOG_FORMAT)")
    parser.add_argument("--tls", action="store_true",
                        default=_on(os.environ.get("DMQ_TLS", "")),
                        help="serve HTTPS with a certificate generated under --data-dir/tls "
                             "(and reused), unless --tls-cert and --tls-key give one")
    parser.add_argument("--tls-cert", default=os.environ.get("DMQ_TLS_CERT") or "",
                        help="the server certificate (PEM, chain after it) to serve HTTPS with")
    parser.add_argument("--tls-key", default=os.environ.get("DMQ_TLS_KEY") or "",
                        help="the private key (PEM) of --tls-cert")
    return parser.parse_args(argv)


def _on(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _check_options(args: argparse.Namespace) -> StoreKind:
    """The options that need no work to check; ValueError says what is wrong."""
    store = StoreKind.parse(args.store)
    if args.sync not in ("second", "always"):
        raise ValueError(f"DMQ_DYNAMODB_LOCAL_SYNC={args.sync!r}: use second or always")
    if args.log_format not in ("text", "json"):
        raise ValueError(f"DMQ_LOG_FORMAT={args.log_format!r}: use text or json")
    Settings.from_env(os.environ)  # every setting, auth and keys included (ConfigurationError)
    return store


def _claim(args: argparse.Namespace, store: StoreKind) -> tuple[DataFolder, socket.socket]:
    """Lock the data folder, bind the port, check the tools: in milliseconds, before any
    slow work, so that a second DMQ never reaches the first one's database."""
    folder = DataFolder(args.data_dir)
    folder.claim()
    try:
        listener = bind_listener(args.host, args.port)
    except PreflightError:
        folder.release()
        raise
    try:
        if store is StoreKind.DYNAMODB_LOCAL and not os.environ.get("DMQ_DYNAMODB_ENDPOINT"):
            check_tools()
    except PreflightError:
        listener.close()
        folder.release()
        raise
    return folder, listener


def run(argv: list[str] | None, requests: StopRequests) -> int:
    """Run DMQ locally until Ctrl-C or SIGTERM: 0 once stopped, 1 if it could not start,
    was forced to stop or its store died, 2 if the options are wrong."""
    args = parse(argv)
    try:
        store = _check_options(args)
    except (ValueError, ConfigurationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # What DMQ and DynamoDB Local create (the database, bodies, keys, checkpoints, logs)
    # is for this user only: files 0600, folders 0700.
    os.umask(0o077)
    try:
        folder, listener = _claim(args, store)
    except (DataFolderError, PreflightError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    # Children (DynamoDB Local) and every later reader get the absolute folder.
    args.data_dir = str(folder.path)
    os.environ["DMQ_DATA_DIR"] = str(folder.path)
    prepared: LocalStore | None = None
    try:
        prepared = _spawn_store(args, store, requests)
        from dmqlocal.lifecycle import Lifecycle  # heavy: DMQ loads while the JVM boots

        return Lifecycle(args, store, folder, listener, requests, prepared).run()
    except TlsConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DynamoDBLocalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except StartCancelledError:
        return 0  # stopped while DynamoDB Local was being installed
    finally:
        if prepared is not None:
            prepared.stop()  # already stopped, unless DMQ failed before it took the store
        listener.close()
        folder.release()


def _spawn_store(args: argparse.Namespace, store: StoreKind,
                 requests: StopRequests) -> LocalStore | None:
    """The store, with DynamoDB Local's process started before DMQ's modules load (about
    half a second of imports), so that its JVM boots meanwhile; None for an endpoint."""
    if store is StoreKind.ENDPOINT or os.environ.get("DMQ_DYNAMODB_ENDPOINT"):
        return None
    prepared = LocalStore(store, Path(args.data_dir), requests.store_exited,
                          args.sync == "always", lambda: requests.requested)
    prepared.spawn()
    return prepared
