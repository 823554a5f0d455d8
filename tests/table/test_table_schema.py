"""Arrow -> Avro in Hudi's style (checked against Hudi-written commits) and evolution rules."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from table.table_testkit import FIXTURES
from tidemark.errors import InvalidArgumentError
from tidemark.table import HoodieTable
from tidemark.table.records.schema import arrow_to_avro_schema, avro_to_arrow_schema, evolve_schema

NAME = "v6_nonpartitioned"


def _fixture() -> tuple[pa.Schema, str]:
    table = HoodieTable.open(str(FIXTURES / NAME))
    latest = table.view().latest_base_files()[0]
    schema = pq.read_schema(FIXTURES / NAME / latest.path)
    last = table.timeline.last_completed()
    assert last is not None
    return schema, table.timeline.read_metadata(last).extra_metadata["schema"]


def test_avro_schema_equals_the_one_hudi_wrote() -> None:
    schema, hudi_avro = _fixture()
    assert json.loads(arrow_to_avro_schema(schema, NAME)) == json.loads(hudi_avro)


def test_avro_to_arrow_round_trip() -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("when", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("price", pa.decimal128(10, 5)),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.map_(pa.string(), pa.int32())),
            ("nested", pa.struct([("a", pa.float64()), ("b", pa.binary())])),
        ]
    )
    assert avro_to_arrow_schema(arrow_to_avro_schema(schema, "t")) == schema


def test_adding_nullable_columns_and_widening_are_accepted() -> None:
    old = arrow_to_avro_schema(pa.schema([("id", pa.int32()), ("score", pa.float32())]), "t")
    new = pa.schema([("id", pa.int64()), ("score", pa.float64()), ("new", pa.string())])
    assert evolve_schema(old, new) == new


@pytest.mark.parametrize(
    ("table_type", "incoming_type"),
    [
        (pa.int64(), pa.int32()),
        (pa.float32(), pa.int32()),
        (pa.float64(), pa.int32()),
        (pa.float32(), pa.int64()),
        (pa.float64(), pa.int64()),
        (pa.float64(), pa.float32()),
        (pa.string(), pa.binary()),
    ],
)
def test_narrower_incoming_types_are_promoted_to_the_tables(
    table_type: pa.DataType, incoming_type: pa.DataType
) -> None:
    """Hudi writes an int batch into a double column as doubles; so does the writer."""
    old = arrow_to_avro_schema(pa.schema([("id", pa.string()), ("amount", table_type)]), "t")
    new = pa.schema([("id", pa.string()), ("amount", incoming_type)])
    assert evolve_schema(old, new) == pa.schema([("id", pa.string()), ("amount", table_type)])


def test_nested_fields_are_added_promoted_and_kept_in_incoming_order() -> None:
    old = arrow_to_avro_schema(
        pa.schema(
            [
                ("address", pa.struct([("city", pa.string()), ("n", pa.int64())])),
                ("tags", pa.list_(pa.struct([("w", pa.float64())]))),
                ("attrs", pa.map_(pa.string(), pa.float64())),
            ]
        ),
        "t",
    )
    new = pa.schema(
        [
            (
                "address",
                pa.struct([("zip", pa.string()), ("n", pa.int32()), ("city", pa.string())]),
            ),
            ("tags", pa.list_(pa.struct([("w", pa.int32())]))),
            ("attrs", pa.map_(pa.string(), pa.int64())),
        ]
    )
    assert evolve_schema(old, new) == pa.schema(
        [
            (
                "address",
                pa.struct([("zip", pa.string()), ("n", pa.int64()), ("city", pa.string())]),
            ),
            ("tags", pa.list_(pa.struct([("w", pa.float64())]))),
            ("attrs", pa.map_(pa.string(), pa.float64())),
        ]
    )


_GEO = pa.struct([("lat", pa.float64())])
_ADDRESS = pa.struct([("city", pa.string()), ("zip", pa.string()), ("geo", _GEO)])


@pytest.mark.parametrize(
    ("new_type", "path", "message"),
    [
        (pa.struct([("city", pa.string()), ("geo", _GEO)]), "address.zip", "dropped"),
        (
            pa.struct([("city", pa.string()), ("zip", pa.int32()), ("geo", _GEO)]),
            "address.zip",
            "string -> int",
        ),
        (
            pa.struct([("city", pa.string()), ("zip", pa.string()), ("geo", pa.struct([]))]),
            "address.geo.lat",
            "dropped",
        ),
        (pa.string(), "address", "struct<city,zip,geo> -> string"),
    ],
)
def test_nested_refusals_name_the_field_path(
    new_type: pa.DataType, path: str, message: str
) -> None:
    old = arrow_to_avro_schema(pa.schema([("id", pa.int32()), ("address", _ADDRESS)]), "t")
    with pytest.raises(InvalidArgumentError) as error:
        evolve_schema(old, pa.schema([("id", pa.int32()), ("address", new_type)]))
    assert error.value.field == path
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("new_schema", "field"),
    [
        (pa.schema([("id", pa.int64())]), "name"),
        (pa.schema([("id", pa.int64()), ("name", pa.int64())]), "name"),
        (pa.schema([("id", pa.bool_()), ("name", pa.string())]), "id"),
        (pa.schema([("id", pa.string()), ("name", pa.string())]), "id"),
    ],
)
def test_rejected_evolutions_name_the_column(new_schema: pa.Schema, field: str) -> None:
    old = arrow_to_avro_schema(pa.schema([("id", pa.int64()), ("name", pa.string())]), "t")
    with pytest.raises(InvalidArgumentError) as error:
        evolve_schema(old, new_schema)
    assert error.value.field == field


def test_key_fields_cannot_change_type_even_when_widening() -> None:
    old = arrow_to_avro_schema(pa.schema([("id", pa.int32())]), "t")
    with pytest.raises(InvalidArgumentError) as error:
        evolve_schema(old, pa.schema([("id", pa.int64())]), protected_fields={"id"})
    assert error.value.field == "id"


def test_an_incoming_int_key_is_promoted_to_the_tables_long_key() -> None:
    """The key string of 7 is "7" either way, so Hudi's promotion is safe for keys too."""
    old = arrow_to_avro_schema(pa.schema([("id", pa.int64()), ("p", pa.string())]), "t")
    new = pa.schema([("id", pa.int32()), ("p", pa.string())])
    protected = {"id", "p"}
    assert evolve_schema(old, new, protected_fields=protected).field("id").type == pa.int64()
    with pytest.raises(InvalidArgumentError) as error:
        evolve_schema(
            old, pa.schema([("id", pa.int64()), ("p", pa.binary())]), protected_fields=protected
        )
    assert error.value.field == "p"


def test_unsupported_types_and_bad_schemas() -> None:
    with pytest.raises(InvalidArgumentError) as kind:
        arrow_to_avro_schema(pa.schema([("d", pa.duration("s"))]), "t")
    assert kind.value.field == "d"
    with pytest.raises(InvalidArgumentError) as bad:
        avro_to_arrow_schema('{"type": "enum"}')
    assert bad.value.field == "schema"


def test_naive_timestamps_are_refused_and_zoned_ones_never_relabelled() -> None:
    """Issue 21: a naive timestamp is neither declared an instant nor written as Hudi's
    local-timestamp-micros (hudi-rs cannot read it); a table column Hudi wrote as
    local-timestamp-micros refuses zoned input instead of relabelling it."""
    nested = pa.struct([("at", pa.timestamp("us"))])
    for schema, field in (
        (pa.schema([("at", pa.timestamp("us"))]), "at"),
        (pa.schema([("s", nested)]), "at"),
        (pa.schema([("at", pa.timestamp("ms"))]), "at"),
    ):
        with pytest.raises(InvalidArgumentError, match="without a time zone") as refused:
            arrow_to_avro_schema(schema, "t")
        assert refused.value.field == field
    zoned = pa.schema([("at", pa.timestamp("us", tz="UTC"))])
    table_avro = arrow_to_avro_schema(zoned, "t")
    assert json.loads(table_avro)["fields"][0]["type"][1]["logicalType"] == "timestamp-micros"
    with pytest.raises(InvalidArgumentError, match="without a time zone"):
        evolve_schema(table_avro, pa.schema([("at", pa.timestamp("us"))]))
    hudi_local = table_avro.replace("timestamp-micros", "local-timestamp-micros")
    assert avro_to_arrow_schema(hudi_local).field("at").type == pa.timestamp("us")
    with pytest.raises(InvalidArgumentError, match="column holds local date-times"):
        evolve_schema(hudi_local, zoned)


def test_type_refusals_name_full_types() -> None:
    """Issue 53: "decimal -> decimal" named neither precision nor scale."""
    old = arrow_to_avro_schema(
        pa.schema([("amount", pa.decimal128(12, 2)), ("tags", pa.list_(pa.int32()))]), "t"
    )
    for new, message in (
        (
            pa.schema([("amount", pa.decimal128(12, 4)), ("tags", pa.list_(pa.int32()))]),
            "amount: type change decimal(12,2) -> decimal(12,4) is not allowed; cast the "
            "input's column to decimal(12,2)",
        ),
        (
            pa.schema([("amount", pa.decimal128(12, 2)), ("tags", pa.int32())]),
            "tags: type change array<int> -> int is not allowed",
        ),
    ):
        with pytest.raises(InvalidArgumentError) as error:
            evolve_schema(old, new)
        assert message in str(error.value)
    with pytest.raises(InvalidArgumentError, match=r"\(decimal\(12,2\) -> decimal\(14,2\)\)"):
        evolve_schema(
            old,
            pa.schema([("amount", pa.decimal128(14, 2)), ("tags", pa.list_(pa.int32()))]),
            protected_fields={"amount"},
        )


@pytest.mark.parametrize(
    ("table", "incoming", "written"),
    [
        ((12, 2), (4, 2), (12, 2)),  # the input cast up to the table's type
        ((12, 2), (10, 1), (12, 2)),
        ((12, 2), (14, 2), (14, 2)),  # the table's type widened, as Hudi does
        ((12, 2), (13, 3), (13, 3)),
    ],
)
def test_decimals_are_promoted_or_widened_as_hudi_allows(
    table: tuple[int, int], incoming: tuple[int, int], written: tuple[int, int]
) -> None:
    old = arrow_to_avro_schema(pa.schema([("amount", pa.decimal128(*table))]), "t")
    evolved = evolve_schema(old, pa.schema([("amount", pa.decimal128(*incoming))]))
    assert evolved.field("amount").type == pa.decimal128(*written)


@pytest.mark.parametrize("incoming", [(12, 3), (11, 0), (4, 3)])
def test_decimals_losing_digits_are_refused(incoming: tuple[int, int]) -> None:
    old = arrow_to_avro_schema(pa.schema([("amount", pa.decimal128(12, 2))]), "t")
    with pytest.raises(InvalidArgumentError, match="decimal\\(12,2\\) -> decimal") as error:
        evolve_schema(old, pa.schema([("amount", pa.decimal128(*incoming))]))
    assert error.value.field == "amount"


def test_a_missing_column_is_refused_with_both_ways_on_or_filled() -> None:
    old = arrow_to_avro_schema(
        pa.schema([("id", pa.int64()), ("extra", pa.string()), ("n", pa.int32())]), "t"
    )
    incoming = pa.schema([("id", pa.int64()), ("n", pa.int64())])
    with pytest.raises(InvalidArgumentError) as error:
        evolve_schema(old, incoming)
    assert error.value.field == "extra"
    for hint in (
        "set_null_for_missing_columns=True",
        "--set-null-for-missing-columns",
        "rewriting",
    ):
        assert hint in str(error.value)
    filled = evolve_schema(old, incoming, fill_missing=True)
    assert filled == pa.schema([("id", pa.int64()), ("n", pa.int64()), ("extra", pa.string())])
