"""Key lookups as Spark DataFrames: the record index names the files holding the keys, and
the rows are read where that is cheapest.

A Spark scan costs a job (a few hundred milliseconds) plus a few milliseconds per file
however few rows match, which for a handful of keys is nearly all of the lookup. So when
the index leaves few files (within ``tidemark.jobs.driver_read``'s bounds), the driver
reads them itself with pyarrow, through ``tidemark.storage``, keeping only the rows whose
key columns match (row groups whose statistics exclude every key are skipped), and hands
Spark the rows as a local relation: no Spark job. Past those bounds the files go to the readers
of ``tidemark.jobs.read.scan``. Every reader gives the same rows in the snapshot's schema.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from tidemark.errors import InvalidArgumentError
from tidemark.index.pruning import SnapshotPlan, plan_snapshot
from tidemark.jobs.driver_read import fits_driver, local_frame, read_files, read_slices
from tidemark.jobs.read import READ_READERS, scan, scan_reader
from tidemark.table import HoodieTable
from tidemark.table.files.query_types import SNAPSHOT
from tidemark.table.files.reader import snapshot_schema
from tidemark.table.records.keys import record_keys

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LookupPlan:
    """The files holding the keys (``snapshot.files``), and the keys as a table with a
    column per key field, typed as the snapshot's columns, without duplicates."""

    snapshot: SnapshotPlan
    keys: pa.Table

    def in_driver(self, reader: str) -> bool:
        """Whether ``reader`` reads this lookup's files (and merges its merge-on-read
        slices, for its keys only) in the driver."""
        fits = fits_driver(self.snapshot.files, self.snapshot.slices)
        return reader == "driver" or (reader == "auto" and fits)


def lookup_dataframe(
    spark: SparkSession,
    table: HoodieTable,
    keys: Sequence[Any] | DataFrame,
    *,
    columns: Sequence[str] | None = None,
    as_of: str | None = None,
    reader: str = "auto",
    query_type: str = SNAPSHOT,
) -> DataFrame:
    """The rows visible at ``as_of`` (default latest) in a query of ``query_type``
    (``tidemark.table.files.query_types``) with the given record keys: ``keys``
    a list of values of the key field (tuples of the key fields' values for a composite
    key) or a DataFrame with a column per key field. ``reader``: one of
    ``tidemark.jobs.read.READ_READERS``."""
    if reader not in READ_READERS:
        raise InvalidArgumentError(f"use one of {', '.join(READ_READERS)}", field="reader")
    plan = plan_lookup(table, keys, as_of=as_of, query_type=query_type)
    for name in columns or ():
        if name not in plan.snapshot.schema.names:
            raise InvalidArgumentError("no such column in the table", field=name)
    in_driver = plan.in_driver(reader)
    log.debug(
        "read.lookup",
        table=plan.snapshot.uri,
        keys=plan.keys.num_rows,
        files=len(plan.snapshot.files),
        slices=len(plan.snapshot.slices),
        reader="driver" if in_driver else reader,
    )
    if in_driver:
        return local_frame(spark, read_in_driver(plan, columns))
    frame = _matching(scan(spark, plan.snapshot, scan_reader(reader)), plan.keys)
    return frame.select(*columns) if columns else frame


def plan_lookup(
    table: HoodieTable,
    keys: Sequence[Any] | DataFrame,
    *,
    as_of: str | None = None,
    query_type: str = SNAPSHOT,
) -> LookupPlan:
    """The files holding ``keys`` (as ``lookup_dataframe`` takes them) in the query of
    ``query_type`` at ``as_of``."""
    fields = list(table.config.record_key_fields)
    if not fields:
        raise InvalidArgumentError("the table declares no record key fields", field="table")
    wanted = _key_table(keys, fields, snapshot_schema(table, as_of))
    snapshot = plan_snapshot(
        table,
        keys=set(record_keys(wanted, table.config).to_pylist()),
        as_of=as_of,
        query_type=query_type,
    )
    return LookupPlan(snapshot, wanted)


def read_in_driver(plan: LookupPlan, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of the plan's files having its keys, in the snapshot's schema (only
    ``columns``, when given), in one chunk. Only the columns asked and the key fields are
    decoded."""
    keys = plan.keys
    schema = plan.snapshot.schema
    names = list(dict.fromkeys([*keys.column_names, *columns])) if columns else schema.names
    candidates = [(name, pc.field(name).isin(keys.column(name))) for name in keys.column_names]
    read = pa.schema([schema.field(name) for name in names])
    rows = read_files(plan.snapshot.uri, plan.snapshot.files, read, candidates)
    if plan.snapshot.slices:
        merged = read_slices(plan.snapshot, read, candidates)
        rows = pa.concat_tables([rows, merged]).combine_chunks()
    if keys.num_columns > 1:
        rows = rows.join(keys, keys=keys.column_names, join_type="left semi")
    return rows.select(list(columns) if columns else schema.names).combine_chunks()


def _matching(frame: DataFrame, keys: pa.Table) -> DataFrame:
    """``frame``'s rows having one of ``keys`` (Spark applies it to the scan)."""
    if keys.num_columns == 1:
        name = keys.column_names[0]
        return frame.where(sf.col(f"`{name}`").isin(keys.column(0).to_pylist()))
    wanted = frame.sparkSession.createDataFrame(keys)
    return frame.join(sf.broadcast(wanted), on=keys.column_names, how="left_semi")


def _key_table(keys: Sequence[Any] | DataFrame, fields: list[str], schema: pa.Schema) -> pa.Table:
    """The distinct keys as a table of the key fields, typed as the snapshot's columns."""
    types = pa.schema([schema.field(name) for name in fields])
    if isinstance(keys, DataFrame):
        missing = [name for name in fields if name not in keys.columns]
        if missing:
            raise InvalidArgumentError(f"needs the key fields {', '.join(missing)}", field="keys")
        collected = keys.select(*[sf.col(f"`{name}`") for name in fields]).toArrow()
        return _distinct(lambda: collected.cast(types))
    composite = len(fields) > 1
    rows = [key if composite else (key,) for key in keys]
    if any(not isinstance(row, tuple) or len(row) != len(fields) for row in rows):
        raise InvalidArgumentError(
            f"each key must be a tuple of {len(fields)} values ({', '.join(fields)})",
            field="keys",
        )
    return _distinct(
        lambda: pa.table(
            [pa.array([row[i] for row in rows], type=f.type) for i, f in enumerate(types)],
            schema=types,
        )
    )


def _distinct(typed: Callable[[], pa.Table]) -> pa.Table:
    try:
        keys = typed()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as error:
        raise InvalidArgumentError(
            f"keys do not fit the key fields: {error}", field="keys"
        ) from error
    return keys.group_by(keys.column_names, use_threads=False).aggregate([])
