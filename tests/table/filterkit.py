"""Filter cases shared by the model's tests (tests/table/test_filter_model.py) and Spark's
(tests/spark/test_filter_model_spark.py): column types with the values their rows hold,
and the row-by-row reading of a filter every reader must agree with."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa

UTC = datetime.UTC
DAY = datetime.date(2026, 11, 3)
MOMENTS = [datetime.datetime(2026, 11, 3, h, m) for h, m in ((0, 0), (0, 1), (12, 30), (23, 59))]
NAN = float("nan")

COLUMN_TYPES: dict[str, tuple[pa.DataType, list[Any], list[Any]]] = {
    # name: (type, values rows hold, further filter values of the column's kind)
    "int": (pa.int64(), [-2, 0, 1, 3], [2, 2.5, 10**12]),
    "int32": (pa.int32(), [-2, 0, 1, 3], [2, -1.0]),
    "double": (pa.float64(), [-1.5, -0.0, 0.0, 1.0, NAN, math.inf], [0.5, -math.inf]),
    "float": (pa.float32(), [-1.5, 0.0, 0.25, NAN], [0.1, 0.3]),
    "string": (pa.string(), ["", "a", "ab", "b", "é"], ["aa", "c"]),
    "boolean": (pa.bool_(), [False, True], []),
    "date": (pa.date32(), [DAY + datetime.timedelta(days=d) for d in (-1, 0, 2)], [DAY]),
    "timestamp": (
        pa.timestamp("us", tz="UTC"),
        [m.replace(tzinfo=UTC) for m in MOMENTS],
        [datetime.datetime(2026, 11, 3, 1, 0, tzinfo=UTC)],
    ),
    "timestamp_ntz": (pa.timestamp("us"), MOMENTS, [datetime.datetime(2026, 11, 3, 6)]),
    "decimal": (
        pa.decimal128(10, 2),
        [Decimal("-1.50"), Decimal("0.00"), Decimal("1.25"), Decimal("3.10")],
        [Decimal("1.255"), Decimal("2")],
    ),
}
PARTITION_TYPES = ("int", "int32", "string", "boolean", "date")
"""The types a partition (or record key) field may have."""


def spark_reading(op: str, cell: Any, wanted: list[Any], string: bool) -> bool:
    """Whether a row holding ``cell`` meets ``(column, op, wanted)``, read row by row as
    Spark SQL reads it, ``wanted`` None meaning missing (null, or "" on a string column)."""

    def key(value: Any) -> Any:
        return (1, 0.0) if isinstance(value, float) and math.isnan(value) else (0, value)

    def missing(value: Any) -> bool:
        return value is None or (string and value == "")

    def equal(value: Any) -> bool:
        return missing(cell) if value is None else cell is not None and key(cell) == key(value)

    if op == "is null":
        return cell is None
    if op == "is not null":
        return cell is not None
    if op in ("=", "in"):
        return any(equal(value) for value in wanted)
    if op in ("!=", "not in"):
        return cell is not None and not any(equal(value) for value in wanted)
    (value,) = wanted
    if cell is None or value is None:
        return False
    return {
        "<": key(cell) < key(value),
        "<=": key(cell) <= key(value),
        ">": key(cell) > key(value),
        ">=": key(cell) >= key(value),
    }[op]


def as_text(value: Any) -> str:
    """A value as the text a user may give for it (each form read back exactly)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)
