"""How many partitions a write's shuffles get: as many as its input needs, not the
session's ``spark.sql.shuffle.partitions`` (200 unless set). A 10-row upsert into a
2,000-row table ran three stages of 200 tasks each in a user's session (adaptive execution
did not coalesce them), more than a minute on 2 cores; a micro-batch paid it every batch."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PARTITION_BYTES = 64 << 20
"""Input bytes per shuffle partition when Spark estimates the input's size (Spark's
``spark.sql.adaptive.advisoryPartitionSizeInBytes`` default)."""
UNKNOWN_SIZE = (1 << 63) - 1
"""Spark's estimate of an input it cannot size (``spark.sql.defaultSizeInBytes``): a
DataFrame of Python rows, an RDD."""


def shuffle_partitions(df: DataFrame, parallelism: int = 0) -> int:
    """``parallelism`` when given, else the input's estimated bytes in ``PARTITION_BYTES``
    pieces, at least the cluster's default parallelism (one task per core) and at most
    the session's ``spark.sql.shuffle.partitions``. The estimate is the optimizer's, from
    the logical plan: no Spark job, no stage of the input run early."""
    if parallelism:
        return parallelism
    spark = df.sparkSession
    configured = int(spark.conf.get(SHUFFLE_PARTITIONS) or 1)
    stats = df._jdf.queryExecution().optimizedPlan().stats()
    size = int(str(stats.sizeInBytes()))  # a Scala BigInt, a Python int through py4j
    pieces = math.ceil(size / PARTITION_BYTES) if size < UNKNOWN_SIZE else 0
    return max(1, min(configured, max(pieces, spark.sparkContext.defaultParallelism)))


@contextmanager
def sized_shuffles(df: DataFrame, parallelism: int = 0) -> Iterator[int]:
    """``spark.sql.shuffle.partitions`` set to ``shuffle_partitions(df, parallelism)`` in
    ``df``'s session while the write runs, and set back after: the jobs of other threads
    of that session meanwhile see it too (docs/python-api.md says so)."""
    spark = df.sparkSession
    before = spark.conf.get(SHUFFLE_PARTITIONS)
    partitions = shuffle_partitions(df, parallelism)
    spark.conf.set(SHUFFLE_PARTITIONS, str(partitions))
    try:
        yield partitions
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, str(before))
