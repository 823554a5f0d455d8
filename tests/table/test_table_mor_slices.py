"""Merge-on-read snapshots: each file group's latest slice (base file and committed log
files) merged as Hudi merges it. The tables Apache Hudi wrote (tests/fixtures/hudi-mor)
compared with hudi-rs reading them, row by row, and with what their SQL did; the ordering
rules on blocks built here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from table.table_testkit import hudi_rs_table
from tidemark.errors import FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.files.merge import merge_slice
from tidemark.table.files.reader import read_snapshot
from tidemark.table.leases.table_lock import changing
from tidemark.table.logfiles.data_blocks import parquet_data_block
from tidemark.table.logfiles.delete_blocks import (
    DELETE_REGARDLESS,
    DeleteRecord,
    OrderingKind,
    OrderingValue,
    delete_block,
)
from tidemark.table.logfiles.framing import LogBlock
from tidemark.table.records.keys import RECORD_KEY

TABLES = [
    "v6_trips_8i1u",
    "v6_trips_8i3d",
    "v6_nonpartitioned",
    "v6_complexkeygen_hivestyle",
    "v6_nonpartitioned_rollback",
    "v8_trips_8i3u1d",
    "v9_txns_simple_nometa",
    "v9_txns_simple_meta",
    "v9_timebasedkeygen_nonhivestyle",
    "v9_nonpartitioned_rollback",
]


def merged_snapshot(table: HoodieTable) -> pa.Table:
    return read_snapshot(table)


def _rows(rows: pa.Table, columns: list[str]) -> list[tuple]:
    """Every row, as sorted values (a key may hold a row in two file groups: Hudi's INSERT
    does not look for the key's group)."""
    return sorted(tuple(map(repr, row.values())) for row in rows.select(columns).to_pylist())


@pytest.mark.parametrize("name", TABLES)
def test_a_merged_snapshot_is_what_hudi_rs_reads(mor_tables: Path, name: str) -> None:
    table = HoodieTable.open(str(mor_tables / name))
    ours = merged_snapshot(table)
    assert ours.num_rows > 0
    columns = [RECORD_KEY, *(n for n in ours.column_names if not n.startswith("_hoodie_"))]
    theirs = hudi_rs_table(str(mor_tables / name))
    assert _rows(ours, columns) == _rows(theirs, columns)


def test_what_the_sql_did_is_what_the_snapshot_holds(mor_tables: Path) -> None:
    updated = merged_snapshot(HoodieTable.open(str(mor_tables / "v6_trips_8i1u")))
    fares = dict(zip(updated["rider"].to_pylist(), updated["fare"].to_pylist(), strict=True))
    assert fares["rider-D"] == 25.0 and fares["rider-A"] == 19.10 and len(fares) == 8
    deleted = merged_snapshot(HoodieTable.open(str(mor_tables / "v6_trips_8i3d")))
    assert sorted(deleted["rider"].to_pylist()) == [
        "rider-E", "rider-F", "rider-G", "rider-I", "rider-J",
    ]  # fmt: skip


def _rows_of(keys: list[str], ts: list[int], value: list[str]) -> pa.Table:
    return pa.table({RECORD_KEY: keys, "ts": pa.array(ts, pa.int64()), "v": value})


SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "t_record",
        "fields": [
            {"name": RECORD_KEY, "type": "string"},
            {"name": "ts", "type": "long"},
            {"name": "v", "type": "string"},
        ],
    }
)
"""A log block's writer schema, meta columns included as Hudi's are (one here)."""


def _upsert(instant: str, rows: pa.Table) -> LogBlock:
    return parquet_data_block(instant, SCHEMA, rows)


BASE = _rows_of(["a", "b", "c"], [5, 5, 5], ["a0", "b0", "c0"])


def _merged(blocks: list[LogBlock], ordering: str | None) -> dict[str, str]:
    rows = merge_slice(BASE, blocks, ordering)
    return dict(zip(rows[RECORD_KEY].to_pylist(), rows["v"].to_pylist(), strict=True))


def test_event_time_ordering_keeps_the_greater_value_and_a_tie_goes_to_the_later() -> None:
    late = _upsert("20240101000000001", _rows_of(["a", "b", "d"], [4, 5, 1], ["a1", "b1", "d1"]))
    assert _merged([late], "ts") == {"a": "a0", "b": "b1", "c": "c0", "d": "d1"}
    assert _merged([late], None) == {"a": "a1", "b": "b1", "c": "c0", "d": "d1"}


def test_a_delete_ordered_below_the_stored_value_keeps_the_row() -> None:
    deletes = [
        DeleteRecord("a", "", OrderingValue(OrderingKind.LONG, 4)),
        DeleteRecord("b", "", OrderingValue(OrderingKind.LONG, 6)),
        DeleteRecord("c", "", DELETE_REGARDLESS),
    ]
    block = delete_block("20240101000000001", deletes)
    assert _merged([block], "ts") == {"a": "a0"}
    assert _merged([block], None) == {}


def test_an_update_after_a_delete_brings_the_key_back() -> None:
    gone = delete_block("20240101000000001", [DeleteRecord("a", "", DELETE_REGARDLESS)])
    back = _upsert("20240101000000002", _rows_of(["a"], [7], ["a2"]))
    assert _merged([gone, back], "ts") == {"a": "a2", "b": "b0", "c": "c0"}


def test_a_lookup_keeps_the_order_of_a_delete_and_updates_past_blocks_without_its_key() -> None:
    gone = delete_block("20240101000000001", [DeleteRecord("a", "", DELETE_REGARDLESS)])
    other = _upsert("20240101000000002", _rows_of(["b"], [6], ["b1"]))
    back = _upsert("20240101000000003", _rows_of(["a"], [7], ["a2"]))
    assert merge_slice(BASE, [gone, other, back], "ts", keys={"a"})["v"].to_pylist() == ["a2"]
    assert merge_slice(BASE, [back, other, gone], "ts", keys={"a"}).num_rows == 0


def test_a_merge_for_some_keys_keeps_only_their_merged_rows() -> None:
    late = _upsert("20240101000000001", _rows_of(["a", "b", "d"], [6, 4, 1], ["a1", "b1", "d1"]))
    gone = delete_block("20240101000000002", [DeleteRecord("c", "", DELETE_REGARDLESS)])
    rows = merge_slice(BASE, [late, gone], "ts", keys={"a", "b", "c", "e"}, by_key=True)
    assert rows[RECORD_KEY].to_pylist() == ["a", "b"]
    assert rows["v"].to_pylist() == ["a1", "b0"]


def test_a_key_the_base_file_holds_twice_is_merged_to_one_row() -> None:
    base = _rows_of(["b", "a", "b", "c"], [5, 5, 7, 5], ["b0", "a0", "b1", "c0"])
    assert merge_slice(base, [], "ts", by_key=True)["v"].to_pylist() == ["a0", "b1", "c0"]
    assert merge_slice(base, [], "ts")["v"].to_pylist() == ["a0", "c0", "b1"]
    later = _upsert("20240101000000001", _rows_of(["c"], [6], ["c1"]))
    assert merge_slice(base, [later], None)["v"].to_pylist() == ["a0", "b1", "c1"]


def test_a_change_that_does_not_handle_merge_on_read_is_refused_before_the_lock(
    mor_tables: Path, tmp_path: Path
) -> None:
    copy = shutil.copytree(mor_tables / "v6_trips_8i1u", tmp_path / "t")
    table = HoodieTable.open(str(copy))
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    with pytest.raises(FailedPreconditionError) as refused, changing(table, "clean"):
        pass
    assert refused.value.field == "hoodie.table.type"
    assert "not supported by clean" in str(refused.value)
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before


def test_a_filter_sees_the_merged_value_not_the_base_files(mor_tables: Path) -> None:
    table = HoodieTable.open(str(mor_tables / "v6_trips_8i1u"))
    rows = read_snapshot(table, filters=[("fare", "=", 25.0)], columns=["rider", "fare"])
    assert rows.to_pylist() == [{"rider": "rider-D", "fare": 25.0}]
    assert read_snapshot(table, filters=[("fare", "=", 33.90)]).num_rows == 0
