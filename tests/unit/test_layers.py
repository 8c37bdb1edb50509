"""The layer rules of docs/architecture.md, checked on the import statements of every module.

handlers (the Chalice blueprints) -> the runtime, frontend, service, backend, domain;
frontend -> service, domain; service -> backend, metadata, domain; backend and metadata ->
domain and the storage boundary; domain -> nothing of chalicelib. Imports inside functions and
under TYPE_CHECKING count like any other.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The layer of each top-level module of chalicelib/ outside the layer packages.
ROOT_MODULES = {
    "chalicelib": "base",
    "chalicelib.clock": "base",
    "chalicelib.settings": "base",
    "chalicelib.aws": "base",
    "chalicelib.regions": "base",
    "chalicelib.observability": "base",
    "chalicelib.secrets": "base",
    "chalicelib.key_files": "base",
    "chalicelib.dynamo_errors": "storage",
    "chalicelib.dynamo_batches": "storage",
    "chalicelib.runtime": "wiring",
    "chalicelib.client_regions": "wiring",
    "chalicelib.settings_regions": "base",
    "chalicelib.settings_guard": "base",
    "chalicelib.settings_clusters": "base",
    "chalicelib.settings_autoscale": "base",
    "chalicelib.settings_checks": "base",
    "chalicelib.settings_limits": "base",
    "chalicelib.settings_security": "base",
    "chalicelib.settings_serving": "base",
    "chalicelib.settings_storage": "base",
    "chalicelib.runtime_types": "wiring",
    "chalicelib.runtime_keys": "wiring",
}
PACKAGES = ("domain", "backend", "metadata", "service", "frontend", "handlers")

# What each layer may import from chalicelib (its own layer always included).
ALLOWED = {
    "domain": set(),
    "base": {"domain"},
    "storage": {"domain"},
    "backend": {"domain", "storage", "base"},
    "metadata": {"domain", "storage", "base"},
    "service": {"backend", "metadata", "domain", "base"},
    "frontend": {"service", "domain", "base"},
    "handlers": {"wiring", "frontend", "service", "backend", "domain", "base"},
}

# Modules that build the object graph, and so import every layer.
EXEMPT_MODULES = {
    "app": "the Chalice app: builds the runtime and routes to the frontend",
    "chalicelib.runtime": "builds the stores, repositories and services of each region",
    "chalicelib.runtime_types": "names the handles of one region (stores, repositories, "
    "clients) that the runtime builds",
    "chalicelib.runtime_keys": "chooses the runtime's key wrapper and secret cipher (KMS "
    "or key files) and builds the identities over them",
    "chalicelib.client_regions": "the runtime's client regions: refuses an opening with "
    "the SQS errors the services raise",
}

# Single imports across the rules, each with its reason.
EXEMPT_EDGES = {
    ("chalicelib.service.failover", "chalicelib.runtime_types"): "reaches another region's "
    "stores and repositories (BackendOf), both layers the service may use",
    ("chalicelib.service.replication", "chalicelib.runtime_types"): "reaches another "
    "region's stores and repositories (BackendOf), both layers the service may use",
    ("chalicelib.frontend.admin_regions", "chalicelib.runtime"): "the admin view of regions "
    "reads every region's health and heartbeats from the runtime",
}

# Outside chalicelib/: never packaged into a Lambda, so chalicelib must not need them.
FORBIDDEN_ROOTS = ("dmqlocal", "dmqcli", "moto", "tests", "infra", "localstack")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    paths = [*sorted((ROOT / "chalicelib").rglob("*.py")), ROOT / "app.py"]
    return {_module_name(p): p for p in paths}


MODULES = _modules()


def _is_module(name: str) -> bool:
    return name in MODULES


def _imports(name: str, path: Path) -> list[str]:
    """Every module this one imports: `from pkg import mod` counts as pkg.mod."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append(full if _is_module(full) else base)
    return found


def layer_of(name: str) -> str:
    """The layer a chalicelib module belongs to."""
    if name in ROOT_MODULES:
        return ROOT_MODULES[name]
    parts = name.split(".")
    if parts[0] == "chalicelib" and len(parts) > 1 and parts[1] in PACKAGES:
        return parts[1]
    if name == "app":
        return "wiring"
    raise AssertionError(f"{name} belongs to no layer: add it to ROOT_MODULES or PACKAGES")


def _violations() -> list[str]:
    out: list[str] = []
    for name, path in MODULES.items():
        source = layer_of(name)
        for target in _imports(name, path):
            root = target.split(".")[0]
            if root in FORBIDDEN_ROOTS:
                out.append(f"{name} imports {target}")
                continue
            if source == "domain" and root not in sys.stdlib_module_names and root != "chalicelib":
                out.append(f"{name} (domain) imports {target}: the domain is pure Python")
                continue
            if root != "chalicelib" or name in EXEMPT_MODULES or (name, target) in EXEMPT_EDGES:
                continue
            target_layer = layer_of(target if _is_module(target) else target.rpartition(".")[0])
            if target_layer != source and target_layer not in ALLOWED[source]:
                out.append(f"{name} ({source}) imports {target} ({target_layer})")
    return sorted(set(out))


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        assert layer_of(name)


def test_layers_import_only_what_they_may() -> None:
    violations = _violations()
    assert not violations, "\n".join(violations)


def test_exemptions_are_still_needed() -> None:
    for name in EXEMPT_MODULES:
        assert name in MODULES, f"exempt module {name} no longer exists"
    for source, target in EXEMPT_EDGES:
        assert target in _imports(source, MODULES[source]), f"{source} no longer imports {target}"


def test_the_rules_catch_a_backend_importing_the_service() -> None:
    assert "service" not in ALLOWED["backend"]
    assert "backend" not in ALLOWED["frontend"] and "backend" not in ALLOWED["metadata"]
    assert layer_of("chalicelib.backend.receipts") == "backend"
    assert layer_of("chalicelib.service.exceptions") == "service"


def test_the_import_linter_contracts_are_kept() -> None:
    """`make lint`'s layers contract (pyproject.toml), run as `make test` runs everything."""
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout, done.stdout
