"""Run as a script by the fault tests: an upsert that a test kills before its commit."""

from __future__ import annotations

import sys

from spark_jobs.session import build_session
from spark_jobs.write import write

SCHEMA = "id int, name string, part string, ts long"

if __name__ == "__main__":
    spark = build_session("local[2]", shuffle_partitions=2)
    rows = [(int(key), "killed", "p", 9) for key in sys.argv[2].split(",")]
    write(spark, spark.createDataFrame(rows, SCHEMA), sys.argv[1], "upsert", lock_lease_s=1.0)
