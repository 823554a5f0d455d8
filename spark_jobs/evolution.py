"""Incoming rows in the table's types: schema evolution checked, narrower types promoted.

Hudi writes an ``int`` batch into a ``double`` column as doubles (and likewise int ->
long/float, long -> float/double, float -> double, also inside structs), so every file of
a table agrees on each column's type. This is one projection of JVM-side casts (no Python
workers), applied to the input of every operation that writes rows.
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import from_arrow_type

from tidemark.jobs.keying import arrow_schema, column
from tidemark.table.records.schema import evolve_schema


def conform_to_table(
    data: DataFrame,
    table_avro: str,
    *,
    protected_fields: Collection[str] = (),
    fill_missing: bool = False,
) -> DataFrame:
    """``data`` with each column cast to the type ``evolve_schema`` gives it, and with
    ``fill_missing`` the table's columns it lacks added as nulls; raises the evolution
    error (naming the nested field) when Hudi would refuse the change."""
    incoming = arrow_schema(data.schema, data.sparkSession)
    target = evolve_schema(
        table_avro, incoming, protected_fields=protected_fields, fill_missing=fill_missing
    )
    if target == incoming:
        return data
    return data.select(*[_conformed(field, incoming) for field in target])


def _conformed(field: pa.Field, incoming: pa.Schema) -> Column:
    if field.name not in incoming.names:
        return sf.lit(None).cast(from_arrow_type(field.type)).alias(field.name)
    if field.type == incoming.field(field.name).type:
        return column(field.name)
    return column(field.name).cast(from_arrow_type(field.type)).alias(field.name)
