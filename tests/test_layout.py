"""The tree as a newcomer reads it: one path per file (no links under ``tidemark/``), every
package installed, and the table library by concept (packages with a face, no loose
modules)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
TABLE = ROOT / "tidemark" / "table"


def _packages_under(folder: Path, name: str) -> set[str]:
    return {
        ".".join((name, *init.parent.relative_to(folder).parts))
        for init in folder.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_no_link_under_the_package() -> None:
    links = [path for path in (ROOT / "tidemark").rglob("*") if path.is_symlink()]
    assert links == []


def test_pyproject_lists_every_package_in_the_tree() -> None:
    tree = _packages_under(ROOT / "tidemark", "tidemark")
    for name, folder in SETUPTOOLS["package-dir"].items():
        tree |= _packages_under(ROOT / folder, name)
    assert set(SETUPTOOLS["packages"]) == tree


def test_the_table_library_has_no_module_but_its_face() -> None:
    assert sorted(path.name for path in TABLE.glob("*.py")) == ["__init__.py"]


@pytest.mark.parametrize(
    "package", sorted(p.name for p in TABLE.iterdir() if (p / "__init__.py").exists())
)
def test_each_table_package_says_what_it_holds(package: str) -> None:
    face = ast.parse((TABLE / package / "__init__.py").read_text())
    assert ast.get_docstring(face), f"{package}: no docstring"
    (listed,) = [
        ast.literal_eval(node.value)
        for node in face.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__"
    ]
    modules = {path.stem for path in (TABLE / package).glob("*.py")} - {"__init__"}
    assert set(listed) == modules
