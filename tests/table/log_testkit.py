"""Helpers for the log-format tests: the merge-on-read tables Apache Hudi wrote
(tests/fixtures/hudi-mor/*.zip, see its README), extracted to a temporary directory."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tidemark.table.logfiles.framing import LogBlock, read_blocks

MOR_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-mor"
MOR_NAMES = sorted(path.stem for path in MOR_FIXTURES.glob("*.zip"))


def extract_mor_fixtures(destination: Path) -> Path:
    """Every fixture archive extracted under ``destination`` (``<name>/`` is a table's base
    path), without the archives' ``__MACOSX`` entries."""
    for name in MOR_NAMES:
        with zipfile.ZipFile(MOR_FIXTURES / f"{name}.zip") as archive:
            members = [m for m in archive.namelist() if not m.startswith("__MACOSX/")]
            archive.extractall(destination, members)
    return destination


def log_paths(table: Path, *, metadata_table: bool = False) -> list[Path]:
    """The table's log files (``.hoodie/metadata`` ones only with ``metadata_table``)."""
    found = [path for path in table.rglob(".*.log.*") if path.is_file()]
    return sorted(p for p in found if metadata_table or ".hoodie" not in p.parts)


def table_blocks(table: Path) -> dict[str, list[LogBlock]]:
    """Each data log file's blocks, by ``<partition>/<file name>``."""
    return {
        path.relative_to(table).as_posix(): read_blocks(path.read_bytes())
        for path in log_paths(table)
    }
