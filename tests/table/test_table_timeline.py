"""Instant times, instant file names and timeline state transitions (local and S3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from table.table_testkit import FIXTURES, people_config
from tidemark.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT, REPLACE_COMMIT
from tidemark.table.timeline.instant import (
    Instant,
    State,
    new_instant_time,
    parse_instant_file_name,
    validate_instant_time,
)
from tidemark.table.timeline.layout1 import Timeline


def test_new_instant_times_are_strictly_increasing_and_after_the_floor() -> None:
    issued = [new_instant_time() for _ in range(2000)]
    assert issued == sorted(issued)
    assert len(set(issued)) == len(issued)
    assert all(len(t) == 17 and t.isdigit() for t in issued)
    floor = issued[-1][:-3] + "999"
    after_floor = new_instant_time(after=floor)
    assert after_floor > floor
    assert new_instant_time() > after_floor


@pytest.mark.parametrize(
    "value",
    [
        "",
        "2024041817280226",
        "202404181728022620",
        "2024041817280226x",
        "20241318172802262",
        "20240230120000000",
    ],
)
def test_invalid_instant_times_are_rejected(value: str) -> None:
    with pytest.raises(InvalidArgumentError) as error:
        validate_instant_time(value, field="instant")
    assert error.value.field == "instant"


def test_instant_file_names_round_trip_on_hudi_written_timeline() -> None:
    names = sorted(
        p.name
        for p in (FIXTURES / "v6_simplekeygen_nonhivestyle_overwritetable" / ".hoodie").iterdir()
    )
    parsed = {name: parse_instant_file_name(name) for name in names}
    assert parsed["hoodie.properties"] is None
    assert parsed["20240707001301554.inflight"] == Instant(
        "20240707001301554", COMMIT, State.INFLIGHT
    )
    assert parsed["20240707001303088.replacecommit.requested"] == Instant(
        "20240707001303088", REPLACE_COMMIT, State.REQUESTED
    )
    for name, instant in parsed.items():
        if instant is not None:
            assert instant.file_name == name


def test_timeline_of_fixture() -> None:
    timeline = Timeline(open_storage(str(FIXTURES / "v6_simplekeygen_nonhivestyle_overwritetable")))
    assert [(i.timestamp, i.action) for i in timeline.completed()] == [
        ("20240707001301554", COMMIT),
        ("20240707001302376", COMMIT),
        ("20240707001303088", REPLACE_COMMIT),
    ]
    assert timeline.pending() == []
    last = timeline.last_completed()
    assert last is not None
    metadata = timeline.read_metadata(last)
    assert metadata.partition_to_replace_file_ids["20"] == (
        "88163884-fef0-4aab-865d-c72327a8a1d5-0",
    )


def test_lifecycle_and_refusals(any_table_uri: str) -> None:
    table = HoodieTable.create(any_table_uri, people_config())
    timeline = table.timeline
    instant = new_instant_time()
    with pytest.raises(NotFoundError):
        timeline.transition_inflight(instant, COMMIT)
    timeline.create_requested(instant, COMMIT)
    with pytest.raises(AlreadyExistsError):
        timeline.create_requested(instant, COMMIT)
    with pytest.raises(FailedPreconditionError):
        timeline.complete(instant, COMMIT, b"{}")
    timeline.transition_inflight(instant, COMMIT)
    assert [i.state for i in Timeline(table.storage).instants()] == [State.INFLIGHT]
    assert table.storage.exists(f".hoodie/{instant}.inflight")
    timeline.complete(instant, COMMIT, b"{}")
    with pytest.raises(FailedPreconditionError):
        timeline.complete(instant, COMMIT, b'{"other": 1}')
    assert table.storage.read(f".hoodie/{instant}.commit") == b"{}"
    fresh = Timeline(table.storage)
    assert fresh.is_completed(instant)
    assert fresh.last_completed() == Instant(instant, COMMIT, State.COMPLETED)
    with pytest.raises(FailedPreconditionError) as older:
        timeline.create_requested("20000101000000000", COMMIT)
    assert older.value.field == "instant"


def test_completed_file_is_never_overwritten(table_uri: str) -> None:
    table = HoodieTable.create(table_uri, people_config())
    instant = new_instant_time()
    table.timeline.create_requested(instant, COMMIT)
    table.timeline.transition_inflight(instant, COMMIT)
    table.storage.write(f".hoodie/{instant}.commit", b"first")
    table.timeline.reload()
    with pytest.raises(FailedPreconditionError):
        table.timeline.complete(instant, COMMIT, b"second")
    assert table.storage.read(f".hoodie/{instant}.commit") == b"first"


def test_bad_instant_or_action_writes_nothing(tmp_path: Path) -> None:
    table = HoodieTable.create(str(tmp_path / "t"), people_config())
    with pytest.raises(InvalidArgumentError):
        table.timeline.create_requested("not-an-instant", COMMIT)
    with pytest.raises(InvalidArgumentError) as action:
        table.timeline.create_requested(new_instant_time(), "explode")
    assert action.value.field == "action"
    assert [info.path for info in table.storage.list(".hoodie/")] == [".hoodie/hoodie.properties"]
