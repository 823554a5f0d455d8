"""Several small results in one Spark job (``collect_together``).

A small write's jobs cost Spark's fixed price each (planning, scheduling the stages, the
tasks' round trips: about 0.3 s on two cores whatever the rows), so two aggregations a
write needs at the same point are collected by one action: each packed into a struct
column of its own, the packs unioned, the rows handed back per frame. The frames' stages
run side by side in the one job.
"""

from __future__ import annotations

import functools

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as sf

from tidemark.jobs.errors import run_spark_action
from tidemark.table.records.avro_names import INTERNAL_COLUMN_PREFIX


def collect_together(*frames: DataFrame) -> list[list[Row]]:
    """The rows of each of ``frames`` (small ones: aggregates), collected by one job."""
    names = [f"{INTERNAL_COLUMN_PREFIX}frame_{position}" for position in range(len(frames))]
    packed = [
        frame.select(sf.struct(*[sf.col(_quoted(c)) for c in frame.columns]).alias(name))
        for frame, name in zip(frames, names, strict=True)
    ]
    union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), packed)
    rows = run_spark_action(union.collect)
    return [[row[name] for row in rows if row[name] is not None] for name in names]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
