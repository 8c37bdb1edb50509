"""The former admin CLI, kept as an alias: `python -m dmqlocal.admin ARGS` is `dmq ARGS`
(see dmqcli and docs/cli.md)."""

from __future__ import annotations

import sys

from dmqcli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
