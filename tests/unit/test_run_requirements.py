"""Every command the README runs from `.venv/bin/` is installed by `make run`, which
installs requirements-run.txt (and the project) only: a tool that only the tests'
requirements bring works in a developer's venv and fails on a newcomer's fresh clone
(the README's AWS CLI lines did)."""

from __future__ import annotations

import importlib.metadata as metadata
import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "dmq"  # pyproject.toml's name: `make run` installs it too (`pip install -e .`)


def _named(path: Path) -> set[str]:
    """The distributions a requirements file names, following `-r`."""
    names: set[str] = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            names |= _named(path.parent / line[3:].strip())
        elif line:
            names.add(canonicalize_name(Requirement(line).name))
    return names


def _installed_with(names: set[str]) -> set[str]:
    """The distributions those bring, their dependencies included (markers and extras
    aside: a little more than pip may install, never less)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        todo += [canonicalize_name(Requirement(r).name) for r in requires]
    return seen


def _provider(tool: str) -> str | None:
    """The installed distribution that puts `tool` in the venv's bin folder."""
    for dist in metadata.distributions():
        scripts = {e.name for e in dist.entry_points if e.group == "console_scripts"}
        files = {Path(str(f)).name for f in dist.files or () if "bin/" in str(f)}
        if tool in scripts or tool in files:
            return canonicalize_name(dist.metadata["Name"])
    return None


def test_every_readme_command_in_the_venv_is_installed_by_make_run() -> None:
    tools = set(re.findall(r"\.venv/bin/([\w.-]+)", (ROOT / "README.md").read_text()))
    tools -= {"python", "python3", "pip"}  # the venv's own
    run = _installed_with(_named(ROOT / "requirements-run.txt") | {PROJECT})
    assert tools, "the README names no .venv/bin command"
    for tool in sorted(tools):
        provider = _provider(tool)
        assert provider is not None, f".venv/bin/{tool} comes from no installed package"
        assert provider in run, (
            f".venv/bin/{tool} (from {provider}) is not installed by `make run`: "
            "add it to requirements-run.txt")
