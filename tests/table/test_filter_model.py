"""The filter model against a plain row-by-row reading of each filter (Spark SQL's meaning,
``tidemark.table.filters.expression``): for every operator on every column type the
filters accept, with nulls (and NaN, empty strings), the pyarrow expression keeps exactly
the matching rows, statistics never rule out a row group or file holding a match, and
partition and record-key pruning never leave out a partition or key holding one.
(tests/spark/test_filter_model_spark.py holds Spark's condition to the same reading.)"""

from __future__ import annotations

import datetime
import io
import math
import tempfile
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemark.errors import TidemarkError
from tidemark.storage import open_storage
from tidemark.table.files import column_stats
from tidemark.table.files.view import BaseFile
from tidemark.table.filters import arrow, partitions
from tidemark.table.filters.expression import OPERATORS, bind
from tidemark.table.filters.record_keys import keys_of
from tidemark.table.filters.statistics import may_match
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import partition_paths, record_keys

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
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
FILE_SETTINGS = settings(SETTINGS, max_examples=60)
"""Each example writes and records a Parquet file."""


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


@st.composite
def cases(draw: st.DrawFn, names: tuple[str, ...] = tuple(COLUMN_TYPES)) -> dict[str, Any]:
    """A column of one type, its rows (some null) and one or two filters on it."""
    name = draw(st.sampled_from(names))
    kind, held, others = COLUMN_TYPES[name]
    cells = draw(st.lists(st.one_of(st.none(), st.sampled_from(held)), max_size=12))
    candidates = st.sampled_from(held + others)
    filters = []
    for _ in range(draw(st.integers(1, 2))):
        op = draw(st.sampled_from([op for op in OPERATORS if op != "=="]))
        if op in ("in", "not in"):
            wanted = draw(st.lists(st.one_of(st.none(), candidates), max_size=3))
        elif op in ("is null", "is not null"):
            wanted = []
        else:
            wanted = [draw(st.one_of(st.none(), candidates))]
        textual = name not in ("double", "float") and draw(st.booleans())
        given = [as_text(w) if textual and type(w) is type(held[0]) else w for w in wanted]
        filters.append(
            (op, wanted, given[0] if len(given) == 1 and op not in ("in", "not in") else given)
        )
    return {"name": name, "kind": kind, "cells": cells, "filters": filters}


def matches(case: dict[str, Any], partition: bool = False) -> list[bool]:
    """Row by row, whether each row meets every filter of ``case`` (on a partition field
    ``""`` is missing too)."""
    string = pa.types.is_string(case["kind"])
    result = []
    for cell in case["cells"]:
        met = True
        for op, wanted, _ in case["filters"]:
            if partition and string and op not in ("<", "<=", ">", ">="):
                wanted = [None if w == "" else w for w in wanted]
            met = met and spark_reading(op, cell, wanted, string)
        result.append(met)
    return result


def bound_of(case: dict[str, Any], partition: bool = False) -> Any:
    schema = pa.schema([pa.field("c", case["kind"])])
    filters = [("c", op, value) for op, _, value in case["filters"]]
    return bind(filters, schema, partition_fields=("c",) if partition else ())


def table_of(case: dict[str, Any]) -> pa.Table:
    return pa.table(
        {
            "c": pa.array(case["cells"], type=case["kind"]),
            "row": pa.array(range(len(case["cells"])), pa.int64()),
        }
    )


@SETTINGS
@given(cases(), st.booleans())
def test_the_pyarrow_expression_keeps_exactly_the_matching_rows(
    case: dict[str, Any], partition: bool
) -> None:
    expected = [row for row, met in enumerate(matches(case, partition)) if met]
    condition = arrow.expression(bound_of(case, partition))
    assert condition is not None
    kept = table_of(case).filter(condition).column("row").to_pylist()
    assert kept == expected, (case, condition)


@FILE_SETTINGS
@given(cases(), st.integers(1, 4))
def test_statistics_never_rule_out_a_row_group_or_file_holding_a_match(
    case: dict[str, Any], group_rows: int
) -> None:
    bound = bound_of(case)
    met = matches(case)
    with tempfile.TemporaryDirectory() as folder:
        storage = open_storage(folder)
        sink = io.BytesIO()
        pq.write_table(table_of(case), sink, row_group_size=group_rows)
        storage.write("p/f.parquet", sink.getvalue())
        metadata = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata
        start = 0
        for group in range(metadata.num_row_groups):
            rows = metadata.row_group(group).num_rows
            stats = column_stats.row_group_stats(metadata, group, ["c"])
            if any(met[start : start + rows]):
                assert may_match(bound, stats), (case, group, stats)
            start += rows
        base = BaseFile("p", "f", "20261103000000000", "p/f.parquet", len(sink.getvalue()))
        column_stats.record(storage, base.instant, [base.path])
        (recorded,) = column_stats.load(storage, [base]).values()
        if any(met):
            assert may_match(bound, recorded), (case, recorded)
            assert column_stats.may_hold(storage, [base], bound) == [base]


def _config(hive_style: bool) -> TableConfig:
    return TableConfig(
        name="t",
        record_key_fields=("c",),
        partition_fields=("c",),
        precombine_field=None,
        hive_style=hive_style,
        avro_schema="",
        key_generator_class=TableConfig.default_key_generator(("c",), ("c",)),
        url_encode_partitions=True,
    )


@SETTINGS
@given(cases(PARTITION_TYPES), st.booleans())
def test_partition_pruning_never_leaves_out_a_partition_holding_a_match(
    case: dict[str, Any], hive_style: bool
) -> None:
    config = _config(hive_style)
    bound = bound_of(case, partition=True)
    paths = partition_paths(table_of(case), config).to_pylist()
    listed = partitions.partitions_to_list(bound, config)
    for path, met in zip(paths, matches(case, partition=True), strict=True):
        if met:
            assert partitions.may_hold(bound, path, config), (case, path)
            assert listed is None or path in listed, (case, path, listed)


@SETTINGS
@given(cases(PARTITION_TYPES))
def test_record_key_lookups_name_the_key_of_every_match(case: dict[str, Any]) -> None:
    config = _config(hive_style=False)
    keyed = {**case, "cells": [c for c in case["cells"] if c not in (None, "")]}
    keys = keys_of(bound_of(keyed), config)
    if keys is None:
        return
    try:
        stored = record_keys(table_of(keyed), config).to_pylist()
    except TidemarkError:
        return
    for key, met in zip(stored, matches(keyed), strict=True):
        if met:
            assert key in keys, (case, key, keys)
