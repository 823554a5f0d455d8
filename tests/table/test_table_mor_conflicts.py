"""Concurrent merge-on-read writers by Hudi's rule: appends of two deltacommits to one file
group conflict at the second commit; appends to different groups do not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tidemark.errors import ConflictError
from tidemark.table import HoodieTable
from tidemark.table.files.view import FileSlice
from tidemark.table.metadata.actions import DELTA_COMMIT, WRITE_ACTIONS
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.timeline.instant import new_instant_time


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v9_txns_simple_nometa"])
def test_two_appends_to_one_file_group_conflict_at_the_second_commit(
    mor_tables: Path, tmp_path: Path, name: str
) -> None:
    """Hudi's rule for merge-on-read writers (SimpleConcurrentFileWritesConflictResolution):
    a deltacommit that completed while another ran and appended to the same file group
    makes the other's commit a conflict; one to another group does not."""
    table = HoodieTable.open(str(shutil.copytree(mor_tables / name, tmp_path / name)))
    groups = table.view().latest_file_slices()
    seen = frozenset(i.timestamp for i in table.timeline.completed(WRITE_ACTIONS))

    def appended(file_slice: FileSlice, instant: str) -> CommitMetadata:
        path = f"{file_slice.partition_path}/.{file_slice.file_id}_{instant}.log.1_0-1-0"
        stat = WriteStat(
            file_slice.file_id,
            path.lstrip("/"),
            instant,
            1,
            0,
            1,
            0,
            10,
            10,
            file_slice.partition_path,
            log_version=1,
            log_offset=0,
            base_file="",
            log_files=(path.rpartition("/")[2],),
        )
        return CommitMetadata.from_write_stats([stat], "UPSERT", "")

    first, second = new_instant_time(), new_instant_time()
    for instant in (first, second):
        table.timeline.create_requested(instant, DELTA_COMMIT)
        table.timeline.transition_inflight(instant, DELTA_COMMIT)
    done = appended(groups[0], first)
    table.timeline.complete(first, DELTA_COMMIT, table.timeline.encode_metadata(done, DELTA_COMMIT))
    with pytest.raises(ConflictError, match=f"written by deltacommit {first}") as refused:
        table.timeline.check_concurrent(second, appended(groups[0], second), seen)
    assert refused.value.field == "instant"
    if len(groups) > 1:
        table.timeline.check_concurrent(second, appended(groups[1], second), seen)
