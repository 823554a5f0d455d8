"""The HFiles Hudi wrote in the metadata tables of the fixtures: base files and the
content of HFILE_DATA log blocks, each with where it came from."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from table.log_testkit import extract_mor_fixtures
from table.v1x_testkit import ZIPS, unzip_fixture

from tidemark.table.logfiles.framing import BlockType, read_blocks

METADATA_TABLES = [name for name in sorted(ZIPS) if name.endswith("_meta")]
"""hudi-v9's tables with a metadata table (hudi-mor's are extracted whole)."""


def extract(destination: Path) -> Path:
    """Every fixture table with a metadata table, under ``destination``."""
    extract_mor_fixtures(destination / "hudi-mor")
    for name in METADATA_TABLES:
        unzip_fixture(name, destination / "hudi-v9")
    return destination


def hudi_hfiles(root: Path) -> Iterator[tuple[str, bytes]]:
    """(where, bytes) of every HFile in a metadata table under ``root``."""
    for path in sorted(root.glob("*/*/.hoodie/metadata/*/*.hfile")):
        yield path.relative_to(root).as_posix(), path.read_bytes()
    for path in sorted(root.glob("*/*/.hoodie/metadata/*/.*.log.*")):
        for block in read_blocks(path.read_bytes()):
            if block.block_type is BlockType.HFILE_DATA:
                yield f"{path.relative_to(root).as_posix()}@{block.offset}", block.content
