"""The layering of docs/architecture.md is enforced by import-linter's contracts in
pyproject.toml (`make lint` runs them): an import against the rule fails the lint."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tidemark", "services", "spark_jobs")
"""The real folders; tidemark/services and tidemark/jobs link to the last two."""


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The packages' sources and pyproject.toml, to add an import to."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            tmp_path / package,
            symlinks=True,
            ignore=shutil.ignore_patterns("*.pyc"),
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_tree_keeps_its_layers(tree_copy: Path) -> None:
    result = lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("services/planner/engine.py", "tidemark.jobs.rollback"),
        ("spark_jobs/write.py", "tidemark.services.index.tables"),
        ("tidemark/table/markers.py", "tidemark.clients.marker"),
        ("tidemark/storage/local.py", "tidemark.table.timeline"),
        ("services/marker/engine.py", "tidemark.services.index.tables"),
        ("tidemark/table/timeline.py", "tidemark.testing.tables"),
        ("spark_jobs/write.py", "tidemark.testing.s3local"),
    ],
)
def test_an_import_against_the_rule_fails_the_lint(
    tree_copy: Path, module: str, forbidden: str
) -> None:
    path = tree_copy / module
    path.write_text(path.read_text() + f"\nimport {forbidden}  # noqa\n")
    result = lint_imports(tree_copy)
    assert result.returncode != 0
    assert forbidden in result.stdout


def test_a_new_package_must_be_placed_in_a_layer(tree_copy: Path) -> None:
    (tree_copy / "tidemark" / "newcomer").mkdir()
    (tree_copy / "tidemark" / "newcomer" / "__init__.py").write_text("")
    result = lint_imports(tree_copy)
    assert result.returncode != 0
    assert "tidemark.newcomer" in result.stdout
