"""What refuses an index build before Spark starts or the table is touched
(``spark_jobs.index_build.check_build``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from table.table_testkit import Writer, file_tree, people_config, rows

from tidemark.errors import FailedPreconditionError
from tidemark.jobs.index_build import check_build
from tidemark.table import HoodieTable
from tidemark.table.leases.table_lock import changing
from tidemark.table.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    save_plan,
)


def _schedule_plan(table: HoodieTable) -> str:
    (latest,) = table.view().latest_base_files()
    group = ClusteringGroup((SliceInfo("eu", latest.file_id, latest.path, latest.size),), 1)
    with changing(table, "test"):
        return save_plan(
            table, ClusteringPlan((group,), ClusteringStrategy((), "linear", 1))
        ).timestamp


def test_a_plan_pending_since_before_the_latest_commit_is_named(tmp_path: Path) -> None:
    """The plan's changes, staged under its older instant when it runs, would read as
    already in a base built as of the later commit."""
    people = Writer(HoodieTable.create(str(tmp_path / "t"), people_config()))
    people.commit(rows((1, "a", "eu", 0.0)))
    plan = _schedule_plan(HoodieTable.open(people.table.uri))
    check_build(HoodieTable.open(people.table.uri), rebuild=False)  # newest: built past it
    people.commit(rows((2, "b", "us", 0.0)))
    before = file_tree(tmp_path / "t")
    with pytest.raises(FailedPreconditionError, match=f"clustering plan {plan} .* pending"):
        check_build(HoodieTable.open(people.table.uri), rebuild=False)
    assert file_tree(tmp_path / "t") == before
