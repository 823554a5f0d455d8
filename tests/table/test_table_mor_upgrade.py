"""Merge-on-read tables Hudi wrote at version 6, upgraded to 8 and 9: their deltacommits
move to layout 2 (Avro, with their delta write stats) and every reader reads the rows it
read before (the version 6 log files keep their names: each names its slice's base
instant, whose completion time the upgrade makes its requested time, so the slice a
version 8 reader gives it is the one version 6 gave it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from table.table_testkit import hudi_rs_rows, sorted_rows
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.maintenance.upgrade import upgrade_table
from tidemark.table.metadata.actions import DELTA_COMMIT

FIXTURES = ["v6_trips_8i1u", "v6_trips_8i3d", "v6_nonpartitioned_rollback"]


@pytest.mark.parametrize("to_version", [8, 9])
@pytest.mark.parametrize("name", FIXTURES)
def test_an_upgraded_table_reads_as_before(
    mor_tables: Path, tmp_path: Path, name: str, to_version: int
) -> None:
    uri = str(shutil.copytree(mor_tables / name, tmp_path / name))
    before = hudi_rs_rows(uri)
    deltacommits = HoodieTable.open(uri).timeline.completed(frozenset({DELTA_COMMIT}))
    result = upgrade_table(HoodieTable.open(uri), to_version)
    assert result.to_version == to_version
    table = HoodieTable.open(uri)
    assert table.config.table_version == to_version and table.config.merge_on_read
    moved = table.timeline.completed(frozenset({DELTA_COMMIT}))
    assert [i.timestamp for i in moved] == [i.timestamp for i in deltacommits]
    stats = [s for i in moved for s in table.timeline.read_metadata(i).write_stats]
    assert any(s.is_delta and s.log_files for s in stats)
    assert hudi_rs_rows(uri) == before
    assert sorted_rows(read_snapshot(table)) == before
