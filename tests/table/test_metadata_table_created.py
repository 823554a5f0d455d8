"""``tidemark create --hudi-metadata-table``: a new table at version 8 or 9 gets Hudi's
metadata table with its ``files`` partition; the writes that follow (through the commit
path every write takes) are listed there, hudi-rs reads them through it exactly, the
partition is compacted by the writes, and Tidemark's view lists through it. Refused on
version 6 and with the option that removes it, before anything is created."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from table.metadata_testkit import FILES, METADATA, TIMELINE
from table.table_testkit import (
    create_people_cli,
    hudi_rs_rows,
    hudi_rs_table,
    rows,
    sorted_rows,
)
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.files.view import FileSystemView
from tidemark.table.metadata_table.compaction import MAX_DELTA_COMMITS
from tidemark.table.metadata_table.partitions import PARTITIONS_KEY
from tidemark.table.metadata_table.timeline import last_compaction
from tidemark.table.properties.config import parse_properties, read_properties
from tidemark.table.records.keys import META_COLUMNS
from tidemark.testing.tables import commit_file_groups


@pytest.mark.parametrize("version", ["8", "9"])
def test_a_new_table_is_listed_through_its_metadata_table(tmp_path: Path, version: str) -> None:
    code, uri = create_people_cli(tmp_path, "--table-version", version, "--hudi-metadata-table")
    assert code == 0
    root = Path(uri)
    table = HoodieTable.open(uri)
    assert read_properties(table.storage)[PARTITIONS_KEY] == "files"
    meta = parse_properties((root / METADATA / ".hoodie/hoodie.properties").read_text())
    assert meta["hoodie.table.version"] == version
    assert meta["hoodie.table.name"] == "people_metadata"
    assert hudi_rs_rows(uri) == []
    model: dict[int, dict[str, object]] = {}
    for number in range(MAX_DELTA_COMMITS + 2):
        batch = rows((number, f"n{number}", f"r{number % 3}", float(number)))
        commit_file_groups(HoodieTable.open(uri), [(f"region=r{number % 3}", batch)])
        model[number] = batch.to_pylist()[0]
    read = hudi_rs_table(uri).drop_columns(list(META_COLUMNS))
    assert sorted_rows(read) == sorted_rows(pa.Table.from_pylist(list(model.values())))
    assert last_compaction(HoodieTable.open(uri).storage) is not None
    table = HoodieTable.open(uri)
    by_storage = FileSystemView(table.storage, table.timeline, archive=table.archive)
    assert table.view().latest_base_files() == by_storage.latest_base_files()
    # hudi-rs lists through it: without the newest metadata log, the newest row is gone
    [newest] = sorted((root / FILES).glob(".files-*.log.*"), key=lambda p: p.name)[-1:]
    newest.unlink()
    assert len(hudi_rs_rows(uri)) == len(model) - 1
    assert (root / TIMELINE).is_dir()


def test_version_6_is_refused_before_anything_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, uri = create_people_cli(tmp_path, "--table-version", "6", "--hudi-metadata-table")
    assert code != 0
    assert "hudi_metadata_table" in capsys.readouterr().err
    assert not Path(uri).exists()


def test_a_write_cannot_both_create_and_remove_it() -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        WriteOptions(hudi_metadata_table=True, disable_hudi_metadata_table=True)
    assert refused.value.field == "hudi_metadata_table"
    with pytest.raises(InvalidArgumentError) as refused:
        WriteOptions(hudi_metadata_table=True, table_version=6)
    assert refused.value.field == "hudi_metadata_table"
