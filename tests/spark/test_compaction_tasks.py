"""The slices a compaction run reads are the ones its plan names, found among every
committed slice of a file group: a group compacted before keeps its older slice's base
file until the cleaner removes it, and the run must take the planned one whatever the
listing order (no SparkSession: ``operation_tasks`` reads the table only)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tidemark.jobs.compaction import operation_tasks
from tidemark.table import HoodieTable
from tidemark.table.leases.table_lock import changing
from tidemark.table.plans.compaction import (
    CompactionOperation,
    CompactionPlan,
    pending_compactions,
    save_plan,
)

pytestmark = pytest.mark.spark


def test_a_group_compacted_before_runs_from_its_planned_base(
    mor_tables: Path, tmp_path: Path
) -> None:
    """v8_trips_8i3u1d's chennai group has Hudi's compacted base file and, still kept,
    the base file before it, which the listing gives last."""
    root = shutil.copytree(mor_tables / "v8_trips_8i3u1d", tmp_path / "v8")
    table = HoodieTable.open(str(root))
    [latest] = [s for s in table.view().latest_file_slices() if s.partition_path == "city=chennai"]
    assert latest.base is not None
    bases = sorted(
        b.path for b in table.view().committed_base_files() if b.file_id == latest.file_id
    )
    assert len(bases) == 2 and bases[-1] != latest.base.path
    with changing(table, "compaction", merge_on_read=True):
        save_plan(table, CompactionPlan((CompactionOperation.of_slice(latest),)))
    [pending] = pending_compactions(table)
    tasks, _ = operation_tasks(table, pending)
    assert [task.piece.base for task in tasks] == [latest.base]
