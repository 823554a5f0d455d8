"""A table's history (issue 53): every instant with its requested and completion times and
what it wrote, the archived ones too when asked, on each table version."""

from __future__ import annotations

import pytest

from table.table_testkit import Writer, people_config, rows
from tidemark.retention import RetentionSettings, run_retention
from tidemark.table import HoodieTable
from tidemark.table.maintenance.archival import ArchiveSettings
from tidemark.table.maintenance.clean_plan import CleanSettings
from tidemark.table.timeline.history import table_history

RETENTION = RetentionSettings(CleanSettings(retain_commits=2), ArchiveSettings(3, 5))


@pytest.mark.parametrize("version", [6, 8, 9])
def test_history_lists_active_and_archived_instants(table_uri: str, version: int) -> None:
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=version)))
    writes = []
    for n in range(8):
        writes.append(people.commit(rows((1, f"v{n}", "eu", float(n)), (n + 2, "x", "us", 0.0))))
        run_retention(HoodieTable.open(table_uri), RETENTION)
    table = HoodieTable.open(table_uri)
    active = table_history(table)
    everything = table_history(table, archived=True)
    archived = [e for e in everything if e.archived]
    assert archived and everything == archived + active
    assert not any(e.archived for e in active)
    commits = [e for e in everything if e.action == "commit"]
    assert [e.requested for e in commits] == writes  # none lost, none twice
    assert {e.action for e in everything} == {"commit", "clean"}
    assert all(e.state == "COMPLETED" and e.completed for e in everything)
    done = {i.timestamp: i.completed_at for i in table.timeline.completed()}
    for entry in active:
        assert entry.completed == done[entry.requested]
        if version == 6:
            assert entry.completed == entry.requested  # version 6 records no completion time
        else:
            assert entry.completed > entry.requested
    for entry in (e for e in active if e.action == "commit"):
        # Hudi's numWrites: the rows of the files written (us's file group grows by one)
        n = writes.index(entry.requested)
        assert (entry.operation, entry.rows_written, entry.files_written) == ("UPSERT", n + 2, 2)
    assert all(e.operation is None and e.rows_written is None for e in archived)
    for entry in (e for e in active if e.action == "clean"):
        assert (entry.operation, entry.rows_written, entry.files_written) == (None, None, None)


def test_a_pending_write_has_no_completion_time(table_uri: str) -> None:
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=9)))
    people.commit(rows((1, "a", "eu", 0.0)))
    pending = people.begin()
    (*_, last) = table_history(HoodieTable.open(table_uri))
    assert (last.requested, last.completed, last.state) == (pending, None, "INFLIGHT")
    assert last.rows_written is None
