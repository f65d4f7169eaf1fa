"""Imports point down: the domain (`cascade_core`) imports the standard library, msgspec and
itself only, never the API's schemas (`cascade_api`), NATS, the read model or any edge; the
API's schemas import the domain and nothing above it. Read from the source, so an import
inside a function or under `TYPE_CHECKING` counts too."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BELOW = {
    "cascade_core": {"msgspec", "cascade_core"},
    "cascade_api": {"msgspec", "cascade_core", "cascade_api"},
}


def imported(path: Path) -> set[str]:
    """The top-level packages a module imports, the standard library's left out."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names.add(node.module)
    return {name.split(".")[0] for name in names} - set(sys.stdlib_module_names)


@pytest.mark.parametrize("package", sorted(BELOW))
def test_a_package_imports_only_what_is_below_it(package: str) -> None:
    above = {
        f"{path.relative_to(ROOT)}: {sorted(imported(path) - BELOW[package])}"
        for path in sorted((ROOT / package).rglob("*.py"))
        if imported(path) - BELOW[package]
    }
    assert not above
