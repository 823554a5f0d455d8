"""Block contents against what each fixture's SQL did, and the builders against Hudi's own
blocks: rebuilt from their decoded contents, they are Hudi's bytes."""

from __future__ import annotations

import datetime as dt
import struct
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from table.log_testkit import MOR_NAMES, log_paths, table_blocks
from tidemark.errors import DataLossError, InvalidArgumentError
from tidemark.table.logfiles.command_blocks import rollback_block, rolled_back_instant
from tidemark.table.logfiles.data_blocks import (
    MENTIONED_AT_MOST,
    arrow_records,
    avro_data_block,
    avro_records,
    data_block_table,
    parquet_data_block,
)
from tidemark.table.logfiles.delete_blocks import (
    DELETE_REGARDLESS,
    DeleteRecord,
    OrderingKind,
    OrderingValue,
    delete_block,
    deleted_records,
)
from tidemark.table.logfiles.framing import (
    BlockType,
    HeaderKey,
    LogBlock,
    encode_block,
    read_blocks,
)
from tidemark.table.records.schema import arrow_to_avro_schema

RIDERS = {
    "rider-A": "334e26e9-8355-45cc-97c6-c31daf0df330",
    "rider-C": "e96c4396-3fad-413a-a942-4cb36106d721",
    "rider-D": "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
    "rider-F": "e3cf430c-889d-4015-bc98-59bdce1e530c",
    "rider-G": "7a84095f-737f-40bc-b62f-6b69664712d2",
    "rider-J": "c8abbe79-8d89-47ea-b4ce-4d224bae5bfa",
}
INSTANT = "20250331030645735"
SCHEMA = (
    '{"type":"record","name":"t_record","namespace":"hoodie.t","fields":['
    '{"name":"_hoodie_record_key","type":["null","string"],"default":null},'
    '{"name":"id","type":["null","long"],"default":null},'
    '{"name":"amount","type":["null",{"type":"fixed","name":"fixed","namespace":'
    '"hoodie.t.t_record.amount","size":7,"logicalType":"decimal","precision":15,"scale":2}],'
    '"default":null},'
    '{"name":"at","type":["null",{"type":"long","logicalType":"timestamp-micros"}],'
    '"default":null},'
    '{"name":"day","type":["null",{"type":"int","logicalType":"date"}],"default":null},'
    '{"name":"tags","type":["null",{"type":"array","items":["null","string"]}],'
    '"default":null}]}'
)
RECORDS: list[dict[str, Any]] = [
    {
        "_hoodie_record_key": "k1",
        "id": 1,
        "amount": Decimal("1250.05"),
        "at": dt.datetime(2024, 1, 15, 10, 30, 0, 1, tzinfo=dt.UTC),
        "day": dt.date(2024, 1, 15),
        "tags": ["a", None],
    },
    {"_hoodie_record_key": "k2", "id": None, "amount": None, "at": None, "day": None, "tags": []},
]


def blocks_by_type(table: Path) -> list[tuple[str, LogBlock]]:
    """(partition, block) of every data log block, in file-name order."""
    return [
        (path.rpartition("/")[0], found)
        for path, blocks in sorted(table_blocks(table).items())
        for found in blocks
    ]


def test_v6_avro_block_holds_the_update(mor_tables: Path) -> None:
    """UPDATE ... SET fare = 25.0 WHERE rider = 'rider-D'."""
    [(partition, found)] = blocks_by_type(mor_tables / "v6_trips_8i1u")
    assert found.block_type == BlockType.AVRO_DATA
    [record] = avro_records(found)
    assert (record["rider"], record["fare"], record["uuid"]) == ("rider-D", 25.0, RIDERS["rider-D"])
    assert record["_hoodie_record_key"] == RIDERS["rider-D"]
    assert record["_hoodie_partition_path"] == partition == "city=san_francisco"
    assert record["_hoodie_commit_time"] == found.instant == INSTANT


def test_v6_delete_block_holds_the_deleted_keys(mor_tables: Path) -> None:
    """DELETE ... WHERE rider in ('rider-A', 'rider-C', 'rider-D')."""
    [(_, found)] = blocks_by_type(mor_tables / "v6_trips_8i3d")
    deletes = deleted_records(found)
    assert sorted(deletes, key=lambda d: d.record_key) == sorted(
        (DeleteRecord(RIDERS[r], "city=san_francisco") for r in ("rider-A", "rider-C", "rider-D")),
        key=lambda d: d.record_key,
    )
    assert {d.ordering for d in deletes} == {OrderingValue(OrderingKind.INT, 0)}


def test_v8_blocks_follow_the_updates_and_deletes(mor_tables: Path) -> None:
    """fare = 0 for rider-A; delete rider-F; fare = 0 for rider-J, then delete it; fare = 0
    for rider-G: one deltacommit each, in that order."""
    table = mor_tables / "v8_trips_8i3u1d"
    found = sorted(blocks_by_type(table), key=lambda pair: pair[1].instant)
    seen = []
    for partition, current in found:
        if current.block_type == BlockType.AVRO_DATA:
            [record] = avro_records(current)
            assert record["fare"] == 0.0
            seen.append(("update", record["rider"], partition))
        else:
            [deleted] = deleted_records(current)
            assert deleted.ordering == DELETE_REGARDLESS
            rider = next(r for r, key in RIDERS.items() if key == deleted.record_key)
            assert deleted.partition_path == partition
            seen.append(("delete", rider, partition))
    assert seen == [
        ("update", "rider-A", "city=san_francisco"),
        ("delete", "rider-F", "city=sao_paulo"),
        ("update", "rider-J", "city=chennai"),
        ("delete", "rider-J", "city=chennai"),
        ("update", "rider-G", "city=sao_paulo"),
    ]


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("v9_txns_simple_nometa", "{}"),
        ("v9_txns_simple_meta", "{}"),
        ("v9_txns_complex_meta", "txn_id:{},account_id:{}"),
    ],
)
def test_v9_blocks_follow_the_updates_and_deletes(mor_tables: Path, name: str, key: str) -> None:
    """TXN-001 reversed; TXN-002 deleted; TXN-005's amount 2500.00, then deleted; TXN-007's
    fee 75.00 (the inserts after them went to base files)."""
    accounts = {"TXN-001": "ACC-A", "TXN-002": "ACC-B", "TXN-005": "ACC-D", "TXN-007": "ACC-E"}
    table = mor_tables / name
    found = sorted(blocks_by_type(table), key=lambda pair: pair[1].instant)
    seen = []
    for partition, current in found:
        if current.block_type == BlockType.DELETE:
            [deleted] = deleted_records(current)
            assert deleted.partition_path == partition
            assert deleted.ordering == DELETE_REGARDLESS
            seen.append(("delete", deleted.record_key))
            continue
        [record] = data_block_table(current).to_pylist()
        txn = record["txn_id"]
        assert record["_hoodie_record_key"] == key.format(txn, accounts[txn])
        changed = {
            "TXN-001": ("txn_type", "reversal"),
            "TXN-005": ("amount", Decimal("2500.00")),
            "TXN-007": ("fee_amount", Decimal("75.00")),
        }[txn]
        assert (changed[0], record[changed[0]]) == changed
        seen.append(("update", record["_hoodie_record_key"]))
    expected = [
        ("update", "TXN-001"),
        ("delete", "TXN-002"),
        ("update", "TXN-005"),
        ("delete", "TXN-005"),
        ("update", "TXN-007"),
    ]
    assert seen == [(what, key.format(t, accounts[t])) for what, t in expected]


def test_v9_time_based_keys(mor_tables: Path) -> None:
    """amount = 500.00 for TXN-003 (partition 2024/01/16/09); TXN-002 deleted."""
    found = blocks_by_type(mor_tables / "v9_timebasedkeygen_nonhivestyle")
    updates = [b for _, b in found if b.block_type == BlockType.AVRO_DATA]
    deletes = [d for _, b in found if b.block_type == BlockType.DELETE for d in deleted_records(b)]
    [record] = avro_records(updates[0])
    assert (record["txn_id"], record["amount"], record["_hoodie_partition_path"]) == (
        "TXN-003",
        Decimal("500.00"),
        "2024/01/16/09",
    )
    assert deletes == [DeleteRecord("TXN-002", "2024/01/15/11")]


@pytest.mark.parametrize(
    ("name", "key"), [("v6_nonpartitioned", "1"), ("v6_complexkeygen_hivestyle", "id:1,name:Alice")]
)
def test_v6_parquet_blocks_hold_the_upsert(mor_tables: Path, name: str, key: str) -> None:
    """The second INSERT sets Alice's isActive to false."""
    [(_, found)] = blocks_by_type(mor_tables / name)
    assert found.block_type == BlockType.PARQUET_DATA
    [record] = data_block_table(found).to_pylist()
    assert (record["_hoodie_record_key"], record["name"], record["isActive"]) == (
        key,
        "Alice",
        False,
    )
    assert record["arrayField"] == [
        {"arr_struct_f1": "red", "arr_struct_f2": 100},
        {"arr_struct_f1": "blue", "arr_struct_f2": 200},
        {"arr_struct_f1": "green", "arr_struct_f2": 300},
    ]


def test_a_parquet_block_is_decoded_for_a_lookup_only_if_it_holds_one_of_its_keys(
    mor_tables: Path,
) -> None:
    """A lookup decodes a Parquet block's key column first (Hudi's block here)."""
    [(_, found)] = blocks_by_type(mor_tables / "v6_nonpartitioned")
    assert data_block_table(found, {"2", "3"}).num_rows == 0
    assert data_block_table(found, {"2", "3"}).schema == data_block_table(found).schema
    assert data_block_table(found, {"3", "1"}).column("name").to_pylist() == ["Alice"]


def test_v6_rollback_command_block_targets_the_rolled_back_append(mor_tables: Path) -> None:
    """INSERT (id 1 upserted), rollback_to_instant, INSERT (id 2): three log versions."""
    table = mor_tables / "v6_nonpartitioned_rollback"
    [(_, first), (_, command), (_, third)] = blocks_by_type(table)
    assert data_block_table(first).column("id").to_pylist() == [1]
    assert rolled_back_instant(command) == first.instant
    assert command.content == b""
    assert data_block_table(third).to_pylist()[0]["name"] == "Bob"
    rollbacks = [p.name for p in (table / ".hoodie").glob("*.rollback")]
    assert rollbacks == [f"{command.instant}.rollback"]
    assert not (table / ".hoodie" / f"{first.instant}.deltacommit").exists()


def test_the_builders_make_hudis_blocks(mor_tables: Path) -> None:
    """Every Avro, delete and command block (metadata-table deletes too), rebuilt from what
    it decodes to: the same header entries and content; byte-identical when Hudi's header
    order (a Java HashMap's) is ours, INSTANT_TIME first."""
    rebuilt_kinds: Counter[BlockType] = Counter()
    identical: Counter[BlockType] = Counter()
    for name in MOR_NAMES:
        for path in log_paths(mor_tables / name, metadata_table=True):
            for hudis in read_blocks(path.read_bytes()):
                ours = rebuilt(hudis)
                if ours is None:
                    continue
                assert ours == hudis
                rebuilt_kinds[hudis.block_type] += 1
                if list(ours.header) == list(hudis.header):
                    assert encode_block(ours) == encode_block(hudis)
                    identical[hudis.block_type] += 1
    assert rebuilt_kinds.keys() == {BlockType.AVRO_DATA, BlockType.DELETE, BlockType.COMMAND}
    assert identical[BlockType.AVRO_DATA] >= 5
    assert identical[BlockType.DELETE] >= 5


def rebuilt(hudis: LogBlock) -> LogBlock | None:
    schema = hudis.header.get(HeaderKey.SCHEMA)
    if hudis.block_type == BlockType.AVRO_DATA:
        assert schema is not None
        return avro_data_block(hudis.instant, schema, avro_records(hudis))
    if hudis.block_type == BlockType.DELETE:
        return delete_block(hudis.instant, deleted_records(hudis), schema)
    if hudis.block_type == BlockType.COMMAND:
        target = rolled_back_instant(hudis)
        return rollback_block(hudis.instant, target)
    return None


def test_avro_records_round_trip() -> None:
    found = read_blocks(encode_block(avro_data_block(INSTANT, SCHEMA, RECORDS)))
    assert avro_records(found[0]) == RECORDS
    table = data_block_table(found[0])
    assert table.schema.field("amount").type == pa.decimal128(15, 2)
    assert table.to_pylist()[0]["at"] == RECORDS[0]["at"]


def test_parquet_records_round_trip() -> None:
    rows = pa.Table.from_pylist(RECORDS)
    [found] = read_blocks(encode_block(parquet_data_block(INSTANT, SCHEMA, rows)))
    assert found.header == {HeaderKey.INSTANT_TIME: INSTANT, HeaderKey.SCHEMA: SCHEMA}
    assert data_block_table(found).to_pylist() == RECORDS


@pytest.mark.parametrize(
    "ordering",
    [
        None,
        DELETE_REGARDLESS,
        OrderingValue(OrderingKind.BOOLEAN, True),
        OrderingValue(OrderingKind.LONG, 1700100000001),
        OrderingValue(OrderingKind.FLOAT, 1.5),
        OrderingValue(OrderingKind.DOUBLE, -2.25),
        OrderingValue(OrderingKind.BYTES, b"\x00\x01"),
        OrderingValue(OrderingKind.STRING, "2024-01-15"),
        OrderingValue(OrderingKind.DATE, 19737),
        OrderingValue(OrderingKind.DECIMAL, Decimal("12.500000000000000")),
        OrderingValue(OrderingKind.TIME_MICROS, dt.time(10, 30, 0, 5)),
        OrderingValue(OrderingKind.TIMESTAMP_MICROS, 1705314600000001),
    ],
)
def test_deletes_round_trip_with_every_ordering_wrapper(ordering: OrderingValue | None) -> None:
    deletes = [DeleteRecord("k1", "p=1", ordering), DeleteRecord("k2", "", ordering)]
    [found] = read_blocks(encode_block(delete_block(INSTANT, deletes)))
    assert found.header == {HeaderKey.INSTANT_TIME: INSTANT}
    assert deleted_records(found) == deletes


def test_int_and_date_orderings_stay_apart() -> None:
    """Same Avro encoding, different union branches: the wrapper tells them apart."""
    deletes = [
        DeleteRecord("k", "", OrderingValue(OrderingKind.INT, 7)),
        DeleteRecord("k", "", OrderingValue(OrderingKind.DATE, 7)),
    ]
    found = delete_block(INSTANT, deletes)
    assert found.content[-4:] != found.content[-8:-4]
    assert deleted_records(found) == deletes


def test_records_mentioning_some_keys_are_decoded_alone() -> None:
    block = avro_data_block(INSTANT, SCHEMA, RECORDS)
    assert avro_records(block, mentioning={"k2", "k9"}) == RECORDS[1:]
    assert avro_records(block, mentioning={"k9"}) == []
    assert (
        avro_records(block, mentioning=[f"x{i}" for i in range(MENTIONED_AT_MOST + 1)]) == RECORDS
    )


def test_a_damaged_avro_record_is_data_loss() -> None:
    good = avro_data_block(INSTANT, SCHEMA, RECORDS[:1])
    content = bytearray(good.content)
    content[8:12] = struct.pack(">i", 3)
    damaged = LogBlock(BlockType.AVRO_DATA, good.header, bytes(content))
    with pytest.raises(DataLossError, match="record 0"):
        avro_records(damaged)
    short = LogBlock(BlockType.AVRO_DATA, good.header, good.content[:-2])
    with pytest.raises(DataLossError):
        avro_records(short)


def test_a_damaged_delete_list_is_data_loss() -> None:
    good = delete_block(INSTANT, [DeleteRecord("k", "p")])
    with pytest.raises(DataLossError):
        deleted_records(LogBlock(BlockType.DELETE, good.header, good.content + b"\x00"))


def test_content_versions_before_3_are_refused() -> None:
    good = delete_block(INSTANT, [DeleteRecord("k", "p")])
    old = LogBlock(BlockType.DELETE, good.header, struct.pack(">i", 2) + good.content[4:])
    with pytest.raises(InvalidArgumentError, match="content version 2"):
        deleted_records(old)


def test_a_block_of_another_type_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="DELETE block is not AVRO_DATA"):
        avro_records(delete_block(INSTANT, []))
    with pytest.raises(InvalidArgumentError):
        rolled_back_instant(delete_block(INSTANT, []))


def test_a_command_that_is_not_a_rollback_is_damage() -> None:
    block = rollback_block(INSTANT, "20250331030645700")
    header = {**block.header, HeaderKey.COMMAND_BLOCK_TYPE: "1"}
    with pytest.raises(DataLossError, match="not a rollback"):
        rolled_back_instant(LogBlock(BlockType.COMMAND, header))


def test_arrow_rows_with_maps_round_trip_through_an_avro_block() -> None:
    """Arrow gives maps as (key, value) pairs; the block holds them as Avro maps, nested in
    lists and structs too, and reads them back as the same rows."""
    kind = pa.map_(pa.string(), pa.struct([("f", pa.float64())]))
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("tags", kind),
            ("many", pa.list_(kind)),
            ("inner", pa.struct([("m", pa.map_(pa.string(), pa.int64())), ("n", pa.int64())])),
        ]
    )
    rows = pa.Table.from_pylist(
        [
            {
                "id": "a",
                "tags": [("x", {"f": 1.5})],
                "many": [[("y", {"f": 2.0})], None],
                "inner": {"m": [("k", 7)], "n": 3},
            },
            {"id": "b", "tags": None, "many": None, "inner": None},
        ],
        schema=schema,
    )
    schema_json = arrow_to_avro_schema(schema, "t")
    [found] = read_blocks(encode_block(avro_data_block(INSTANT, schema_json, arrow_records(rows))))
    assert data_block_table(found).to_pylist() == rows.to_pylist()
