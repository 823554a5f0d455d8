"""The Python API for users' own PySpark jobs (docs/python-api.md).

``register(spark)`` makes ``spark.read.format("tidemark").load(path)`` read a table's snapshot
with record-index and partition pruning; ``read(spark, path)`` is the same in one call.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.datasource import NAME, PUSHDOWN_CONF, TidemarkDataSource
from tidemark.table.table import HoodieTable


def register(spark: SparkSession) -> None:
    """Register the ``tidemark`` data source in ``spark`` and turn on
    ``spark.sql.python.filterPushdown.enabled`` in it (a runtime SQL conf of this session:
    PySpark refuses a source that takes filters while it is off)."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(TidemarkDataSource)


def read(spark: SparkSession, path: str, *, as_of: str | None = None) -> DataFrame:
    """The snapshot of the table at ``path`` (at instant ``as_of``, default the latest) with
    Hudi's meta columns; ``=``/``IN`` filters on it prune by record index and partition. A
    path without a table is a ``NotFoundError`` here, before Spark plans anything."""
    HoodieTable.open(path)
    register(spark)
    reader = spark.read.format(NAME)
    if as_of is not None:
        reader = reader.option("as_of", as_of)
    return reader.load(path)
