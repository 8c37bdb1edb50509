"""GIVEN `make test`'s pytest-xdist options (read from the Makefile)
WHEN two test modules with a module fixture run under them
THEN each module runs whole on one worker, its fixture started once.

pytest 9.2 silently broke `--dist loadgroup` (pytest-xdist still renames node ids, which
pytest no longer reads), and the suite's module fixtures were started on every worker
without a test failing: this one would.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = '''
import os
import pytest

@pytest.fixture(scope="module")
def started():
    with open("started.log", "a") as log:
        log.write("{name} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("n", range(6))
def test_runs(started, n):
    with open("ran.log", "a") as log:
        log.write("{name} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def _xdist_options() -> list[str]:
    """The options `make test` gives pytest before its marker selection."""
    recipe = (ROOT / "Makefile").read_text()
    found = re.search(r"-m pytest -q (-n \d+ .*?) -m \"not quiet\"", recipe)
    assert found, "make test's pytest options not found in the Makefile"
    return shlex.split(found.group(1))


def test_each_module_runs_whole_on_one_worker_its_fixture_started_once(tmp_path: Path) -> None:
    # GIVEN two modules, each with a module fixture and six tests
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.replace("{name}", name))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # WHEN they run under make test's options
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_xdist_options(),
         str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    # THEN each module's fixture started once, and all its tests ran on that worker
    started = (tmp_path / "started.log").read_text().splitlines()
    assert sorted(line.split()[0] for line in started) == ["a", "b"], started
    worker = dict(line.split() for line in started)
    ran = [line.split() for line in (tmp_path / "ran.log").read_text().splitlines()]
    assert len(ran) == 12
    assert all(worker[module] == on for module, on in ran), ran
