"""Hudi's archived timeline: which archived instants completed, read from its log files.

The archive files are made by ``hudi_archive`` from Hudi's documented log format: no
archive written by Hudi itself is available to the tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from table.hudi_archive import archived_commit, avro_block, write_archive
from table.table_testkit import copy_fixture, set_property
from tidemark.errors import FailedPreconditionError
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.timeline.archived import (
    ArchivedInstant,
    ArchivedTimeline,
    archive_folder,
    parse_archive_log,
)

FIRST = "20240418172802262"
"""The first commit of the v6_simplekeygen_nonhivestyle fixture."""


def _archive(tmp_path: Path, folder: str = ".hoodie/archived") -> tuple[ArchivedTimeline, Path]:
    return ArchivedTimeline(open_storage(str(tmp_path)), folder), tmp_path / folder


def test_completed_writes_across_blocks_and_files(tmp_path: Path) -> None:
    archive, folder = _archive(tmp_path)
    write_archive(
        folder,
        1,
        archived_commit("20240101000000001"),
        [("20240101000000002", "replacecommit", "COMPLETED")],
    )
    write_archive(
        folder,
        2,
        [
            ("20240101000000003", "deltacommit", "COMPLETED"),
            ("20240101000000004", "clean", "COMPLETED"),
            ("20240101000000005", "rollback", "COMPLETED"),
            ("20240101000000006", "commit", "INFLIGHT"),
            ("20240101000000007", "commit", None),
        ],
    )
    (folder / "mergeArchivePlan").write_bytes(b"not a log file")
    assert archive.completed_writes() == {
        "20240101000000001",
        "20240101000000002",
        "20240101000000003",  # a merge-on-read write
        "20240101000000007",
    }


def test_entries_in_file_order_with_their_states(tmp_path: Path) -> None:
    data = avro_block(archived_commit(FIRST)) + avro_block([(FIRST, "clean", None)])
    assert parse_archive_log(data, "a") == [
        ArchivedInstant(FIRST, "commit", "REQUESTED"),
        ArchivedInstant(FIRST, "commit", "INFLIGHT"),
        ArchivedInstant(FIRST, "commit", "COMPLETED"),
        ArchivedInstant(FIRST, "clean", "COMPLETED"),
    ]


@pytest.mark.parametrize("cut", [7, 30, -9])
def test_a_block_a_crash_cut_short_is_skipped(cut: int) -> None:
    """A torn append at the end, or in the middle (the next append starts a new block
    after the torn bytes), loses only the torn block, as in Hudi's reader."""
    whole = avro_block(archived_commit("20240101000000001"))
    torn = avro_block(archived_commit("20240101000000002"))[:cut]
    after = avro_block(archived_commit("20240101000000003"))
    instants = parse_archive_log(whole + torn + after, "a")
    completed = [i.timestamp for i in instants if i.state == "COMPLETED"]
    assert completed == ["20240101000000001", "20240101000000003"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"PAR1 not a log", "does not start with Hudi's log magic"),
        (avro_block([])[:14] + b"\x00\x00\x00\x02" + avro_block([])[18:], "log format version 2"),
    ],
)
def test_an_unreadable_archive_is_an_error_naming_the_file(
    tmp_path: Path, data: bytes, reason: str
) -> None:
    archive, folder = _archive(tmp_path)
    folder.mkdir(parents=True)
    (folder / ".commits_.archive.1_1-0-1").write_bytes(data)
    with pytest.raises(FailedPreconditionError, match=reason) as error:
        archive.completed_writes()
    assert ".hoodie/archived/.commits_.archive.1_1-0-1" in str(error.value)


def test_read_again_only_when_the_archive_files_change(tmp_path: Path) -> None:
    archive, folder = _archive(tmp_path)
    write_archive(folder, 1, archived_commit("20240101000000001"))
    assert archive.completed_writes() == {"20240101000000001"}
    before = archive.storage.requests.snapshot()
    assert archive.completed_writes() == {"20240101000000001"}
    after = archive.storage.requests.snapshot()
    assert {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)} == {
        "list": 1
    }
    write_archive(folder, 2, archived_commit("20240101000000002"))
    assert archive.completed_writes() == {"20240101000000001", "20240101000000002"}


def test_the_archive_folder_property_is_honoured(tmp_path: Path) -> None:
    """The view proves the fixture's first commit archived from .hoodie/history, where
    hoodie.archivelog.folder says Hudi archived it; the default folder holds nothing."""
    uri = copy_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    for suffix in ("commit", "commit.requested", "inflight"):
        (Path(uri) / ".hoodie" / f"{FIRST}.{suffix}").unlink()
    set_property(Path(uri), "hoodie.archivelog.folder", "history")
    write_archive(Path(uri) / ".hoodie" / "history", 1, archived_commit(FIRST))
    table = HoodieTable.open(uri)
    assert table.archive.folder == ".hoodie/history"
    assert FIRST in {f.instant for f in table.view().latest_base_files()}
    assert archive_folder({}) == ".hoodie/archived"
    assert archive_folder({"hoodie.archivelog.folder": ""}) == ".hoodie"


def test_the_view_reads_the_archive_only_for_files_older_than_the_active_timeline(
    tmp_path: Path,
) -> None:
    """An unreadable archive does not matter while every file is on the active timeline,
    and is an error once a file's instant can only be proven committed by it."""
    uri = copy_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    folder = Path(uri) / ".hoodie" / "archived"
    folder.mkdir(exist_ok=True)
    (folder / ".commits_.archive.1_1-0-1").write_bytes(b"garbage")
    assert len(HoodieTable.open(uri).view().latest_base_files()) == 3
    for suffix in ("commit", "commit.requested", "inflight"):
        (Path(uri) / ".hoodie" / f"{FIRST}.{suffix}").unlink()
    with pytest.raises(FailedPreconditionError, match="archived timeline"):
        HoodieTable.open(uri).view().latest_base_files()
