"""Filter values typed without Spark: the zone of zone-less timestamps, exact decimals, and
refusals naming the column (tests/spark/test_filter_literals.py checks every form against
Spark's own cast)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from tidemark.errors import InvalidArgumentError
from tidemark.table.filters.literals import column_scalar, literal

AT = pa.timestamp("us", tz="UTC")


def test_zone_less_timestamps_are_in_the_given_zone_else_utc() -> None:
    midnight = datetime.datetime(2026, 11, 3, tzinfo=datetime.UTC)
    assert literal("2026-11-03 00:00:00", AT, "at") == midnight
    assert literal("2026-11-03", AT, "at") == midnight
    assert literal(datetime.date(2026, 11, 3), AT, "at") == midnight
    assert literal("2026-11-03", AT, "at", "Europe/Paris") == midnight - datetime.timedelta(hours=1)
    assert literal("2026-11-03T01:00:00+01:00", AT, "at", "America/New_York") == midnight
    naive = pa.timestamp("us")  # TIMESTAMP_NTZ: the zone is ignored, as Spark's cast does
    assert literal("2026-11-03 00:00:00+05:00", naive, "at") == midnight.replace(tzinfo=None)


def test_decimals_keep_their_exact_value() -> None:
    amount = pa.decimal128(12, 2)
    assert literal(0.1, amount, "amount") == Decimal("0.1")
    assert literal("12.345", amount, "amount") == Decimal("12.345")
    assert column_scalar(Decimal("12.345"), amount) is None  # no stored value equals it
    assert column_scalar(Decimal("12.3"), amount) == pa.scalar(Decimal("12.30"), amount)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("2026-11-03 25:00", AT),
        ("2026-11-03 00:00 Mars/Olympus", AT),
        ("12:00:00", AT),  # a time alone would take its date from the clock
        ("2026-13-01", pa.date32()),
        ("1_000", pa.decimal128(12, 2)),
        (float("nan"), pa.decimal128(12, 2)),
        ("2147483648", pa.int32()),
        ("1.0", pa.int64()),
        ("maybe", pa.bool_()),
    ],
)
def test_values_sparks_cast_refuses_are_errors_naming_the_column(
    value: object, kind: pa.DataType
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        literal(value, kind, "col")
    assert refused.value.field == "col"
    assert "is not a valid" in str(refused.value)
