"""`python -m dmqlocal`: what `make run` starts.

SIGINT and SIGTERM are taken before anything heavy is imported (`stop_requests.py`: the
handlers only count), so a signal at any moment is a stop request, never a traceback.
"""

from __future__ import annotations

from dmqlocal.stop_requests import StopRequests


def main(argv: list[str] | None = None) -> int:
    """Run DMQ locally until Ctrl-C or SIGTERM (see dmqlocal/startup.py)."""
    requests = StopRequests()
    requests.install()
    from dmqlocal.startup import run  # heavy imports, after the handlers

    return run(argv, requests)


if __name__ == "__main__":
    raise SystemExit(main())
