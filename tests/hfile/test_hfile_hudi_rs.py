"""hudi-rs lists a table version 9 table through its metadata table's ``files``
partition: rewriting that partition's HFiles (its base file, its log files' HFILE_DATA
blocks) with this writer, from their decoded ``HoodieMetadataRecord``s, leaves what hudi-rs
reads as it was, and leaving a file group out of them makes hudi-rs read fewer rows (so
the test sees the HFiles hudi-rs reads)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pytest
from table.table_testkit import hudi_rs_table
from table.v1x_testkit import unzip_fixture

from tidemark.hfile.blocks import Codec
from tidemark.hfile.reader import HFileReader
from tidemark.hfile.style import Style, WriteOptions
from tidemark.hfile.writer import write_hfile
from tidemark.table.logfiles.framing import BlockType, encode_block, read_blocks

TABLE = "v9_txns_simple_meta"
OMITTED_GROUP = "e1d239c0-049d-43de-a138-e1915a3e29a7"
"""region=apac's live file group (4 of the 12 rows)."""


def rows(table: Path) -> list[dict[str, Any]]:
    return sorted(hudi_rs_table(str(table)).to_pylist(), key=lambda row: row["txn_id"])


def rewrite_hfile(data: bytes, options: WriteOptions, keep: Callable[[str], bool]) -> bytes:
    """The HFile written anew from its decoded records, keeping the files ``keep``
    accepts; the Avro schema is the one in its ``schema`` file info entry."""
    reader = HFileReader(data)
    schema = fastavro.parse_schema(json.loads(reader.file_info[b"schema"]))
    cells = []
    for cell in reader.cells():
        record = fastavro.schemaless_reader(io.BytesIO(cell.value), schema, schema)
        assert isinstance(record, dict)
        listed = record["filesystemMetadata"]
        record["filesystemMetadata"] = {name: info for name, info in listed.items() if keep(name)}
        value = io.BytesIO()
        fastavro.schemaless_writer(value, schema, record)
        cells.append((cell.row, value.getvalue()))
    return write_hfile(
        cells, file_info=reader.user_file_info, meta_blocks=reader.meta_blocks, options=options
    )


def rewrite_files_partition(
    table: Path, options: WriteOptions, keep: Callable[[str], bool] = lambda name: True
) -> dict[Path, bytes]:
    """Every HFile of ``files`` rewritten: the newest base file and the HFILE_DATA blocks
    of the log files (which list every file the table's live rows are in); the former bytes
    of each file rewritten, by path."""
    folder = table / ".hoodie" / "metadata" / "files"
    base = max(folder.glob("*.hfile"))
    before = {base: base.read_bytes()}
    base.write_bytes(rewrite_hfile(before[base], options, keep))
    for log in folder.glob(".files-*.log.*"):
        blocks = read_blocks(log.read_bytes())
        if not any(block.block_type is BlockType.HFILE_DATA for block in blocks):
            continue
        before[log] = log.read_bytes()
        rewritten = [
            replace(block, content=rewrite_hfile(block.content, options, keep))
            if block.block_type is BlockType.HFILE_DATA
            else block
            for block in blocks
        ]
        log.write_bytes(b"".join(encode_block(block) for block in rewritten))
    return before


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return unzip_fixture(TABLE, tmp_path)


@pytest.mark.parametrize(
    "options",
    [WriteOptions(), WriteOptions(Style.HBASE, Codec.NONE)],
    ids=["hudi-gz", "hbase-none"],
)
def test_hudi_rs_reads_the_table_as_before(table: Path, options: WriteOptions) -> None:
    before = rows(table)
    originals = rewrite_files_partition(table, options)
    # a new CREATE_TIME_TS at least (another layout for hbase) in every HFile
    assert all(path.read_bytes() != data for path, data in originals.items())
    assert len(originals) > 10
    assert len(before) == 12
    assert rows(table) == before


def test_hudi_rs_lists_through_the_rewritten_hfile(table: Path) -> None:
    before = rows(table)
    rewrite_files_partition(table, WriteOptions(), keep=lambda name: OMITTED_GROUP not in name)
    after = rows(table)
    assert len(after) == len(before) - 4
    assert after == [row for row in before if OMITTED_GROUP not in row["_hoodie_file_name"]]
