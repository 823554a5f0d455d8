"""Reading what Tidemark wrote into a metadata table's ``files`` partition, for the tests
of the kept metadata table (tests/table and tests/spark)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro

from tidemark.hfile.reader import HFileReader
from tidemark.table.logfiles.framing import BlockType, read_blocks

FILES = Path(".hoodie/metadata/files")


def files_records(log: Path) -> dict[str, dict[str, Any]]:
    """The records of a ``files`` log file's one HFILE_DATA block, by row."""
    [block] = [b for b in read_blocks(log.read_bytes()) if b.block_type is BlockType.HFILE_DATA]
    reader = HFileReader(block.content)
    schema = fastavro.parse_schema(json.loads(reader.file_info[b"schema"]))
    decoded = {}
    for cell in reader.cells():
        record = fastavro.schemaless_reader(io.BytesIO(cell.value), schema, schema)
        assert isinstance(record, dict)
        decoded[cell.row.decode()] = record
    return decoded


def instant_log(root: Path, instant: str) -> Path:
    """The one ``files`` log file of ``instant``'s metadata deltacommit."""
    [log] = (root / FILES).glob(f".files-*_{instant}.log.1_*")
    return log
