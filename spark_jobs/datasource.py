"""``spark.read.format("tidemark").load(path)``: a PySpark Python data source over a table's
snapshot, Hudi's meta columns included (what ``read_dataframe`` returns).

Planning (schema, filters, the files to open) runs once in the driver's Python worker through
``spark_jobs.read.plan_read``; each base file is one Spark task reading it with
``spark_jobs.read.read_file``. ``=`` and ``IN`` filters on top-level string, integer and
boolean columns are pushed: on every record key field they become a record index lookup (only
the file groups holding the keys are opened), on partition fields they prune partitions, and
the rows of the opened files are filtered by them; every other filter is left to Spark.

PySpark fails a query whose reader defines ``pushFilters`` while
``spark.sql.python.filterPushdown.enabled`` is off (its default), and a data source cannot see
the session's confs. So there are two sources named ``tidemark``: ``TidemarkDataSource``, with
pushdown, which ``tidemark.spark.register`` registers after turning that conf on, and
``ScanDataSource``, without, which PySpark finds by itself (module ``pyspark_tidemark``) and
which reads every file of the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    In,
    InputPartition,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from tidemark.errors import InvalidArgumentError
from tidemark.jobs.read import ReadPlan, plan_read, read_file, table_schema

NAME = "tidemark"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
"""The runtime SQL conf PySpark checks before it lets a reader's ``pushFilters`` run."""


class FilePartition(InputPartition):
    """One Spark task: the plan narrowed to one base file (to none for a snapshot without
    files, as Spark needs a partition). The reader is pickled to the tasks before
    ``partitions()`` runs, so what a task needs travels here."""

    def __init__(self, plan: ReadPlan) -> None:
        super().__init__(plan.paths)
        self.plan = plan


class ScanReader(DataSourceReader):
    """Reads every planned base file; ``where`` (column -> value or list) is what the
    pushdown subclass accepted from Spark, empty here."""

    def __init__(self, table_uri: str, schema: StructType, as_of: str | None) -> None:
        self.table_uri = table_uri
        self.output = to_arrow_schema(schema, timezone="UTC")
        self.as_of = as_of
        self.where: dict[str, Any] = {}

    def partitions(self) -> Sequence[InputPartition]:
        plan = plan_read(self.table_uri, self.where, self.as_of)
        tasks = [replace(plan, paths=[path]) for path in plan.paths] or [plan]
        return [FilePartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        for path in partition.plan.paths:
            yield from read_file(partition.plan, path, self.output).to_batches()


class PushdownReader(ScanReader):
    """Takes the ``=`` and ``IN`` filters it can answer exactly (see the module docstring),
    one per column; Spark keeps evaluating the others."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # noqa: N802 (PySpark's name)
        remaining: list[Filter] = []
        for item in filters:
            condition = self._condition(item)
            if condition is None or condition[0] in self.where:
                remaining.append(item)
            else:
                self.where[condition[0]] = condition[1]
        return remaining

    def _condition(self, item: Filter) -> tuple[str, Any] | None:
        """(column, value or list) for a filter read_file applies with SQL's meaning: no
        nulls (never equal in SQL) and no empty strings (stored like nulls in partition
        paths)."""
        if isinstance(item, EqualTo):
            values, wanted = [item.value], item.value
        elif isinstance(item, In):
            values, wanted = list(item.value), list(item.value)
        else:
            return None
        if len(item.attribute) != 1:
            return None
        name = item.attribute[0]
        if name not in self.output.names or not _pushable(self.output, name):
            return None
        if any(v is None or v == "" for v in values):
            return None
        return name, wanted


class ScanDataSource(DataSource):
    """The snapshot of the table at the ``path`` option (``as_of``: an instant, default the
    latest), read whole; PySpark's discovery registers this one."""

    reader_class: type[ScanReader] = ScanReader

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return from_arrow_schema(table_schema(self._path(), self.options.get("as_of")))

    def reader(self, schema: StructType) -> DataSourceReader:
        return self.reader_class(self._path(), schema, self.options.get("as_of"))

    def _path(self) -> str:
        path = self.options.get("path")
        if not path:
            raise InvalidArgumentError("give the table's path: load(path)", field="path")
        return str(path)


class TidemarkDataSource(ScanDataSource):
    """The snapshot with ``=``/``IN`` pushdown (record index, partitions); needs
    ``PUSHDOWN_CONF`` on, as ``tidemark.spark.register`` sets it."""

    reader_class = PushdownReader


def _pushable(schema: pa.Schema, name: str) -> bool:
    kind = schema.field(name).type
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
    )
