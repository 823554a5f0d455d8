"""Helpers for the log-format tests: the merge-on-read tables Apache Hudi wrote
(tests/fixtures/hudi-mor/*.zip, see its README), extracted to a temporary directory."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from tidemark.table import HoodieTable
from tidemark.table.logfiles.framing import LogBlock, read_blocks
from tidemark.table.metadata.actions import DELTA_COMMIT
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.timeline.instant import new_instant_time

MOR_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-mor"
MOR_NAMES = sorted(path.stem for path in MOR_FIXTURES.glob("*.zip"))
HUDI_COMPACTION = "20251220210129235"
"""The compaction Hudi ran in v8_trips_8i3u1d (completed at 20251220210129883)."""
LATER_DELTACOMMIT = "20251220210130911"


def extract_mor_fixtures(destination: Path) -> Path:
    """Every fixture archive extracted under ``destination`` (``<name>/`` is a table's base
    path), without the archives' ``__MACOSX`` entries."""
    for name in MOR_NAMES:
        extract_mor_fixture(destination, name)
    return destination


def extract_mor_fixture(destination: Path, name: str) -> str:
    """The fixture ``name`` extracted under ``destination``; its base path."""
    with zipfile.ZipFile(MOR_FIXTURES / f"{name}.zip") as archive:
        members = [m for m in archive.namelist() if not m.startswith("__MACOSX/")]
        archive.extractall(destination, members)
    return str(destination / name)


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


def before_hudi_compaction(mor_tables: Path, destination: Path) -> HoodieTable:
    """v8_trips_8i3u1d as it was when Hudi scheduled its compaction: the compaction's
    instants and files and the deltacommit after it removed (a copy in ``destination``)."""
    root = shutil.copytree(mor_tables / "v8_trips_8i3u1d", destination / "v8")
    for path in [*root.rglob(f"*{HUDI_COMPACTION}*"), *root.rglob(f"*{LATER_DELTACOMMIT}*")]:
        if ".hoodie/metadata" not in path.as_posix():
            path.unlink()
    return HoodieTable.open(str(root))


def empty_deltacommit(table: HoodieTable) -> str:
    """Complete a deltacommit that writes nothing (one more towards a compaction)."""
    instant = new_instant_time(after=table.timeline.latest_timestamp())
    table.timeline.create_requested(instant, DELTA_COMMIT)
    table.timeline.transition_inflight(instant, DELTA_COMMIT)
    empty = CommitMetadata.from_write_stats([], "UPSERT", "")
    table.timeline.complete(
        instant, DELTA_COMMIT, table.timeline.encode_metadata(empty, DELTA_COMMIT)
    )
    return instant
