"""The filter model against a plain row-by-row reading of each filter (Spark SQL's meaning,
``tidemark.table.filters.expression``): for every operator on every column type the
filters accept, with nulls (and NaN, empty strings), the pyarrow expression keeps exactly
the matching rows, statistics never rule out a row group or file holding a match, and
partition and record-key pruning never leave out a partition or key holding one.
(tests/spark/test_filter_model_spark.py holds Spark's condition to the same reading.)"""

from __future__ import annotations

import io
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from table.filterkit import COLUMN_TYPES, PARTITION_TYPES, as_text, spark_reading
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

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
FILE_SETTINGS = settings(SETTINGS, max_examples=60)
"""Each example writes and records a Parquet file."""


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
