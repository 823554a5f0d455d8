"""Reading what Tidemark wrote into a metadata table's ``files`` partition, for the tests
of the kept metadata table (tests/table and tests/spark), and updating the Hudi 1.1 table
with a metadata table those tests start from (``FIXTURE``) without Spark."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from table.table_testkit import hudi_rs_table
from tidemark.hfile.reader import HFileReader
from tidemark.table import HoodieTable
from tidemark.table.logfiles.framing import BlockType, read_blocks
from tidemark.table.records.keys import META_COLUMNS
from tidemark.table.writes.hudi_metadata_table import prepare_hudi_metadata_table
from tidemark.testing.tables import data_columns, rewrite_file_groups

FILES = Path(".hoodie/metadata/files")

FIXTURE = "v9_txns_simple_meta"
PARTITION = "region=us"
METADATA = Path(".hoodie/metadata")
TIMELINE = METADATA / ".hoodie/timeline"
METADATA_COMPACTION = "20260307162449278"
"""The fixture's metadata table compacted once, at this instant."""


def rows(root: Path) -> list[dict[str, Any]]:
    """What hudi-rs reads, without meta columns, by key."""
    read = hudi_rs_table(str(root)).drop_columns(list(META_COLUMNS))
    return sorted(read.to_pylist(), key=lambda row: row["txn_id"])


def shouted(data: pa.Table) -> pa.Table:
    """The rows with ``txn_type`` upper-cased: the update the tests write."""
    at = data.schema.get_field_index("txn_type")
    return data.set_column(at, "txn_type", pc.utf8_upper(data.column("txn_type")))


def update(root: Path) -> tuple[HoodieTable, str, list[dict[str, Any]]]:
    """Prepare as a write does under the lock, then rewrite a file group of ``PARTITION``
    with its rows shouted; the table, the instant and the model's rows."""
    table = HoodieTable.open(str(root))
    prepare_hudi_metadata_table(table, disable=False)
    group = min(
        (f for f in table.view().latest_base_files() if f.partition_path == PARTITION),
        key=lambda f: f.file_id,
    )
    data = data_columns(pq.read_table(root / group.path))
    changed = set(data.column("txn_id").to_pylist())
    model = [
        {**row, "txn_type": row["txn_type"].upper()} if row["txn_id"] in changed else row
        for row in rows(root)
    ]
    instant = rewrite_file_groups(table, [(group, shouted(data))])
    return table, instant, model


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
