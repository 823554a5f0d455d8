"""The table is opened where a request enters and handed down: below the Python API, the
CLI commands and the services' request handling, code takes an opened ``HoodieTable`` (or
its storage), never a URI it opens or canonicalises itself.

Every reference to ``HoodieTable.open``, ``open_storage`` or ``canonical_uri`` in the
layers below is listed in ``ENTRIES`` with why that place opens a table; a new one fails
here until it takes the table from its caller (or joins the list with a reason)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BELOW_THE_FACADE = (
    "tidemark/table",
    "tidemark/index",
    "tidemark/clustering",
    "tidemark/retention.py",
    "spark_jobs",
    "services",
)
"""What the API (``tidemark/spark.py``), the commands (``tidemark/commands/``) and the
request validation (``tidemark/rpc/requests.py``) hand opened tables to."""

OPENERS = frozenset({"HoodieTable.open", "open_storage", "canonical_uri"})

ENTRIES: dict[tuple[str, str], str] = {
    ("tidemark/table/__init__.py", "_open_table_storage"): "HoodieTable.open itself",
    ("spark_jobs/task.py", "storage_for"): "executors reopen a storage pickled by its URI",
    ("spark_jobs/datasource.py", "TidemarkDataSource._path"): "spark.read.format(...).load(path)",
    ("spark_jobs/datasource.py", "TidemarkDataSource.schema"): "the data source's own entry",
    ("spark_jobs/datasource.py", "SnapshotReader.partitions"): "planned in a Python worker",
    ("spark_jobs/rollback.py", "main"): "spark-submit's command line",
    ("spark_jobs/cluster.py", "run"): "spark-submit's command line, parsed",
    ("spark_jobs/compaction.py", "run"): "spark-submit's command line, parsed",
    ("spark_jobs/write/steps.py", "write"): "a write may create its table (the write API's entry)",
    ("spark_jobs/write/prepare.py", "prepare"): "a table the write creates: no HoodieTable yet",
    ("spark_jobs/write/prepare.py", "_open_existing"): "the write's table, opened once per write",
    ("spark_jobs/write/cli.py", "_column_types"): "spark-submit's command line",
    ("services/planner/servicer.py", "PlannerServicer._table"): "request handling",
    ("services/planner/triggers.py", "TriggerLoop._run"): "the planner's own polls",
    ("services/index/tables.py", "IndexTables.index"): "opened once per open index",
    ("services/index/tables.py", "IndexTables.status"): "request handling",
    ("services/marker/engine.py", "MarkerEngine._storage_locked"): "one storage per table",
}
"""(module, function) -> why it opens the table (module docstrings say more)."""


def _openers(tree: ast.AST) -> Iterator[tuple[str, str, int]]:
    """(enclosing function's dotted name, opener, line) of every reference to an opener."""

    def visit(node: ast.AST, scope: tuple[str, ...]) -> Iterator[tuple[str, str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from visit(child, (*scope, child.name))
                continue
            name = _opener(child)
            if name is not None:
                yield ".".join(scope) or "<module>", name, child.lineno  # type: ignore[attr-defined]
            yield from visit(child, scope)

    return visit(tree, ())


def _opener(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        if node.attr == "open" and isinstance(node.value, ast.Name):
            dotted = f"{node.value.id}.open"
            return dotted if dotted in OPENERS else None
        return node.attr if node.attr in OPENERS else None
    if isinstance(node, ast.Name) and node.id in OPENERS:
        return node.id
    return None


def _modules() -> Iterator[Path]:
    for place in BELOW_THE_FACADE:
        path = ROOT / place
        yield from [path] if path.is_file() else sorted(path.rglob("*.py"))


@functools.cache
def _found() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for path in _modules():
        module = path.relative_to(ROOT).as_posix()
        for function, name, line in _openers(ast.parse(path.read_text(), str(path))):
            found.setdefault((module, function), []).append(f"{name} at line {line}")
    return found


def test_below_the_facade_tables_are_handed_down() -> None:
    opened_below = {
        f"{module}:{function}: {', '.join(lines)}"
        for (module, function), lines in _found().items()
        if (module, function) not in ENTRIES
    }
    assert opened_below == set(), "take the HoodieTable (or its storage) from the caller"


def test_every_listed_entry_still_opens_a_table() -> None:
    """A stale entry would let a later opener there pass unseen."""
    assert set(ENTRIES) <= set(_found())


def test_the_check_sees_each_kind_of_opener() -> None:
    source = """
def lookup(uri):
    table = HoodieTable.open(canonical_uri(uri))
    return tidemark.storage.open_storage(table.uri)

class Reader:
    def partitions(self):
        return asyncio.to_thread(HoodieTable.open, self.uri)
"""
    found = {(function, name) for function, name, _ in _openers(ast.parse(source))}
    assert found == {
        ("lookup", "HoodieTable.open"),
        ("lookup", "canonical_uri"),
        ("lookup", "open_storage"),
        ("Reader.partitions", "HoodieTable.open"),
    }
