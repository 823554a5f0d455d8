"""The leftover clean-up reads only rollbacks newer than its watermark, and moves the
watermark past a rollback once a scan ran a grace period after it."""

from __future__ import annotations

from table.table_testkit import Writer
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name, new_file_id, write_token
from tidemark.table.metadata.actions import COMMIT, ROLLBACK
from tidemark.table.metadata.rollback import InstantInfo, RollbackMetadata
from tidemark.table.timeline.instant import instant_time_ago, new_instant_time
from tidemark.table.writes.commit import (
    LATE_FILE_GRACE_S,
    LEFTOVERS_WATERMARK,
    remove_rolled_back_leftovers,
)

OLD_WRITE = "20200101000000000"
OLD_ROLLBACK = "20200101000000500"


def _record_rollback(table: HoodieTable, rollback: str, undone: str, partition: str) -> None:
    timeline = table.timeline
    timeline.create_requested(rollback, ROLLBACK)
    timeline.transition_inflight(rollback, ROLLBACK)
    metadata = RollbackMetadata(rollback, 1, [InstantInfo(undone, COMMIT)], {partition: []})
    timeline.complete(rollback, ROLLBACK, metadata.to_avro())


def _late_file(storage: Storage, partition: str, instant: str) -> str:
    """A base file of a rolled-back ``instant`` published after its rollback."""
    path = f"{partition}/{base_file_name(new_file_id(), write_token(0, 1, 0), instant)}"
    storage.write(path, b"PAR1")
    return path


def test_a_rollback_older_than_the_grace_period_is_read_once(people: Writer) -> None:
    people_table = people.table
    storage = people_table.storage
    _record_rollback(people_table, OLD_ROLLBACK, OLD_WRITE, "eu")
    recent_write = new_instant_time(after=OLD_ROLLBACK)
    recent_rollback = new_instant_time(after=recent_write)
    _record_rollback(people_table, recent_rollback, recent_write, "us")
    assert instant_time_ago(LATE_FILE_GRACE_S) < recent_rollback
    first = [_late_file(storage, "eu", OLD_WRITE), _late_file(storage, "us", recent_write)]

    assert sorted(remove_rolled_back_leftovers(people_table)) == sorted(first)
    assert storage.read(LEFTOVERS_WATERMARK) == OLD_ROLLBACK.encode()

    ignored = _late_file(storage, "eu", OLD_WRITE)
    late = _late_file(storage, "us", recent_write)
    storage.requests.reset()
    assert remove_rolled_back_leftovers(people_table) == [late]
    reads = storage.requests.snapshot()["get"]
    assert reads == 2, "the watermark and the recent rollback, not the old one"
    assert storage.exists(ignored)
    assert storage.read(LEFTOVERS_WATERMARK) == OLD_ROLLBACK.encode()


def test_without_rollbacks_nothing_is_read_but_the_watermark(people: Writer) -> None:
    people_table = people.table
    storage = people_table.storage
    storage.requests.reset()
    assert remove_rolled_back_leftovers(people_table) == []
    assert storage.requests.snapshot().get("get") == 1
    assert not storage.exists(LEFTOVERS_WATERMARK)
