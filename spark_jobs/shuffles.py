"""How many partitions a write's shuffles get: as many as its input needs, not the
session's ``spark.sql.shuffle.partitions`` (200 unless set). A 10-row upsert into a
2,000-row table ran three stages of 200 tasks each in a user's session (adaptive execution
did not coalesce them), more than a minute on 2 cores; a micro-batch paid it every batch."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PARTITION_BYTES = 64 << 20
"""Input bytes per shuffle partition when Spark estimates the input's size (Spark's
``spark.sql.adaptive.advisoryPartitionSizeInBytes`` default)."""
UNKNOWN_SIZE = (1 << 63) - 1
"""Spark's estimate of an input it cannot size (``spark.sql.defaultSizeInBytes``): a
DataFrame of Python rows, an RDD, a streaming source's micro-batch."""
INPUT_TASK_BYTES = 8 << 20
"""Input bytes a task of the write's first stages is worth: each such task starts Python
runners (keying, the index lookup) before its first row: ``python -m benchmarks stream
--table-type both``'s 5,000-row batches were validated and tagged in 0.66 s (median) in
their four partitions' tasks, 0.42 s in one (docs/benchmarks.md, 2 cores)."""


def shuffle_partitions(df: DataFrame, configured: int, parallelism: int = 0) -> int:
    """``parallelism`` when given, else the input's estimated bytes in ``PARTITION_BYTES``
    pieces, at least the cluster's default parallelism (one task per core) and at most
    ``configured`` (the session's ``spark.sql.shuffle.partitions``). The estimate is the
    optimizer's, from the logical plan: no Spark job, no stage of the input run early."""
    if parallelism:
        return parallelism
    size = estimated_bytes(df)
    pieces = math.ceil(size / PARTITION_BYTES) if size is not None else 0
    default = df.sparkSession.sparkContext.defaultParallelism
    return max(1, min(configured, max(pieces, default)))


def coalesced_input(df: DataFrame, parallelism: int = 0, expected: int | None = None) -> DataFrame:
    """``df`` in one partition per ``INPUT_TASK_BYTES`` of its estimated size (no shuffle:
    neighbouring partitions merged), or of ``expected`` bytes (a stream's last batch) when
    Spark cannot size it, when that is fewer tasks than the cluster's default parallelism
    (one a core); as it is when neither is known, when it fills every core, or when
    ``parallelism`` (the write's ``shuffle_parallelism``) is given."""
    size = None if parallelism else estimated_bytes(df) or expected
    if size is None:
        return df
    tasks = max(1, math.ceil(size / INPUT_TASK_BYTES))
    return df.coalesce(tasks) if tasks < df.sparkSession.sparkContext.defaultParallelism else df


def estimated_bytes(df: DataFrame) -> int | None:
    """The optimizer's estimate of ``df``'s size, from the logical plan (no Spark job, no
    stage of the input run early); None when Spark cannot size it (``UNKNOWN_SIZE``)."""
    stats = df._jdf.queryExecution().optimizedPlan().stats()
    size = int(str(stats.sizeInBytes()))  # a Scala BigInt, a Python int through py4j
    return size if size < UNKNOWN_SIZE else None


_lock = threading.Lock()
_running: dict[int, tuple[str, int]] = {}
"""By session: its own ``spark.sql.shuffle.partitions`` and how many writes run in it."""


@contextmanager
def sized_shuffles(df: DataFrame, parallelism: int = 0) -> Iterator[int]:
    """``spark.sql.shuffle.partitions`` set to ``shuffle_partitions`` in ``df``'s session
    while the write runs; the session's own setting is put back when the last of the
    writes running in it ends (concurrent writes each set theirs; jobs of other threads
    of that session meanwhile see it too: docs/python-api.md says so)."""
    spark = df.sparkSession
    key = int(spark._jsparkSession.hashCode())  # the JVM session, whichever wrapper
    with _lock:
        own, running = _running.get(key, (str(spark.conf.get(SHUFFLE_PARTITIONS)), 0))
        _running[key] = (own, running + 1)
    try:
        partitions = shuffle_partitions(df, int(own), parallelism)
        spark.conf.set(SHUFFLE_PARTITIONS, str(partitions))
        yield partitions
    finally:
        with _lock:
            own, running = _running.pop(key)
            if running > 1:
                _running[key] = (own, running - 1)
            else:
                spark.conf.set(SHUFFLE_PARTITIONS, own)
