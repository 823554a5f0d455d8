"""``tidemark compaction trigger|cancel`` in-process (embedded planner service) and
against a planner service on a loopback port: the policy is stored with the table and
changed in part, a requested plan is cancelled, bad values are one line, exit 2, nothing
changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from table.log_testkit import before_hudi_compaction

from planner.conftest import StartPlanner
from planner.plankit import hoodie_files
from tidemark.cli import main
from tidemark.services.planner.compaction import load_policy
from tidemark.table import HoodieTable
from tidemark.table.maintenance.compaction import TriggerStrategy
from tidemark.table.plans.compaction import pending_compactions


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["compaction", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def v8(mor_tables: Path, tmp_path: Path) -> HoodieTable:
    return before_hudi_compaction(mor_tables, tmp_path)


def test_trigger_is_stored_shown_and_changed_in_part(
    v8: HoodieTable, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = v8.uri
    code, out, _ = run(capsys, "trigger", "--table", uri, "--json")
    assert (code, json.loads(out)) == (0, {"trigger": "on demand", "followed_by_service": True})
    code, out, _ = run(
        capsys,
        "trigger",
        "--table",
        uri,
        "--strategy",
        "NUM_OR_TIME",
        "--max-delta-commits",
        "3",
        "--partitions",
        "list:city=chennai",
    )
    first, second = out.splitlines()
    assert (code, first) == (
        0,
        f"compaction of {uri} is scheduled after 3 deltacommits or 3600 s (NUM_OR_TIME); "
        "slices with logs of at least 0 bytes and 0 files, partitions list:city=chennai, at "
        "most 512000 MB of IO per plan",
    )
    assert "no planner service follows it yet" in second
    settings = load_policy(v8.storage).settings
    assert settings is not None
    assert (settings.strategy, settings.max_delta_commits) == (TriggerStrategy.NUM_OR_TIME, 3)
    code, out, _ = run(capsys, "trigger", "--table", uri, "--log-file-num-threshold", "2", "--json")
    shown = json.loads(out)
    assert (code, shown["strategy"], shown["max_delta_commits"]) == (0, "NUM_OR_TIME", 3)
    assert (shown["log_file_num_threshold"], shown["partitions"]) == (2, "list:city=chennai")
    code, out, _ = run(capsys, "trigger", "--table", uri, "--on-demand")
    assert (code, out) == (0, f"compaction of {uri} is scheduled on demand\n")
    assert load_policy(v8.storage).on_demand


def test_cancel_through_a_service(
    v8: HoodieTable, start_planner: StartPlanner, capsys: pytest.CaptureFixture[str]
) -> None:
    address = start_planner().address
    code, out, _ = run(capsys, "schedule", "--table", v8.uri, "--max-delta-commits", "1")
    instant = out.strip().removeprefix("scheduled compaction ")
    code, out, _ = run(
        capsys, "cancel", "--table", v8.uri, "--instant", instant, "--planner-service", address
    )
    assert (code, out) == (0, f"cancelled compaction {instant}: 3 file groups, 4 log files\n")
    assert pending_compactions(HoodieTable.open(v8.uri)) == []
    code, out, err = run(capsys, "cancel", "--table", v8.uri, "--instant", instant, "--json")
    assert (code, out) == (2, "")
    assert "instant" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["trigger", "--max-delta-commits", "0"], "max_delta_commits"),
        (["trigger", "--max-delta-seconds", "-1"], "max_delta_seconds"),
        (["trigger", "--target-io-mb", "0"], "target_io_mb"),
        (["trigger", "--log-file-num-threshold", "-2"], "log_file_num_threshold"),
        (["trigger", "--partitions", "recent:x"], "partitions"),
        (["trigger", "--partitions", "regex:("], "partitions.regex"),
        (["trigger", "--on-demand", "--max-delta-commits", "3"], "on_demand"),
        (["cancel", "--instant", "yesterday"], "instant"),
    ],
)
def test_bad_values_exit_2_naming_them(
    v8: HoodieTable, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    before = hoodie_files(v8)
    code, _, err = run(capsys, args[0], "--table", v8.uri, *args[1:])
    assert code == 2
    assert says in err
    assert len(err.strip().splitlines()) == 1
    assert hoodie_files(v8) == before


def test_an_unknown_strategy_is_a_usage_error(
    v8: HoodieTable, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["compaction", "trigger", "--table", v8.uri, "--strategy", "SOMETIMES"])
    assert exited.value.code == 2
    assert "invalid choice: 'SOMETIMES'" in capsys.readouterr().err
