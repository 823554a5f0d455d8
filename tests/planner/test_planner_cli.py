"""``tidemark cluster schedule|list|cancel`` in-process (embedded planner service) and
against ``tidemark serve planner``; refusals are one line, exit 2, nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.plankit import hoodie_files, serve_planner
from tidemark.cli import main
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.metadata.actions import ROLLBACK
from tidemark.table.plans.clustering import pending_plans


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["cluster", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_schedule_list_cancel_json(
    small_files: HoodieTable, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = small_files.uri
    code, out, _ = run(
        capsys,
        "schedule",
        "--table",
        uri,
        "--sort-columns",
        "name,score",
        "--layout",
        "zorder",
        "--partitions",
        "list:eu",
        "--target-file-mb",
        "1",
        "--json",
    )
    assert code == 0 and out.count("\n") == 1
    scheduled = json.loads(out)
    (plan,) = pending_plans(HoodieTable.open(uri))
    assert scheduled["instant"] == plan.timestamp
    assert (scheduled["groups"], scheduled["files"], scheduled["bytes"]) == (
        1,
        4,
        plan.plan.size_bytes,
    )
    assert scheduled["layout"] == "zorder" and scheduled["sort_columns"] == ["name", "score"]

    code, out, _ = run(capsys, "schedule", "--table", uri, "--partitions", "list:eu", "--json")
    assert code == 0
    assert json.loads(out) == {
        "instant": None,
        "reason": "0 of the 4 files below the small-file limit are free to cluster, the "
        "others are in a pending plan or a pending write; a group needs two",
    }

    code, out, _ = run(capsys, "list", "--table", uri, "--json")
    assert code == 0 and json.loads(out) == {"plans": [scheduled], "given_up": []}

    code, out, _ = run(capsys, "cancel", "--table", uri, "--instant", plan.timestamp)
    assert code == 0 and out.startswith(f"cancelled clustering plan {plan.timestamp} (rollback ")
    assert HoodieTable.open(uri).timeline.completed(frozenset({ROLLBACK}))
    code, out, _ = run(capsys, "list", "--table", uri)
    assert (code, out) == (0, "no pending clustering plans\n")


def test_against_a_served_planner(
    small_files: HoodieTable, capsys: pytest.CaptureFixture[str]
) -> None:
    service = serve_planner()
    try:
        code, out, _ = run(
            capsys, "schedule", "--table", small_files.uri, "--planner-service", service.address
        )
        assert code == 0
        assert out.startswith("scheduled clustering plan ")
        assert "2 groups, 6 files" in out
    finally:
        service.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sort-columns", "nope"], "sort_columns: no such column 'nope' in the table"),
        (["--target-file-mb", "0"], "options.target_file_bytes: must be > 0, got 0"),
        (["--max-groups", "0"], "options.max_groups: must be > 0, got 0"),
        (["--partitions", "regex:("], "options.partitions.regex: bad regex '('"),
        (["--partitions", "sometimes"], "partitions: 'sometimes' is not all, recent:N"),
        (["--layout", "hilbert"], "options.sort_columns: the hilbert layout needs sort columns"),
    ],
)
def test_bad_schedule_input_is_one_line(
    small_files: HoodieTable, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    before = hoodie_files(small_files)
    code, out, err = run(capsys, "schedule", "--table", small_files.uri, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"tidemark cluster: error: {message}")
    assert hoodie_files(small_files) == before


def test_nothing_to_cluster_takes_no_lock(
    small_files: HoodieTable, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hoodie_files(small_files)
    code, out, _ = run(capsys, "schedule", "--table", small_files.uri, "--partitions", "regex:zzz")
    assert code == 0 and out.startswith("nothing to cluster")
    assert hoodie_files(small_files) == before


def test_a_held_lock_with_no_wait_is_one_line(
    small_files: HoodieTable, capsys: pytest.CaptureFixture[str]
) -> None:
    with StorageLease(small_files.storage, "a long write", lease_s=30):
        before = hoodie_files(small_files)
        code, out, err = run(capsys, "schedule", "--table", small_files.uri, "--lock-wait-s", "0")
        assert hoodie_files(small_files) == before
    assert code == 2 and out == ""
    assert err.startswith("tidemark cluster: error: table: table is locked by 'a long write'")
    assert err.count("\n") == 1


def test_cancel_of_a_commit_is_one_line(
    small_files: HoodieTable, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    commit = small_files.timeline.instants()[0].timestamp
    before = hoodie_files(small_files)
    code, _, err = run(capsys, "cancel", "--table", small_files.uri, "--instant", commit)
    assert code == 2
    assert err == (
        f"tidemark cluster: error: instant: instant {commit} is a completed commit, not a "
        "pending clustering plan\n"
    )
    assert hoodie_files(small_files) == before
    code, _, err = run(capsys, "list", "--table", str(tmp_path / "missing"))
    assert code == 2 and "not a Hudi table" in err and err.count("\n") == 1


def test_trigger_policy_set_and_shown(
    small_files: HoodieTable, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = small_files.uri
    code, out, _ = run(capsys, "trigger", "--table", uri, "--json")
    assert code == 0 and json.loads(out)["trigger"] == "on demand"
    code, out, _ = run(
        capsys, "trigger", "--table", uri, "--every-commits", "4", "--sort-columns", "name"
    )
    first, second = out.splitlines()
    assert (code, first) == (0, f"clustering of {uri} is scheduled after every 4 commits")
    assert "no planner service follows it yet" in second
    code, out, _ = run(capsys, "trigger", "--table", uri, "--json")
    shown = json.loads(out)
    assert (shown["every_n_commits"], shown["sort_columns"]) == (4, ["name"])
    assert shown["followed_by_service"] is False
    before = hoodie_files(small_files)
    code, _, err = run(capsys, "trigger", "--table", uri, "--every-seconds", "0")
    assert code == 2
    assert err == "tidemark cluster: error: policy.every_seconds: must be > 0, got 0\n"
    assert hoodie_files(small_files) == before
