"""Rollback of a failed deltacommit on the merge-on-read tables Apache Hudi wrote, as Hudi
rolls one back per table version: on version 6 a rollback command block appended to the
slice as a new log version (the failed log file left in place), on versions 8 and 9 the
failed log file deleted; the failed write's new base file deleted on all. The failed write
is built here on a copy of a fixture: a log file of Avro data blocks in the table's schema,
its marker (APPEND on version 6, CREATE on 8 and 9), an insert's base file with its CREATE
marker, and a requested and inflight deltacommit."""

from __future__ import annotations

import io
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest

from table.log_testkit import log_paths
from table.table_testkit import hudi_rs_rows, sorted_rows
from table.test_log_hudi_rs import complete_v6_deltacommit
from table.test_table_rollback_avro import HUDI_ROLLBACK_METADATA, HUDI_ROLLBACK_PLAN
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError
from tidemark.jobs.rollback import rollback_table
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name
from tidemark.table.files.reader import read_snapshot
from tidemark.table.logfiles.command_blocks import rolled_back_instant
from tidemark.table.logfiles.data_blocks import avro_data_block
from tidemark.table.logfiles.file_names import (
    ROLLBACK_WRITE_TOKEN,
    log_file_instant,
    next_log_file_name,
    parse_log_file_name,
)
from tidemark.table.logfiles.framing import BlockType, HeaderKey, read_blocks, write_log_file
from tidemark.table.metadata.actions import DELTA_COMMIT, ROLLBACK
from tidemark.table.metadata.rollback import RollbackMetadata
from tidemark.table.timeline.instant import Instant, State, new_instant_time
from tidemark.table.writes.commit import remove_rolled_back_leftovers
from tidemark.table.writes.markers import DirectMarkerWriter, IOType

FIXTURES = {6: "v6_trips_8i1u", 8: "v8_trips_8i3u1d", 9: "v9_txns_simple_nometa"}
HUDIS_ROLLBACK = ("v6_nonpartitioned_rollback", "20250126040936578", "20250126040826878")
"""The fixture holding a rollback command block Hudi wrote: its rollback and target."""
TASK_TOKEN = "0-7-11"


@dataclass(frozen=True)
class FailedWrite:
    instant: str
    partition: str
    log: str
    """Its log file (table-relative), appended to the slice of ``hudis_log``."""
    base_file: str
    """The new base file of its insert (table-relative)."""
    hudis_log: str


def copy_fixture(mor_tables: Path, tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(mor_tables / name, root)
    return root


def readers(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows hudi-rs and Tidemark's snapshot read."""
    return hudi_rs_rows(str(root)), sorted_rows(read_snapshot(HoodieTable.open(str(root))))


def fail_a_deltacommit(root: Path, version: int) -> FailedWrite:
    """A deltacommit left inflight after writing its files, as a killed writer leaves it."""
    table = HoodieTable.open(str(root))
    storage = table.storage
    hudis = next(
        p
        for p in log_paths(root)
        if read_blocks(p.read_bytes())[0].block_type == BlockType.AVRO_DATA
    )
    partition = hudis.parent.relative_to(root).as_posix()
    hudis_block = read_blocks(hudis.read_bytes())[0]
    row = hudi_rs_rows(str(root))[0]
    instant = new_instant_time(after=table.timeline.latest_timestamp())
    table.timeline.create_requested(instant, DELTA_COMMIT)
    table.timeline.transition_inflight(instant, DELTA_COMMIT)

    slice_log = parse_log_file_name(hudis.name)
    named = log_file_instant(version, slice_log.instant, instant)
    existing = [path.name for path in hudis.parent.iterdir()]
    name = next_log_file_name(existing, slice_log.file_id, named, TASK_TOKEN).name
    markers = DirectMarkerWriter(storage, instant)
    markers.create(partition, name, IOType.APPEND if version == 6 else IOType.CREATE)
    update = {**row, "_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_1"}
    schema = hudis_block.header[HeaderKey.SCHEMA]
    write_log_file(storage, f"{partition}/{name}", [avro_data_block(instant, schema, [update])])

    base_name = base_file_name(f"{uuid.uuid4()}-0", "0-7-12", instant)
    markers.create(partition, base_name, IOType.CREATE)
    shutil.copyfile(next(hudis.parent.glob("*.parquet")), hudis.parent / base_name)
    return FailedWrite(
        instant,
        partition,
        f"{partition}/{name}",
        f"{partition}/{base_name}",
        f"{partition}/{hudis.name}",
    )


def decoded(data: bytes, schema: dict[str, Any]) -> dict[str, Any]:
    """The one record of an Avro container, read with Hudi's schema."""
    [record] = list(fastavro.reader(io.BytesIO(data), reader_schema=fastavro.parse_schema(schema)))
    assert isinstance(record, dict)
    return record


def rollback_files(root: Path, rollback_instant: str, version: int) -> tuple[bytes, bytes]:
    """The rollback's requested plan and completed metadata."""
    [completed] = (
        (root / ".hoodie").glob(f"{rollback_instant}.rollback")
        if version == 6
        else (root / ".hoodie" / "timeline").glob(f"{rollback_instant}_*.rollback")
    )
    return (completed.parent / f"{rollback_instant}.rollback.requested").read_bytes(), (
        completed.read_bytes()
    )


def hudis_rollback_block(mor_tables: Path, rollback: str, target: str) -> bytes:
    """The rollback command block Hudi wrote in its fixture, for ``rollback`` undoing
    ``target`` (the instants substituted: both are 17 digits)."""
    name, hudis_rollback, hudis_target = HUDIS_ROLLBACK
    [log] = (mor_tables / name).glob(f".*.log.2_{ROLLBACK_WRITE_TOKEN}")
    data = log.read_bytes()
    return data.replace(hudis_rollback.encode(), rollback.encode()).replace(
        hudis_target.encode(), target.encode()
    )


@pytest.mark.parametrize("version", sorted(FIXTURES))
def test_a_failed_deltacommit_is_rolled_back_as_hudi_does(
    mor_tables: Path, tmp_path: Path, version: int
) -> None:
    root = copy_fixture(mor_tables, tmp_path, FIXTURES[version])
    before = readers(root)
    logs_before = set(log_paths(root))
    failed = fail_a_deltacommit(root, version)
    assert (root / failed.log).exists() and (root / failed.base_file).exists()
    failed_log_size = (root / failed.log).stat().st_size

    [result] = rollback_table(HoodieTable.open(str(root)), failed.instant)

    assert readers(root) == before
    table = HoodieTable.open(str(root))
    assert table.timeline.find(result.rollback_instant).is_completed
    assert failed.instant not in {i.timestamp for i in table.timeline.instants()}
    assert not (root / failed.base_file).exists()
    assert not (root / ".hoodie" / ".temp" / failed.instant).exists()
    full = f"{table.uri.rstrip('/')}/"
    plan, completed = rollback_files(root, result.rollback_instant, version)
    plan_record = decoded(plan, HUDI_ROLLBACK_PLAN)
    metadata = decoded(completed, HUDI_ROLLBACK_METADATA)
    assert plan_record["instantToRollback"] == {
        "commitTime": failed.instant,
        "action": DELTA_COMMIT,
    }
    assert metadata["instantsRollback"] == [{"commitTime": failed.instant, "action": DELTA_COMMIT}]
    assert metadata["commitsRollback"] == [failed.instant]
    [partition] = metadata["partitionMetadata"].values()
    assert partition["partitionPath"] == failed.partition
    assert partition["failedDeleteFiles"] == []

    if version == 6:
        assert (root / failed.log).exists(), "Hudi leaves a failed version-6 log in place"
        [new_log] = set(log_paths(root)) - logs_before - {root / failed.log}
        hudis = parse_log_file_name(Path(failed.hudis_log).name)
        assert new_log.name == (
            f".{hudis.file_id}_{hudis.instant}.log.{hudis.version + 2}_{ROLLBACK_WRITE_TOKEN}"
        )
        assert new_log.read_bytes() == hudis_rollback_block(
            mor_tables, result.rollback_instant, failed.instant
        )
        new_log_path = new_log.relative_to(root).as_posix()
        assert partition["successDeleteFiles"] == [full + failed.base_file]
        assert partition["rollbackLogFiles"] == {full + new_log_path: new_log.stat().st_size}
        assert partition["logFilesFromFailedCommit"] == {full + failed.log: failed_log_size}
        assert metadata["totalFilesDeleted"] == 1
        assert {
            "partitionPath": failed.partition,
            "fileId": hudis.file_id,
            "latestBaseInstant": hudis.instant,
            "filesToBeDeleted": [],
            "logBlocksToBeDeleted": {full + failed.log: failed_log_size},
        } in plan_record["RollbackRequests"]
    else:
        assert not (root / failed.log).exists()
        assert set(log_paths(root)) == logs_before, "no command block on versions 8 and 9"
        assert sorted(partition["successDeleteFiles"]) == sorted(
            [full + failed.base_file, full + failed.log]
        )
        assert partition["rollbackLogFiles"] == partition["logFilesFromFailedCommit"] == {}
        assert metadata["totalFilesDeleted"] == 2
        [request] = plan_record["RollbackRequests"]
        assert sorted(request["filesToBeDeleted"]) == sorted(partition["successDeleteFiles"])


def test_a_version_6_slice_reads_data_rollback_data_as_hudis_fixture(
    mor_tables: Path, tmp_path: Path
) -> None:
    """After the rollback the slice takes the next append as its next version, which both
    readers merge; the failed write's block stays unread (data, rollback, data)."""
    root = copy_fixture(mor_tables, tmp_path, FIXTURES[6])
    failed = fail_a_deltacommit(root, 6)
    [result] = rollback_table(HoodieTable.open(str(root)), failed.instant)
    before = readers(root)

    table = HoodieTable.open(str(root))
    hudis = parse_log_file_name(Path(failed.hudis_log).name)
    schema = read_blocks((root / failed.hudis_log).read_bytes())[0].header[HeaderKey.SCHEMA]
    row = next(r for r in before[0] if r["_hoodie_partition_path"] == failed.partition)
    later = new_instant_time(after=result.rollback_instant)
    update = {**row, "_hoodie_commit_time": later, "_hoodie_commit_seqno": f"{later}_0_1"}
    update.update(fare=12345.5, ts=row["ts"] + 1)
    existing = [path.name for path in (root / failed.partition).iterdir()]
    name = next_log_file_name(existing, hudis.file_id, hudis.instant, "0-9-13").name
    assert parse_log_file_name(name).version == hudis.version + 3
    block = avro_data_block(later, schema, [update])
    write_log_file(table.storage, f"{failed.partition}/{name}", [block])
    complete_v6_deltacommit(root, later, f"{failed.partition}/{name}")

    after_rs, after_ours = readers(root)
    assert after_rs == after_ours
    key = row["_hoodie_record_key"]
    assert {r["_hoodie_record_key"]: r["fare"] for r in after_rs}[key] == 12345.5
    assert len(after_rs) == len(before[0])
    failed_blocks = read_blocks((root / failed.log).read_bytes())
    assert [b.instant for b in failed_blocks] == [failed.instant]


def test_an_interrupted_rollback_is_completed_with_a_second_harmless_block(
    mor_tables: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback killed after its command block was written leaves the failed deltacommit
    requested and its own rollback inflight; the next rollback discards that rollback and
    rolls the deltacommit back afresh, appending a second command block for the same
    target, as Hudi's retried rollback appends another: readers drop the target's blocks
    whichever block they meet, so the first one is harmless."""
    root = copy_fixture(mor_tables, tmp_path, FIXTURES[6])
    before = readers(root)
    failed = fail_a_deltacommit(root, 6)
    table = HoodieTable.open(str(root))

    def killed(*_: object) -> None:
        raise RuntimeError("killed before the rollback completed")

    monkeypatch.setattr(type(table.timeline), "complete", killed)
    with pytest.raises(RuntimeError, match="killed"):
        rollback_table(table, failed.instant)
    monkeypatch.undo()
    first = [p for p in log_paths(root) if p.name.endswith(f"_{ROLLBACK_WRITE_TOKEN}")]
    assert len(first) == 1
    [interrupted] = [
        i for i in HoodieTable.open(str(root)).timeline.pending() if i.action == ROLLBACK
    ]

    [result] = rollback_table(HoodieTable.open(str(root)), None)

    assert result.rolled_back.timestamp == failed.instant
    timeline = HoodieTable.open(str(root)).timeline
    assert [i.timestamp for i in timeline.pending()] == []
    assert interrupted.timestamp not in {i.timestamp for i in timeline.instants()}
    blocks = sorted(p for p in log_paths(root) if p.name.endswith(f"_{ROLLBACK_WRITE_TOKEN}"))
    assert len(blocks) == 2
    commands = [read_blocks(p.read_bytes()) for p in blocks]
    assert [[rolled_back_instant(b) for b in c] for c in commands] == [[failed.instant]] * 2
    assert [c[0].instant for c in commands] == [interrupted.timestamp, result.rollback_instant]
    assert readers(root) == before


@pytest.mark.parametrize("version", [8, 9])
def test_a_late_log_named_with_the_rolled_back_instant_is_removed(
    mor_tables: Path, tmp_path: Path, version: int
) -> None:
    root = copy_fixture(mor_tables, tmp_path, FIXTURES[version])
    failed = fail_a_deltacommit(root, version)
    rollback_table(HoodieTable.open(str(root)), failed.instant)
    late = parse_log_file_name(Path(failed.log).name)
    late_path = f"{failed.partition}/.{late.file_id}_{failed.instant}.log.1_0-8-99"
    (root / late_path).write_bytes(b"#HUDI#")

    assert remove_rolled_back_leftovers(HoodieTable.open(str(root))) == [late_path]
    assert not (root / late_path).exists()


def test_a_late_version_6_log_is_found_through_its_orphan_marker(
    mor_tables: Path, tmp_path: Path
) -> None:
    """A task that passed its inflight check before the rollback, paused, then marked and
    published a log after it: the marker dir it recreated names the log, which is deleted
    once its blocks show only the rolled-back instant; a log of the same name holding
    another write's blocks is kept."""
    root = copy_fixture(mor_tables, tmp_path, FIXTURES[6])
    failed = fail_a_deltacommit(root, 6)
    rollback_table(HoodieTable.open(str(root)), failed.instant)
    table = HoodieTable.open(str(root))
    hudis = parse_log_file_name(Path(failed.hudis_log).name)
    schema = read_blocks((root / failed.hudis_log).read_bytes())[0].header[HeaderKey.SCHEMA]
    row = hudi_rs_rows(str(root))[0]

    def publish_late(name: str, writer: str) -> str:
        DirectMarkerWriter(table.storage, failed.instant).create(
            failed.partition, name, IOType.APPEND
        )
        update = {**row, "_hoodie_commit_time": writer}
        path = f"{failed.partition}/{name}"
        write_log_file(table.storage, path, [avro_data_block(writer, schema, [update])])
        return path

    stem = f".{hudis.file_id}_{hudis.instant}.log"
    late = publish_late(f"{stem}.9_0-8-99", failed.instant)
    other = publish_late(f"{stem}.10_0-8-99", new_instant_time())
    assert read_blocks((root / late).read_bytes())[0].block_type == BlockType.AVRO_DATA

    assert remove_rolled_back_leftovers(table) == [late]
    assert not (root / late).exists()
    assert (root / other).exists()


def test_what_is_not_a_pending_write_is_refused_on_a_mor_table(
    mor_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = copy_fixture(mor_tables, tmp_path, FIXTURES[9])
    table = HoodieTable.open(str(root))
    completed = table.timeline.completed(frozenset({DELTA_COMMIT}))[-1].timestamp
    with pytest.raises(FailedPreconditionError, match="only pending"):
        rollback_table(table, completed)
    assert main(["rollback", "--table", str(root), "--instant", completed]) == 2
    assert "only pending" in capsys.readouterr().err

    failed = fail_a_deltacommit(root, 9)
    assert main(["rollback", "--table", str(root), "--instant", failed.instant]) == 0
    assert f"rolled back deltacommit {failed.instant}" in capsys.readouterr().out
    assert not (root / failed.log).exists()
    instant = Instant(failed.instant, DELTA_COMMIT, State.REQUESTED, layout=2)
    assert not (root / instant.path).exists()


def test_a_version_6_slice_whose_marked_log_is_not_published_still_gets_its_block(
    mor_tables: Path, tmp_path: Path
) -> None:
    """A task that marked its log and had not published it when the rollback read the
    markers may publish it later: the slice gets its command block all the same, and the
    plan lists the log with Hudi's unknown size."""
    root = copy_fixture(mor_tables, tmp_path, FIXTURES[6])
    failed = fail_a_deltacommit(root, 6)
    (root / failed.log).unlink()

    [result] = rollback_table(HoodieTable.open(str(root)), failed.instant)

    full = f"{HoodieTable.open(str(root)).uri.rstrip('/')}/"
    [block_file] = [p for p in log_paths(root) if p.name.endswith(f"_{ROLLBACK_WRITE_TOKEN}")]
    assert [rolled_back_instant(b) for b in read_blocks(block_file.read_bytes())] == [
        failed.instant
    ]
    plan, completed = rollback_files(root, result.rollback_instant, 6)
    requests = decoded(plan, HUDI_ROLLBACK_PLAN)["RollbackRequests"]
    assert {full + failed.log: -1} in [r["logBlocksToBeDeleted"] for r in requests]
    [partition] = decoded(completed, HUDI_ROLLBACK_METADATA)["partitionMetadata"].values()
    assert partition["logFilesFromFailedCommit"] == {}
    assert list(partition["rollbackLogFiles"]) == [full + block_file.relative_to(root).as_posix()]


@pytest.mark.parametrize("name", ["v6_nonpartitioned_rollback", "v9_nonpartitioned_rollback"])
def test_hudis_mor_rollback_metadata_decodes_to_the_record_hudi_wrote(
    mor_tables: Path, name: str
) -> None:
    """Hudi's own rollbacks of a deltacommit (the block files and failed logs on 6, empty
    maps on 9) come back field for field from what this library decodes of them."""
    [completed] = [
        path
        for path in (mor_tables / name / ".hoodie").rglob("*.rollback")
        if "metadata" not in path.parts
    ]
    data = completed.read_bytes()
    assert RollbackMetadata.from_avro(data).to_record() == decoded(data, HUDI_ROLLBACK_METADATA)
