"""`python -m dmqcli`, the same as the `dmq` console script."""

from __future__ import annotations

import sys

from dmqcli.main import main

sys.exit(main())
