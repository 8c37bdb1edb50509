"""What the handlers share, built once per container (a Lambda function's, or the local
server's process): the runtime, the object graph of chalicelib/runtime.py."""

from __future__ import annotations

from chalicelib.runtime import Runtime

# The module every Lambda function of the deployment enters by. Chalice names a
# blueprint's stream or schedule handler `<the blueprint's import name>.<function>`; the
# event blueprints take this name, and app.py holds each of their handlers, so that
# every function imports app.py first, as the API's does: the app, its logs and metrics,
# and every module app.py imports (push targets among them) are set up alike everywhere.
ENTRY_MODULE = "app"

runtime = Runtime()
