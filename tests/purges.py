"""The background removal of purged and deleted queues' messages, run on demand in
process (the local server runs it every second, AWS once a minute)."""

from __future__ import annotations

from app import app
from dmqlocal.handlers import PURGES_SCHEDULE, schedule_bindings
from dmqlocal.scheduler import scheduled_event


def remove_purged() -> None:
    """Run the app's `remove_purged_messages` schedule once, as EventBridge would."""
    binding = next(b for b in schedule_bindings(app) if b.name == PURGES_SCHEDULE)
    binding.handler(scheduled_event(binding.name), None)
