"""`python -m dmqlocal`: what `make run` starts."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from chalicelib.settings import ConfigurationError, check_auth
from dmqlocal.dynamodb_local import DynamoDBLocalError
from dmqlocal.runner import LocalDmq, LocalOptions
from dmqlocal.stores import StoreKind
from dmqlocal.tls import (
    TlsConfigurationError,
    TlsFiles,
    given_certificates,
    local_certificates,
    server_context,
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run DMQ locally.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9324)
    parser.add_argument("--data-dir", default=os.environ.get("DMQ_DATA_DIR") or ".dmq",
                        help="where the store's database, large bodies, the audit archive, "
                             "usage records and table exports go")
    parser.add_argument("--store", default=os.environ.get("DMQ_STORE") or "dynamodb-local",
                        help="dynamodb-local (default: keeps its data under --data-dir) or "
                             "memory (keeps nothing); DMQ_DYNAMODB_ENDPOINT overrides both")
    parser.add_argument("--sync", choices=("second", "always"),
                        default=os.environ.get("DMQ_DYNAMODB_LOCAL_SYNC") or "second",
                        help="DynamoDB Local's disk syncs: once a second (default; a crash "
                             "of either process loses nothing) or on every write (slow; "
                             "also survives a power cut)")
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


def _tls_files(args: argparse.Namespace) -> TlsFiles | None:
    """The certificate to serve HTTPS with: a given one, a generated one, or none."""
    if args.tls_cert or args.tls_key:
        return given_certificates(args.tls_cert, args.tls_key)
    return local_certificates(Path(args.data_dir)) if args.tls else None


def _configure_logs(log_format: str) -> None:
    """Plain lines, or JSON objects through the same formatter as on Lambda. DMQ's own
    loggers get theirs when the app is imported (DMQ_LOG_FORMAT, set here)."""
    os.environ["DMQ_LOG_FORMAT"] = log_format
    if log_format == "json":
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(LambdaPowertoolsFormatter(service="dmq"))
        logging.basicConfig(level=logging.INFO, handlers=[handler])
    else:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")


def main(argv: list[str] | None = None) -> int:
    """Run DMQ locally until Ctrl-C or SIGTERM; 1 if it could not start or its store died."""
    args = _parse(argv)
    try:
        store = StoreKind.parse(args.store)
        if args.sync not in ("second", "always"):
            raise ValueError(f"DMQ_DYNAMODB_LOCAL_SYNC={args.sync!r}: use second or always")
        if args.log_format not in ("text", "json"):
            raise ValueError(f"DMQ_LOG_FORMAT={args.log_format!r}: use text or json")
        check_auth(os.environ)
        tls_files = _tls_files(args)
        tls = server_context(tls_files) if tls_files else None
    except (ValueError, ConfigurationError, TlsConfigurationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _configure_logs(args.log_format)
    for noisy in ("werkzeug", "botocore", "pynamodb"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    import app as dmq_app

    stopped = threading.Event()
    store_died: list[int] = []

    def on_store_exit(code: int) -> None:
        store_died.append(code)
        stopped.set()

    options = LocalOptions(host=args.host, port=args.port, data_dir=args.data_dir,
                           store=store, on_store_exit=on_store_exit,
                           sync_every_write=args.sync == "always", tls=tls)
    local = LocalDmq(dmq_app.app, dmq_app.runtime, options)
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    code = 0
    try:
        if tls_files is not None and tls_files.ca is not None:
            print(f"HTTPS with a generated certificate: its CA is {tls_files.ca.resolve()} "
                  "(boto3 verify=, aws --ca-bundle, AWS_CA_BUNDLE or SSL_CERT_FILE).",
                  flush=True)
        url = local.start()
        print(f"DMQ is listening on {url} ({local.store_description}). Ctrl-C stops it.",
              flush=True)
        stopped.wait()
    except KeyboardInterrupt:
        print("Stopping DMQ: writing the last table export (Ctrl-C again skips it) ...",
              flush=True)
    except DynamoDBLocalError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        # A second Ctrl-C skips the last export, but never cuts the rest of the shutdown.
        signal.signal(signal.SIGINT, lambda *_: local.skip_export())
        if store_died:
            tail = local.store.dynamodb_local.output_tail() if (
                local.store and local.store.dynamodb_local) else ""
            print(f"error: DynamoDB Local stopped unexpectedly (exit code {store_died[0]}); "
                  f"DMQ stops too. Its last output:\n{tail}", file=sys.stderr, flush=True)
            code = 1
        local.stop(store_alive=not store_died)  # also releases what a start cut short began
        print("DMQ stopped.", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
