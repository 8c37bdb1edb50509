"""Where the local server's log lines go.

The terminal gets one line per record: an exception is summed up on the record's own
line (its type and message), never as a traceback. The full record, tracebacks
included, goes to `<data folder>/logs/dmq.log` (rotated), and to the terminal too with
`DMQ_LOG_LEVEL=debug`. With `--log-format json` every record is one JSON object on
stdout, through the same formatter as on Lambda.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

LOG_FILE = Path("logs") / "dmq.log"
LOG_FILE_BYTES = 10 * 1024 * 1024
LOG_FILE_BACKUPS = 3
TEXT_FORMAT = "%(asctime)s %(name)s %(message)s"
QUIET_LOGGERS = ("werkzeug", "botocore", "pynamodb", "urllib3")


class OneLineFormatter(logging.Formatter):
    """A record on one line: an exception becomes `(Type: message; see <log file>)`."""

    def __init__(self, log_file: Path | None) -> None:
        super().__init__(TEXT_FORMAT)
        self._where = f"; the traceback is in {log_file}" if log_file else ""

    def format(self, record: logging.LogRecord) -> str:
        """The record without its traceback."""
        if not record.exc_info:
            return super().format(record)
        exc = record.exc_info[1]
        summary = f"{type(exc).__name__}: {exc}" if exc is not None else "error"
        plain = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None,
                                       "stack_info": None})
        return f"{super().format(plain)} ({summary.splitlines()[0][:300]}{self._where})"


def configure(log_format: str, data_dir: Path | None, level: str = "INFO") -> Path | None:
    """Set up the root logger; return the log file's path (None when there is none)."""
    debug = level.strip().upper() == "DEBUG"
    root = logging.getLogger()
    root.handlers.clear()
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    console = logging.StreamHandler(sys.stdout if log_format == "json" else sys.stderr)
    log_file = _file_handler(root, data_dir)
    if log_format == "json":
        console.setFormatter(LambdaPowertoolsFormatter(service="dmq"))
    elif debug:
        console.setFormatter(logging.Formatter(TEXT_FORMAT))
    else:
        console.setFormatter(OneLineFormatter(log_file))
    root.addHandler(console)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return log_file


def _file_handler(root: logging.Logger, data_dir: Path | None) -> Path | None:
    """The rotated log file under the data folder, with tracebacks (None without one)."""
    if data_dir is None:
        return None
    path = data_dir / LOG_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    return path


def adopt(name: str) -> None:
    """Send a logger that has its own plain handler (Chalice gives the app's logger one,
    on stdout, with tracebacks) through the root's handlers instead. Its level stays."""
    owned = logging.getLogger(name)
    for handler in list(owned.handlers):
        owned.removeHandler(handler)
    owned.propagate = True
