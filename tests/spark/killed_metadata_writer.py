"""Run as a script by the metadata table's kill test: an upsert of a Parquet file's rows
that exits after the metadata table recorded its commit, before the commit completes.

Usage: killed_metadata_writer.py TABLE_URI INPUT_PARQUET
"""

from __future__ import annotations

import sys

from tidemark.jobs.session import build_session
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions

LEASE_S = 2.0
"""The table lock's and the write's lease: short, so the next write waits little."""

if __name__ == "__main__":
    spark = build_session("local[2]", shuffle_partitions=2)
    rows = spark.read.parquet(sys.argv[2])
    write(spark, rows, sys.argv[1], "upsert", WriteOptions(lock_lease_s=LEASE_S, markers="direct"))
