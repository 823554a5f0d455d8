"""Filter values typed by ``tidemark.table.filters.literals.literal`` against Spark's own cast of
the same literal, form by form, in a session time zone other than UTC; then reads filtered by
text forms of timestamps and decimals keep the rows Spark's own filter keeps."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as sf

import tidemark.spark
from spark.sparkkit import local_frame
from tidemark.errors import InvalidArgumentError
from tidemark.spark import WriteOptions
from tidemark.table.filters.literals import literal

ZONE = "America/New_York"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

FORMS: dict[str, list[str]] = {
    "timestamp": [
        "2026-11-03 00:00:00",
        "2026-11-03",
        "2026-11-03T00:00:00Z",
        "2026-11-03T00:00:00",
        "2026-11-03 12:30",
        "2026-11-03 12",
        "2026-11-3 1:2:3",
        "2026-11",
        "2026",
        " 2026-11-03 ",
        "+2026-11-03",
        "2026-11-03 00:00:00.1234567",
        "2026-11-03 00:00:00.",
        "2026-11-03 00:00:00+01:00",
        "2026-11-03T00:00:00+0100",
        "2026-11-03 00:00:00 +01:00",
        "2026-11-03 00:00:00+1",
        "2026-11-03 00:00:00+01:00:30",
        "2026-11-03T00:00:00.5-05",
        "2026-11-03 00:00:00 Z",
        "2026-11-03 00:00:00 UTC",
        "2026-11-03 00:00:00 UTC+01:00",
        "2026-11-03 00:00:00 GMT-3",
        "2026-11-03 00:00:00 Europe/Paris",
        "2026-11-03 00:00:00Europe/Paris",
        "2026-03-08 02:30:00",  # in New York's spring-forward gap
        "2026-11-01 01:30:00",  # in its fall-back overlap
        "2026-11-03 24:00:00",
        "2026-02-30",
        "2026-11-03T",
        "2026-11-03 12:",
        "2026-11 12:00",
        "2026-11-03T00:00:00z",
        "20261103",
        "2026/11/03",
        "2026-11-03 00:00:60",
    ],
    "date": [
        "2026-11-03",
        "2026-11-03 12:00:00",
        "2026-11-03T12:00:00Z",
        "2026-11-03 garbage",
        "2026-11",
        "2026",
        " 2026-11-3 ",
        "2026-11-03x",
        "2026-02-30",
        "20261103",
    ],
    "decimal(38,10)": [
        "12.34",
        "12.345",
        "-1",
        "+5",
        "1e2",
        "1.2e-1",
        " 12.3 ",
        "12.",
        ".5",
        "abc",
        "1_000",
        "Infinity",
        "12,34",
        "0x10",
    ],
    "int": ["12", " 12 ", "+12", "-0", "1.0", "1e2", "2147483648", "abc", "\uff11\uff12"],
    "bigint": ["9223372036854775807", "9223372036854775808", "1.9"],
    "double": [
        "1.5",
        " 1.5 ",
        "1e3",
        "+1.5",
        ".5",
        "5.",
        "1.5d",
        "1.5f",
        "inf",
        "-Infinity",
        "NaN",
        "1_000",
        "0x10",
    ],
    "boolean": [
        "true",
        "TRUE",
        "t",
        "yes",
        "y",
        "1",
        "false",
        "f",
        "no",
        "n",
        "0",
        " true ",
        "tru",
    ],
}
ARROW_TYPES = {
    "timestamp": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
    "decimal(38,10)": pa.decimal128(38, 10),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
}


@pytest.fixture
def new_york(spark: SparkSession) -> Iterator[SparkSession]:
    """The session in New York's time zone for one test (zone-less values follow it)."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", str(before))


def comparable(cast: Column, kind: str) -> Column:
    """Spark's cast as a value Python compares without a time zone of its own."""
    if kind == "timestamp":
        return sf.unix_micros(cast)
    if kind == "date":
        return sf.unix_date(cast)
    return cast


def ours(text: str, kind: str) -> Any:
    """What ``literal`` makes of ``text``, in the terms of ``comparable``; None if refused."""
    try:
        value = literal(text, ARROW_TYPES[kind], "c", ZONE)
    except InvalidArgumentError as error:
        assert error.field == "c"
        return None
    if kind == "timestamp":
        return (value - EPOCH) // datetime.timedelta(microseconds=1)
    if kind == "date":
        return (value - EPOCH.date()).days
    return value


def same(spark_value: Any, our_value: Any) -> bool:
    if isinstance(spark_value, float) and spark_value != spark_value:  # NaN
        return isinstance(our_value, float) and our_value != our_value
    return bool(spark_value == our_value)


@pytest.mark.parametrize("kind", sorted(FORMS))
def test_each_literal_form_is_what_sparks_cast_makes_of_it(
    new_york: SparkSession, kind: str
) -> None:
    texts = FORMS[kind]
    casts = [comparable(sf.lit(t).try_cast(kind), kind).alias(str(i)) for i, t in enumerate(texts)]
    (row,) = new_york.range(1).select(*casts).collect()
    differing = [
        (t, row[i], ours(t, kind)) for i, t in enumerate(texts) if not same(row[i], ours(t, kind))
    ]
    assert not differing  # (text, Spark's, ours)
    assert any(row[i] is None for i in range(len(texts)))  # refusals are in the table too


def test_floats_become_decimals_as_spark_casts_them(spark: SparkSession) -> None:
    floats = [0.1, 12.34, -3.3, 1e-5, 123456.789]
    casts = [sf.lit(x).cast("decimal(38,18)").alias(str(i)) for i, x in enumerate(floats)]
    (row,) = spark.range(1).select(*casts).collect()
    typed = [literal(x, pa.decimal128(12, 2), "amount") for x in floats]
    assert typed == [row[i] for i in range(len(floats))]
    assert typed[0] == Decimal("0.1")


def test_text_filters_on_timestamps_and_decimals_keep_sparks_rows(
    new_york: SparkSession, table_uri: str
) -> None:
    spark = new_york
    moments = [
        datetime.datetime(2026, 11, 2, 22, tzinfo=datetime.UTC) + datetime.timedelta(hours=h)
        for h in range(8)
    ]
    rows = [(k, moments[k], Decimal(f"12.3{k}")) for k in range(8)]
    frame = local_frame(spark, rows, "id int, event_ts timestamp, amount decimal(12,2)")
    options = WriteOptions(record_key_fields=["id"])
    tidemark.spark.write(frame, table_uri, "bulk_insert", options=options)
    cases = [
        (
            ("event_ts", ">=", "2026-11-03 00:00:00"),
            sf.col("event_ts") >= sf.lit("2026-11-03 00:00:00").cast("timestamp"),
        ),
        (
            ("event_ts", "<", "2026-11-03"),
            sf.col("event_ts") < sf.lit("2026-11-03").cast("timestamp"),
        ),
        (
            ("event_ts", "=", "2026-11-03T04:00:00Z"),
            sf.col("event_ts") == sf.lit("2026-11-03T04:00:00Z").cast("timestamp"),
        ),
        (("amount", ">", "12.345"), sf.col("amount") > sf.lit(Decimal("12.345"))),
        (("amount", "=", "12.345"), sf.col("amount") == sf.lit(Decimal("12.345"))),
        (
            ("amount", "in", ["12.31", 12.36]),
            sf.col("amount").isin(Decimal("12.31"), Decimal("12.36")),
        ),
        (("amount", "<=", 12.33), sf.col("amount") <= sf.lit(Decimal("12.33"))),
    ]
    for condition, expected in cases:
        wanted = sorted(r.id for r in frame.where(expected).collect())
        for reader in ("driver", "spark"):
            read = tidemark.spark.read(spark, table_uri, filters=[condition], reader=reader)
            assert sorted(r.id for r in read.collect()) == wanted, (condition, reader)
    assert sorted(
        r.id for r in tidemark.spark.read(spark, table_uri, filters=[cases[0][0]]).collect()
    ) == [7]  # 05:00Z: New York midnight
    with pytest.raises(InvalidArgumentError) as bad:
        tidemark.spark.read(spark, table_uri, filters=[("event_ts", ">=", "2026-11-03 25:00")])
    assert bad.value.field == "event_ts"
