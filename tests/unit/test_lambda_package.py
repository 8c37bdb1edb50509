"""GIVEN what Chalice packages into every Lambda function (app.py and chalicelib/)
WHEN it is read THEN it imports nothing local-only, and the deployed app has no route
that simulates a region failure."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL_ONLY = ("dmqlocal", "moto", "tests")


def _packaged_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "chalicelib").rglob("*.py"))]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_packaged_code_imports_nothing_local_only() -> None:
    files = _packaged_files()
    assert len(files) > 50  # the walk found the package
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in _imports(path) if name.split(".")[0] in LOCAL_ONLY)
        for path in files
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_lambda_requirements_hold_no_test_or_local_package() -> None:
    names = [line.split("==")[0].strip().lower()
             for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert names and not [n for n in names if n in LOCAL_ONLY or n.startswith("moto")]


def test_the_deployed_app_has_no_region_simulation_route() -> None:
    # A fresh interpreter: the local runner adds its routes to the app it serves.
    script = ("import json, app; print(json.dumps({p: sorted(m) for p, m in "
              "app.app.routes.items()}))")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    routes = json.loads(out.strip().splitlines()[-1])
    assert routes["/admin/regions"] == ["GET"]
    assert not [p for p in routes if p.startswith("/admin/regions/")], routes
    assert not [p for p in routes if "down" in p or "{state}" in p], routes
