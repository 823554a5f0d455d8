"""A rollback racing the tasks of the writer it fences off, and a rollback whose marker-dir
clean-up fails, on the local S3 server.

The fenced writer's tasks are the real task code (``BaseFileWriter``: marker, inflight
check, Parquet through storage), run in this process at chosen moments of the rollback;
the writes around them use the table API the write job uses. Every scenario ends with the
next write's start (rollback of failed writes, leftover and marker-dir clean-up) and a
commit, after which hudi-rs and Tidemark read exactly the committed rows.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from table.table_testkit import Writer, people_config, rows

from faults.faultkit import assert_table_holds
from tidemark.errors import ConflictError
from tidemark.jobs.base_file import BaseFileWriter
from tidemark.jobs.task import TaskIdentity
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name, is_base_file_name, new_file_id
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.records.keys import partition_paths, record_keys, with_meta_columns
from tidemark.table.writes.commit import delete_stale_marker_dirs, rollback, rollback_failed_writes
from tidemark.table.writes.markers import (
    TEMP_DIR,
    DirectMarkerWriter,
    StorageMarkerReader,
    marker_dir,
)
from tidemark.testing.s3local import FaultProxy

FENCED = rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0))
LATE = rows((7, "late", "asia", 7.0))
NEXT = rows((1, "ann", "eu", 3.0), (8, "cid", "asia", 8.0))


class AfterMarkerRead(StorageMarkerReader):
    """The storage marker reader a rollback uses, running ``then`` right after the rollback
    read the markers (before it deletes them): the moment of the race."""

    def __init__(self, storage: Storage, then: Callable[[], object]) -> None:
        super().__init__(storage)
        self.then = then

    def all_markers(self, instant: str) -> set[str]:
        markers = super().all_markers(instant)
        self.then()
        return markers


def _fenced_write(table: HoodieTable) -> str:
    """A write that lost its lock: inflight, one file written in each of eu and us."""
    writer = Writer(table)
    instant = writer.begin()
    writer.write_files(instant, FENCED)
    return instant


def _start_task(table: HoodieTable, instant: str, data: pa.Table) -> BaseFileWriter:
    """A task of ``instant`` starting its file in ``data``'s one partition: the marker,
    the inflight check, the output opened (published when closed)."""
    [partition] = set(partition_paths(data, table.config).to_pylist())
    task = TaskIdentity(partition_id=5, stage_id=1, attempt_id=9)
    file_id = new_file_id()
    keyed = with_meta_columns(
        data,
        instant=instant,
        task_partition_id=task.partition_id,
        keys=record_keys(data, table.config),
        partition_path=partition,
        file_name=base_file_name(file_id, task.write_token, instant),
    )
    writer = BaseFileWriter(
        storage=table.storage,
        markers=DirectMarkerWriter(table.storage, instant),
        task=task,
        instant=instant,
        action=COMMIT,
        partition_path=partition,
        file_id=file_id,
        schema=keyed.schema,
    )
    writer.write_new(keyed, 0)
    return writer


def _next_write(table: HoodieTable, data: pa.Table) -> str:
    """What the next write does under the lock before it writes (as
    ``spark_jobs/write/``), then its commit; returns the committed instant."""
    rollback_failed_writes(table, StorageMarkerReader(table.storage), lock_held=True)
    delete_stale_marker_dirs(table)
    return Writer(table).commit(data)


def _data_files_of(table: HoodieTable, instant: str) -> list[str]:
    return [
        info.path
        for info in table.storage.list("")
        if is_base_file_name(info.path.rpartition("/")[2]) and instant in info.path
    ]


def _assert_reads_exactly(table: HoodieTable, committed: str, model: dict[str, str]) -> None:
    """hudi-rs reads ``model`` (record key -> name), no pending instant is left, and
    Tidemark's view holds only files of the one committed write."""
    assert_table_holds(table.uri, model)
    files = HoodieTable.open(table.uri).view().latest_base_files()
    assert {f.instant for f in files} == {committed}


def test_a_task_starting_after_the_rollback_read_the_markers_writes_nothing(
    s3_bucket: str,
) -> None:
    """The race: the fenced writer's task creates a marker in a partition no marker named
    yet, after the rollback read the markers and before it deletes them. The rollback
    reverted the instant to requested first, so the task finds it no longer inflight and
    writes no file: nothing the rollback did not see can appear."""
    table = HoodieTable.create(s3_bucket, people_config())
    fenced = _fenced_write(table)
    refused: list[ConflictError] = []

    def late_task() -> None:
        with pytest.raises(ConflictError, match="no longer inflight") as error:
            _start_task(table, fenced, LATE)
        refused.append(error.value)

    rollback(table, fenced, AfterMarkerRead(table.storage, late_task))
    assert len(refused) == 1
    assert _data_files_of(table, fenced) == []
    committed = _next_write(table, NEXT)
    _assert_reads_exactly(table, committed, {"1": "ann", "8": "cid"})
    assert _data_files_of(table, fenced) == []
    assert list(table.storage.list(f"{TEMP_DIR}/")) == []


def test_a_file_a_fenced_task_publishes_after_the_rollback_is_removed_by_the_next_write(
    s3_bucket: str,
) -> None:
    """A task that created its marker (in a new partition) before the rollback publishes
    its file after the rollback completed. Its instant is older than the first commit, so
    Hudi's readers would count the file as archived; the rollback named its partition
    (read from the marker after the revert), so the next write removes it."""
    table = HoodieTable.create(s3_bucket, people_config())
    fenced = _fenced_write(table)
    in_flight = _start_task(table, fenced, LATE)
    result = rollback(table, fenced, StorageMarkerReader(table.storage))
    assert result.rolled_back.timestamp == fenced
    in_flight.close()
    [late] = _data_files_of(table, fenced)
    assert late.startswith("asia/")
    committed = _next_write(table, NEXT)
    assert _data_files_of(table, fenced) == []
    _assert_reads_exactly(table, committed, {"1": "ann", "8": "cid"})


@pytest.mark.parametrize(("status", "code"), [(403, "AccessDenied"), (503, "SlowDown")])
def test_rollback_completes_when_deleting_the_marker_dir_fails(
    s3_bucket: str, driver_faulty_s3: FaultProxy, status: int, code: str
) -> None:
    """Every request on the rolled-back instant's marker dir fails once the rollback read
    it: the rollback still returns its completed instant, and the next write deletes the
    marker dir it left."""
    table = HoodieTable.create(s3_bucket, people_config())
    fenced = _fenced_write(table)
    marker_prefix = rf"prefix=[^&]*{marker_dir(fenced).replace('/', '%2F')}"

    def break_marker_dir() -> None:
        driver_faulty_s3.fail_always(path_pattern=marker_prefix, status=status, code=code)

    result = rollback(table, fenced, AfterMarkerRead(table.storage, break_marker_dir))
    assert driver_faulty_s3.injected >= 1
    driver_faulty_s3.clear()
    timeline = HoodieTable.open(s3_bucket).timeline
    assert [i.timestamp for i in timeline.completed()] == [result.rollback_instant]
    assert timeline.pending() == []
    assert any(table.storage.list(marker_dir(fenced) + "/"))
    committed = _next_write(table, NEXT)
    assert list(table.storage.list(f"{TEMP_DIR}/")) == []
    _assert_reads_exactly(table, committed, {"1": "ann", "8": "cid"})
