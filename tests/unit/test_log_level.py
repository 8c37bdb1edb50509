"""DMQ's own loggers (`dmq`, `dmq.*`) log at DMQ_LOG_LEVEL. Chalice sets the app's logger,
named after the app, to ERROR unless the app is in debug mode: without this every
warning of theirs (a trimmed stream, a store error) was dropped."""

from __future__ import annotations

import logging

import app  # noqa: F401  (Chalice sets up the `dmq` logger when the app is made)
from chalicelib import observability


def test_a_level_is_read_by_name_in_any_case_and_an_unknown_one_is_info() -> None:
    assert observability.log_level("debug") == logging.DEBUG
    assert observability.log_level(" WARNING ") == logging.WARNING
    assert observability.log_level("loud") == logging.INFO
    assert observability.log_level("") == logging.INFO


def test_dmqs_loggers_log_at_the_configured_level_not_chalices_error() -> None:
    pump = logging.getLogger("dmq.pump")
    assert pump.isEnabledFor(logging.INFO)  # as the app configured itself: INFO
    try:
        observability.configure(json_logs=False, emit_metrics=False, level="WARNING")
        assert pump.isEnabledFor(logging.WARNING)
        assert not pump.isEnabledFor(logging.INFO)
        observability.configure(json_logs=False, emit_metrics=False, level="DEBUG")
        assert logging.getLogger("dmq.purges").isEnabledFor(logging.DEBUG)
    finally:
        observability.configure(json_logs=False, emit_metrics=False)
    assert pump.isEnabledFor(logging.INFO)
