"""The layers' imports: the API layer knows nothing of the topology that runs it (no
``tradehall.cluster``), and the web pages know nothing of the app that mounts them (no
``tradehall.api``): what they need is handed to them. Read from the sources (``ast``),
type-checking-only imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import tradehall

PACKAGE = Path(tradehall.__file__).parent


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_api_layer_does_not_import_the_topology() -> None:
    for path in sorted((PACKAGE / "api").glob("*.py")):
        found = {name for name in imported(path) if name.startswith("tradehall.cluster")}
        assert not found, f"{path.name} imports {sorted(found)}"


def test_the_pages_do_not_import_the_app_that_mounts_them() -> None:
    found = {n for n in imported(PACKAGE / "web" / "pages.py") if n.startswith("tradehall.api")}
    assert not found, sorted(found)
