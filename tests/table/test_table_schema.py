"""Arrow -> Avro in Hudi's style (checked against Hudi-written commits) and evolution rules."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from table.table_testkit import FIXTURES
from tidemark.errors import InvalidArgumentError
from tidemark.table.schema import arrow_to_avro_schema, avro_to_arrow_schema, check_schema_evolution
from tidemark.table.table import HoodieTable

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
    check_schema_evolution(
        old, pa.schema([("id", pa.int64()), ("score", pa.float64()), ("new", pa.string())])
    )


@pytest.mark.parametrize(
    ("new_schema", "field"),
    [
        (pa.schema([("id", pa.int64())]), "name"),
        (pa.schema([("id", pa.int64()), ("name", pa.int64())]), "name"),
        (pa.schema([("id", pa.int32()), ("name", pa.string())]), "id"),
        (pa.schema([("id", pa.string()), ("name", pa.string())]), "id"),
    ],
)
def test_rejected_evolutions_name_the_column(new_schema: pa.Schema, field: str) -> None:
    old = arrow_to_avro_schema(pa.schema([("id", pa.int64()), ("name", pa.string())]), "t")
    with pytest.raises(InvalidArgumentError) as error:
        check_schema_evolution(old, new_schema)
    assert error.value.field == field


def test_key_fields_cannot_change_type_even_when_widening() -> None:
    old = arrow_to_avro_schema(pa.schema([("id", pa.int32())]), "t")
    with pytest.raises(InvalidArgumentError) as error:
        check_schema_evolution(old, pa.schema([("id", pa.int64())]), protected_fields={"id"})
    assert error.value.field == "id"


def test_unsupported_types_and_bad_schemas() -> None:
    with pytest.raises(InvalidArgumentError) as kind:
        arrow_to_avro_schema(pa.schema([("d", pa.duration("s"))]), "t")
    assert kind.value.field == "d"
    with pytest.raises(InvalidArgumentError) as bad:
        avro_to_arrow_schema('{"type": "enum"}')
    assert bad.value.field == "schema"
