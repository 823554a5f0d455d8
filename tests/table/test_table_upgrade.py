"""``tidemark upgrade``: version 6 tables move to 8 or 9 in place, hudi-rs reads the same
rows after as before, time travel keeps its answers, and a kill at any step leaves a
table that reads the same and that the next upgrade finishes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from table.hudi_archive import archived_commit, write_archive
from table.table_testkit import (
    FIXTURE_NAMES,
    Writer,
    copy_fixture,
    file_tree,
    hudi_rs_rows,
    set_property,
    sorted_rows,
)
from tidemark.cli import main
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.properties.config import read_properties
from tidemark.table.timeline.instant import parse_instant_file_name
from tidemark.testing.leases import outlive_lease

FIXTURE = "v6_simplekeygen_nonhivestyle"
FIRST, SECOND = "20240418172802262", "20240418172804498"
UPGRADE = [sys.executable, "-m", "tidemark.cli", "upgrade"]


def snapshot(uri: str, as_of: str | None = None) -> list[dict[str, object]]:
    return sorted_rows(read_snapshot(HoodieTable.open(uri), as_of=as_of))


def layout_one_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / ".hoodie").iterdir() if parse_instant_file_name(p.name))


def upgrade(root: Path, to: int, *extra: str) -> int:
    return main(["upgrade", "--table", str(root), "--to", str(to), *extra])


@pytest.mark.parametrize("to", [8, 9])
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_version_6_fixture_upgrades_with_the_same_rows(
    name: str, to: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = copy_fixture(name, tmp_path)
    root = Path(uri)
    before = HoodieTable.open(uri).timeline.completed()
    ours, theirs = snapshot(uri), hudi_rs_rows(uri)
    back_then = {i.timestamp: snapshot(uri, i.timestamp) for i in before}
    assert upgrade(root, to) == 0
    assert f"to {to}: {len(before)} instants" in capsys.readouterr().out
    props = read_properties(HoodieTable.open(uri).storage)
    assert (props["hoodie.table.version"], props["hoodie.timeline.layout.version"]) == (
        str(to),
        "2",
    )
    assert props["hoodie.table.initial.version"] == "6"
    assert props["hoodie.record.merge.mode"] == "COMMIT_TIME_ORDERING"
    table = HoodieTable.open(uri)
    after = table.timeline.completed()
    assert [(i.timestamp, i.action) for i in after] == [(i.timestamp, i.action) for i in before]
    assert all(i.completion_time == i.timestamp for i in after)
    assert layout_one_files(root) == []
    assert snapshot(uri) == ours
    assert hudi_rs_rows(uri) == theirs
    for instant, expected in back_then.items():
        assert snapshot(uri, instant) == expected


def test_an_upgraded_table_takes_writes_read_by_hudi_rs(tmp_path: Path) -> None:
    uri = copy_fixture(FIXTURE, tmp_path)
    assert upgrade(Path(uri), 9) == 0
    table = HoodieTable.open(uri)
    schema = table.current_avro_schema()
    assert schema
    writer = Writer(table)
    instant = writer.begin()
    data = read_snapshot(HoodieTable.open(uri), record_keys={"2"}).drop_columns(
        [c for c in read_snapshot(HoodieTable.open(uri)).column_names if c.startswith("_hoodie_")]
    )
    data = data.set_column(data.schema.get_field_index("name"), "name", [["Bobby"]])
    writer.finish(instant, writer.write_files(instant, data), data.schema)
    done = HoodieTable.open(uri).timeline.find(instant)
    assert done.completion_time is not None and done.completion_time > instant
    assert sorted_rows(read_snapshot(HoodieTable.open(uri))) == hudi_rs_rows(uri)
    assert read_snapshot(HoodieTable.open(uri), record_keys={"2"}).column("name").to_pylist() == [
        "Bobby"
    ]


def test_archived_instants_move_to_the_lsm_history(tmp_path: Path) -> None:
    """The fixture's first commit, archived the way Hudi 0.14 does, stays committed."""
    uri = copy_fixture(FIXTURE, tmp_path)
    root = Path(uri)
    for suffix in ("commit", "commit.requested", "inflight"):
        (root / ".hoodie" / f"{FIRST}.{suffix}").unlink()
    write_archive(root / ".hoodie" / "archived", 1, archived_commit(FIRST))
    ours = snapshot(uri)
    assert FIRST in {f.instant for f in HoodieTable.open(uri).view().latest_base_files()}
    assert upgrade(root, 8) == 0
    table = HoodieTable.open(uri)
    assert table.archive.completed_writes() == {FIRST}
    assert [i.timestamp for i in table.timeline.completed()] == [SECOND]
    assert not list(root.glob(".hoodie/archived/.commits_*"))
    assert snapshot(uri) == ours
    assert FIRST in {f.instant for f in table.view().latest_base_files()}


def _refused(root: Path, to: int, capsys: pytest.CaptureFixture[str], message: str) -> None:
    before = file_tree(root)
    assert upgrade(root, to) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert file_tree(root) == before


def test_downgrades_and_other_starting_versions_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(copy_fixture(FIXTURE, tmp_path))
    assert upgrade(root, 9) == 0
    capsys.readouterr()
    _refused(root, 8, capsys, "to: the table is at version 9: Tidemark never downgrades")
    assert upgrade(root, 9) == 0
    assert "the table is at version 9" in capsys.readouterr().out


def test_pending_instants_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = copy_fixture(FIXTURE, tmp_path)
    writer = Writer(HoodieTable.open(uri))
    pending = writer.begin()
    _refused(Path(uri), 8, capsys, f"commit {pending} is inflight")


@pytest.mark.parametrize(
    "point", ["upgrade.timeline_written", "upgrade.history_written", "upgrade.properties_written"]
)
def test_a_killed_upgrade_reads_the_same_and_the_next_one_finishes(
    point: str, tmp_path: Path
) -> None:
    uri = copy_fixture(FIXTURE, tmp_path)
    root = Path(uri)
    write_archive(root / ".hoodie" / "archived", 1, archived_commit("20240101000000000"))
    ours, theirs = snapshot(uri), hudi_rs_rows(uri)
    killed = subprocess.run(
        [*UPGRADE, "--table", uri, "--to", "8"],
        env={**os.environ, EXIT_AT_ENV: point},
        capture_output=True,
        timeout=300,  # a hang guard: a child at load 70 took over 120 s
        check=False,
    )
    assert killed.returncode == EXIT_CODE, killed.stderr.decode()[-2000:]
    version = read_properties(HoodieTable.open(uri).storage)["hoodie.table.version"]
    assert version == ("8" if point == "upgrade.properties_written" else "6")
    assert snapshot(uri) == ours
    assert hudi_rs_rows(uri) == theirs
    outlive_lease(open_storage(uri))
    assert upgrade(root, 8, "--lock-wait-s", "0") == 0
    assert layout_one_files(root) == []
    assert [i.timestamp for i in HoodieTable.open(uri).timeline.completed()] == [FIRST, SECOND]
    assert snapshot(uri) == ours
    assert hudi_rs_rows(uri) == theirs


def test_a_payload_without_a_merge_mode_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(copy_fixture(FIXTURE, tmp_path))
    set_property(root, "hoodie.compaction.payload.class", "com.example.MyPayload")
    _refused(root, 8, capsys, "hoodie.compaction.payload.class: value 'com.example.MyPayload'")
