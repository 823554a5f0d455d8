"""The Arrow schema of a Spark schema on every PySpark the bounds allow: from 4.2 PySpark
takes the session time zone itself, before it (4.1) timestamps come out in UTC and
Tidemark sets the session's zone, nested ones included."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.pandas import types as pyspark_types
from pyspark.sql.types import ArrayType, MapType, StringType, StructField, StructType, TimestampType

from tidemark.jobs import keying

SCHEMA = StructType(
    [
        StructField("at", TimestampType()),
        StructField("seen", ArrayType(TimestampType())),
        StructField("by", MapType(StringType(), TimestampType())),
        StructField("nested", StructType([StructField("at", TimestampType())])),
        StructField("name", StringType()),
    ]
)


def zones(schema: pa.Schema) -> set[str | None]:
    """The time zones of every timestamp in ``schema``."""
    found: set[str | None] = set()

    def visit(kind: pa.DataType) -> None:
        if pa.types.is_timestamp(kind):
            found.add(kind.tz)
        for index in range(kind.num_fields):
            visit(kind.field(index).type)

    for field in schema:
        visit(field.type)
    return found


def pyspark_41_to_arrow_schema(schema: StructType) -> pa.Schema:
    """``to_arrow_schema`` as PySpark 4.1 declares it (no ``timezone``: UTC timestamps)."""
    return pyspark_types.to_arrow_schema(schema, timezone="UTC")


@pytest.mark.parametrize("timezone", ["UTC", "Europe/Paris"])
def test_timestamps_are_in_the_session_zone_on_both_signatures(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, timezone: str
) -> None:
    previous = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    spark.conf.set("spark.sql.session.timeZone", timezone)
    try:
        current = keying.arrow_schema(SCHEMA, spark)
        monkeypatch.setattr(keying, "to_arrow_schema", pyspark_41_to_arrow_schema)
        older = keying.arrow_schema(SCHEMA, spark)
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert zones(current) == zones(older) == {timezone}
    assert older == current
