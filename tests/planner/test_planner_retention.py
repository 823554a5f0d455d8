"""The planner cleans and archives its tables: on request, and by a retention policy
after every N commits, with the table read exactly by hudi-rs afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from table.table_testkit import Writer, archived_completed, hudi_rs_rows, people_config, rows

from planner.conftest import StartPlanner
from planner.test_planner_triggers import wait_for
from tidemark.clients.planner import PlannerClient
from tidemark.errors import InvalidArgumentError
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import CLEAN


def cleans(uri: str) -> int:
    """Completed cleans on the active and the archived timeline (the LSM history on
    versions 8 and 9)."""
    table = HoodieTable.open(uri)
    archived = [action for _, action in archived_completed(table) if action == CLEAN]
    return len(table.timeline.completed(frozenset({CLEAN}))) + len(archived)


@pytest.mark.parametrize("version", [6, 8, 9])
def test_retention_on_request_and_after_every_n_commits(
    start_planner: StartPlanner, tmp_path: Path, version: int
) -> None:
    config = people_config(table_version=version)
    people = Writer(HoodieTable.create(str(tmp_path / "people"), config))
    uri = people.table.uri
    for n in range(4):
        people.commit(rows((1, f"v{n}", "eu", float(n))))
    planner = start_planner()
    policy = pb.RetentionPolicy(retain_commits=2, keep_min_commits=3, keep_max_commits=5)
    saved = planner.set_retention_policy(uri, policy)
    assert saved.WhichOneof("trigger") == "on_demand" and saved.retain_commits == 2

    ran = planner.run_retention(uri)

    assert ran.files_deleted == 1 and len(ran.clean_instant_times) == 1
    assert ran.archived_instants == []
    assert hudi_rs_rows(uri)[0]["name"] == "v3"

    policy.every_n_commits = 2
    planner.set_retention_policy(uri, policy)
    assert planner.get_retention_policy(uri).every_n_commits == 2
    people.commit(rows((1, "v4", "eu", 4.0)))
    people.commit(rows((1, "v5", "eu", 5.0)))
    wait_for(lambda: cleans(uri) == 2, "the triggered clean")
    for n in range(6, 9):
        people.commit(rows((1, f"v{n}", "eu", float(n))))
    wait_for(lambda: cleans(uri) == 3, "the second triggered clean")
    assert HoodieTable.open(uri).archive.completed_writes()  # archived past keep_max
    assert hudi_rs_rows(uri)[0]["name"] == "v8"
    # a third clean ran after v7 or v8: it kept the slice visible at its earliest commit to
    # retain and the two retained ones, and v8 if it came later
    assert len(list(Path(uri, "eu").glob("*.parquet"))) in (3, 4)


def test_bad_retention_policies_are_refused(planner: PlannerClient, tmp_path: Path) -> None:
    people = Writer(HoodieTable.create(str(tmp_path / "people"), people_config()))
    people.commit(rows((1, "a", "eu", 0.0)))
    with pytest.raises(InvalidArgumentError, match=r"policy\.keep_min"):
        planner.set_retention_policy(
            people.table.uri, pb.RetentionPolicy(retain_commits=20, keep_min_commits=20)
        )
    with pytest.raises(InvalidArgumentError, match=r"policy\.keep_max"):
        planner.set_retention_policy(
            people.table.uri, pb.RetentionPolicy(keep_min_commits=20, keep_max_commits=20)
        )
