"""The layering of docs/architecture.md is enforced by import-linter's contracts in
pyproject.toml (`make lint` runs them): an import against the rule fails the lint."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from namespace_tree import assemble, real_path  # noqa: E402


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
    """The namespace as installed (``tidemark/jobs`` and ``tidemark/services`` copied from
    the folders pyproject.toml maps), and pyproject.toml, to add an import to."""
    assemble(ROOT, tmp_path, copy=True)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_tree_keeps_its_layers(tree_copy: Path) -> None:
    result = lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("tidemark/services/planner/engine.py", "tidemark.jobs.rollback"),
        ("tidemark/jobs/write/steps.py", "tidemark.services.index.tables"),
        ("tidemark/table/writes/markers.py", "tidemark.clients.marker"),
        ("tidemark/storage/local.py", "tidemark.table.timeline.layout1"),
        ("tidemark/services/marker/engine.py", "tidemark.services.index.tables"),
        ("tidemark/table/timeline/layout1.py", "tidemark.testing.tables"),
        ("tidemark/jobs/write/steps.py", "tidemark.testing.s3local"),
        ("tidemark/table/timeline/layout1.py", "tidemark.table.files.view"),
        ("tidemark/table/metadata/commit.py", "tidemark.table.timeline.instant"),
        ("tidemark/table/plans/clustering.py", "tidemark.table.leases.storage_lease"),
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


def test_reports_of_the_assembled_tree_name_the_real_files(tmp_path: Path) -> None:
    reported = f"{tmp_path}/tidemark/jobs/write/steps.py:3: error\n{tmp_path}/tidemark/spark.py:1"
    expected = "spark_jobs/write/steps.py:3: error\ntidemark/spark.py:1"
    assert real_path(reported, ROOT, tmp_path) == expected
