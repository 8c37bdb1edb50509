"""The layers of docs/architecture.md: import-linter's contracts (pyproject.toml, run by
`make lint`) kept, with what those contracts cannot say checked here:

- every module of `chalicelib/` sits in exactly one layer, so no new module escapes them;
- a capability package's `__init__` imports nothing (its docstring names its rooms);
- the domain imports only the standard library;
- the contracts fail on a module that imports upwards.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LAYERS = next(c for c in CONTRACTS["contracts"] if c["id"] == "layers")["layers"]
CAPABILITIES = ("push", "encryption", "fifo", "clusters", "regions", "usage")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted((ROOT / "chalicelib").rglob("*.py"))}


def _layer_members(layer: str) -> list[str]:
    return [m.strip() for m in layer.replace("|", ":").split(":")]


def layers_of(name: str) -> list[int]:
    """The index of each layer whose listed modules contain `name`."""
    return [i for i, layer in enumerate(LAYERS)
            if any(name == m or name.startswith(m + ".") for m in _layer_members(layer))]


def _imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append(node.module or "")
    return found


def _run_contracts(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def test_every_module_is_in_exactly_one_layer() -> None:
    packages = {"chalicelib", *(f"chalicelib.{c}" for c in CAPABILITIES)}
    for name in MODULES:
        if name in packages:
            continue
        assert len(layers_of(name)) == 1, f"{name} is in layers {layers_of(name)} of " \
            "pyproject.toml's layers contract: give it exactly one"


def test_every_listed_module_exists() -> None:
    for layer in LAYERS:
        for member in _layer_members(layer):
            assert member in MODULES, f"the layers contract names {member}, which is gone"


def test_capability_packages_import_nothing_and_say_what_they_own() -> None:
    for capability in CAPABILITIES:
        init = ROOT / "chalicelib" / capability / "__init__.py"
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init.name} of {capability} says what it owns"
        assert not _imports(init), f"chalicelib.{capability} imports nothing at package level"


def test_the_domain_is_pure_python() -> None:
    domain = LAYERS[-1]
    for name, path in MODULES.items():
        if layers_of(name) != [len(LAYERS) - 1]:
            continue
        for target in _imports(path):
            root = target.split(".")[0]
            assert root in sys.stdlib_module_names or any(
                target == m or target.startswith(m + ".") for m in _layer_members(domain)), \
                f"{name} (domain) imports {target}: the domain is pure Python"


def test_the_import_linter_contracts_are_kept() -> None:
    """`make lint`'s contracts, run as `make test` runs everything."""
    done = _run_contracts(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(CONTRACTS['contracts'])} kept, 0 broken" in done.stdout, done.stdout


def test_the_contracts_catch_a_store_that_imports_the_service(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "chalicelib", tmp_path / "chalicelib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    upward = tmp_path / "chalicelib" / "fifo" / "dynamo_base.py"
    upward.write_text(upward.read_text() + "\nfrom chalicelib.fifo import service  # noqa\n")
    done = _run_contracts(tmp_path)
    assert done.returncode != 0
    assert "chalicelib.fifo.dynamo_base -> chalicelib.fifo.service" in done.stdout, done.stdout
