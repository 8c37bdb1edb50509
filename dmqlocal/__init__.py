"""The local runtime: one process with the HTTP server, the store, the pump and the scheduler.

Nothing here is imported on Lambda; it wraps the same app and handlers.
"""
