"""DMQ on Chalice: the app, with one blueprint per capability (chalicelib/handlers/).

Every Lambda function of the deployment enters by this module: the API's as `app.app`,
each stream or schedule handler's as `app.<its name>` (chalicelib/handlers/container.py).
"""

from __future__ import annotations

from chalice import Chalice

from chalicelib import observability
from chalicelib.handlers import admin_routes, console_routes, schedules, sqs_routes, streams
from chalicelib.handlers.container import runtime
from chalicelib.settings import get_settings

__all__ = ["app", "runtime"]

app = Chalice(app_name="dmq")
# After the app, which sets up the `dmq` logger that structured logs take over.
observability.configure(get_settings().log_format == "json", get_settings().metrics == "emf",
                        get_settings().log_level)

app.register_blueprint(sqs_routes.blueprint)  # SQS: the JSON 1.0 and Query protocols
app.register_blueprint(admin_routes.blueprint)  # the admin API and its credential check
app.register_blueprint(console_routes.blueprint)  # the web console
app.register_blueprint(streams.blueprint)  # DynamoDB stream handlers
app.register_blueprint(schedules.blueprint)  # schedule handlers

# Each stream and schedule handler, under the name its Lambda function runs it by.
globals().update({source.name: app.handler_map[source.name] for source in app.event_sources})
