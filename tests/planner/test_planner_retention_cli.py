"""``tidemark retention trigger|run`` in-process (embedded planner service) and against a
planner service on a loopback port: the policy is stored with the table, a run really
cleans and archives, bad values are one line, exit 2, nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.conftest import StartPlanner
from planner.plankit import hoodie_files, new_table, people
from tidemark.cli import main
from tidemark.services.planner.retention import RetentionPolicy, load_policy
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import CLEAN, WRITE_ACTIONS
from tidemark.testing.tables import rewrite_file_groups

ROWS = 5


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()  # the log lines of the commits made before
    code = main(["retention", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def upserted(root: Path, commits: int) -> HoodieTable:
    """One file group in ``eu`` with a slice per commit."""
    table = new_table(root, {"eu": [ROWS]})
    for _ in range(commits - 1):
        [latest] = table.view().latest_base_files()
        rewrite_file_groups(table, [(latest, people(1, ROWS, "eu"))])
    return table


def slices(table: HoodieTable) -> int:
    return len(list(Path(table.uri, "eu").glob("*.parquet")))


def test_trigger_is_stored_shown_and_changed_in_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = upserted(tmp_path, 1)
    uri = table.uri
    code, out, _ = run(capsys, "trigger", "--table", uri, "--json")
    assert code == 0
    assert json.loads(out) == {
        "trigger": "on demand",
        "every_n_commits": 0,
        "every_seconds": 0,
        "retain_commits": 10,
        "keep_min_commits": 20,
        "keep_max_commits": 30,
        "followed_by_service": True,
    }
    code, out, _ = run(
        capsys, "trigger", "--table", uri, "--every-commits", "4", "--retain-commits", "2"
    )
    first, second = out.splitlines()
    assert (code, first) == (
        0,
        f"cleaning and archival of {uri} is scheduled after every 4 commits: snapshots of "
        "the last 2 commits stay readable, 20 to 30 completed writes active",
    )
    assert "no planner service follows it yet" in second
    assert load_policy(table.storage) == RetentionPolicy(every_n_commits=4, retain_commits=2)

    code, out, _ = run(capsys, "trigger", "--table", uri, "--keep-max-commits", "40", "--json")
    shown = json.loads(out)
    assert (code, shown["trigger"], shown["followed_by_service"]) == (
        0,
        "after every 4 commits",
        False,
    )
    assert load_policy(table.storage) == RetentionPolicy(
        every_n_commits=4, retain_commits=2, keep_max_commits=40
    )
    code, out, _ = run(capsys, "trigger", "--table", uri, "--on-demand")
    assert (code, out.count("\n")) == (0, 1)
    assert load_policy(table.storage).every_n_commits == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--every-commits", "0"], "policy.every_n_commits: must be > 0, got 0"),
        (["--every-seconds", "-5"], "policy.every_seconds: must be > 0, got -5"),
        (["--retain-commits", "0"], "policy.retain_commits: must be > 0, got 0"),
        (
            ["--retain-commits", "20"],
            "policy.keep_min_commits: keep_min (20) must be greater than the cleaner's "
            "retained commits (20)",
        ),
        (
            ["--keep-min-commits", "30"],
            "policy.keep_max_commits: keep_max (30) must be greater than keep_min (30)",
        ),
    ],
)
def test_bad_values_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    table = upserted(tmp_path, 1)
    before = hoodie_files(table)
    code, out, err = run(capsys, "trigger", "--table", table.uri, *args)
    assert (code, out, err) == (2, "", f"tidemark retention: error: {message}\n")
    assert hoodie_files(table) == before


def test_run_cleans_and_archives_through_a_served_planner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], start_planner: StartPlanner
) -> None:
    table = upserted(tmp_path, 7)
    assert slices(table) == 7
    address = ["--table", table.uri, "--planner-service", start_planner().address]
    code, out, _ = run(
        capsys,
        "trigger",
        *address,
        "--every-seconds",
        "3600",
        "--retain-commits",
        "2",
        "--keep-min-commits",
        "3",
        "--keep-max-commits",
        "5",
        "--json",
    )
    assert code == 0 and json.loads(out)["followed_by_service"] is True
    assert load_policy(table.storage).keep_max_commits == 5

    code, out, _ = run(capsys, "run", *address, "--json")

    assert code == 0 and out.count("\n") == 1
    result = json.loads(out)
    table = HoodieTable.open(table.uri)
    assert [i.timestamp for i in table.timeline.completed(frozenset({CLEAN}))] == result[
        "clean_instants"
    ]
    assert result["files_deleted"] == 4 and slices(table) == 3
    writes = sorted(table.archive.completed_writes())
    assert len(writes) == 4
    assert [f"{t}.commit" for t in writes] == result["archived_instants"]
    retained = table.timeline.completed(WRITE_ACTIONS)[-2]
    assert result["earliest_readable_instant"] == retained.timestamp


def test_run_embedded_says_what_it_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = upserted(tmp_path, 3)
    code, out, _ = run(capsys, "trigger", "--table", table.uri, "--retain-commits", "1")
    assert code == 0
    code, out, _ = run(capsys, "run", "--table", table.uri)
    [clean] = HoodieTable.open(table.uri).timeline.completed(frozenset({CLEAN}))
    assert code == 0
    assert out.splitlines()[0].startswith(f"deleted 1 files in clean {clean.timestamp}; ")
    assert out.splitlines()[1] == "archived 0 instants"
    assert slices(table) == 2
    code, out, _ = run(capsys, "run", "--table", table.uri)
    assert out.startswith("deleted 0 files; ") and slices(table) == 2
