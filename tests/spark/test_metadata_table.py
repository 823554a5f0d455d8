"""Writes to a table with Hudi's metadata table: refused unless the caller lets Tidemark
remove it (clear the properties, then delete ``.hoodie/metadata/``).

No Hudi-written v6 COW fixture has a metadata table, so the test builds one from a fixture
(``v6_simplekeygen_nonhivestyle``, written with ``hoodie.metadata.enable=false``): it lists
the ``files`` partition in hoodie.properties, as Hudi does, and adds a ``.hoodie/metadata/``
folder shaped like Hudi's (its own hoodie.properties, a deltacommit, a log file).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import copy_fixture, hudi_rs_table, local_frame, snapshot
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.properties.config import parse_properties, table_checksum
from tidemark.table.records.keys import META_COLUMNS
from tidemark.table.writes.hudi_metadata_table import clear_metadata_properties

FIXTURE = "v6_simplekeygen_nonhivestyle"
PROPERTIES = Path(".hoodie/hoodie.properties")
METADATA_FILES = {
    ".hoodie/metadata/.hoodie/hoodie.properties": b"hoodie.table.name=t_metadata\n",
    ".hoodie/metadata/.hoodie/20240418172802262.deltacommit": b"{}",
    ".hoodie/metadata/files/.files-0000-0_20240418172802262001.log.1_0-0-0": b"#HUDI#\x00\x01",
}


def _with_metadata_table(tmp_path: Path, partitions: str = "files") -> Path:
    root = Path(copy_fixture(FIXTURE, tmp_path))
    text = (root / PROPERTIES).read_text()
    text = text.replace(
        "hoodie.table.checksum=",
        f"hoodie.table.metadata.partitions={partitions}\n"
        "hoodie.table.metadata.partitions.inflight=\nhoodie.table.checksum=",
    )
    (root / PROPERTIES).write_text(text)
    for path, data in METADATA_FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _update(table: pa.Table) -> pa.Table:
    data = table.drop_columns(list(META_COLUMNS))
    row = data.filter(pc.equal(data.column("id"), 2))
    return row.set_column(row.schema.get_field_index("name"), "name", pa.array(["Bobby"]))


def _props(root: Path) -> dict[str, str]:
    return parse_properties((root / PROPERTIES).read_text())


def _assert_removed(root: Path) -> None:
    props = _props(root)
    assert "hoodie.table.metadata.partitions" not in props
    assert "hoodie.table.metadata.partitions.inflight" not in props
    assert int(props["hoodie.table.checksum"]) == table_checksum(
        props["hoodie.database.name"], props["hoodie.table.name"]
    )
    assert not [p for p in (root / ".hoodie/metadata").rglob("*") if p.is_file()]


def test_write_is_refused_and_changes_nothing(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _with_metadata_table(tmp_path)
    before = _tree(root)
    batch = _update(snapshot(str(root)))
    with pytest.raises(FailedPreconditionError) as raised:
        write(spark, local_frame(spark, batch), str(root), "upsert")
    assert raised.value.field == "hoodie.table.metadata.partitions"
    assert "--disable-hudi-metadata-table" in str(raised.value)
    source = tmp_path / "batch.parquet"
    pq.write_table(batch, source)
    argv = ["write", "--table", str(root), "--input", str(source), "--op", "upsert"]
    assert main([*argv, "--markers", "direct"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1
    assert errors[0].startswith("tidemark write: error: hoodie.table.metadata.partitions:")
    assert "--disable-hudi-metadata-table" in errors[0]
    assert _tree(root) == before


def test_option_removes_the_metadata_table_and_commits(spark: SparkSession, tmp_path: Path) -> None:
    root = _with_metadata_table(tmp_path, partitions="files,column_stats")
    batch = _update(snapshot(str(root)))
    result = write(
        spark,
        local_frame(spark, batch),
        str(root),
        "upsert",
        WriteOptions(disable_hudi_metadata_table=True),
    )
    assert result.rows_updated == 1
    _assert_removed(root)
    theirs = hudi_rs_table(str(root))
    assert theirs is not None
    names = {row["id"]: row["name"] for row in theirs.to_pylist()}
    assert names == {1: "Alice", 2: "Bobby", 3: "Carol", 4: "Diana"}
    assert HoodieTable.open(str(root)).timeline.is_completed(result.instant)


def test_interrupted_removal_is_finished_by_the_next_write(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A run that stopped after clearing the properties (its first step) left the folder:
    readers no longer use it, and the next write, even without the option, deletes it."""
    root = _with_metadata_table(tmp_path)
    clear_metadata_properties(HoodieTable.open(str(root)), disable=True)
    assert not any(key.startswith("hoodie.table.metadata") for key in _props(root))
    assert (root / next(iter(METADATA_FILES))).exists()
    batch = _update(snapshot(str(root)))
    write(spark, local_frame(spark, batch), str(root), "upsert")
    _assert_removed(root)
    assert {row["name"] for row in snapshot(str(root)).to_pylist()} >= {"Bobby"}
