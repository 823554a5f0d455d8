"""Run as a script by the fault tests: an upsert that a test kills before its commit.

Usage: killed_writer.py TABLE_URI KEYS [direct|service]; with ``service`` the write uses
an embedded marker service, which dies with the process.
"""

from __future__ import annotations

import sys

from tidemark.jobs.session import build_session
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.services.marker.embedded import start_embedded_marker_service

SCHEMA = "id int, name string, part string, ts long"
LEASE_S = 2.0
"""The table lock's lease (and the marker dir's, with ``service``): short, so the next write
waits little once the process is dead, yet 1 s of safety margin on a busy machine."""

if __name__ == "__main__":
    spark = build_session("local[2]", shuffle_partitions=2)
    rows = [(int(key), "killed", "p", 9) for key in sys.argv[2].split(",")]
    df = spark.createDataFrame(rows, SCHEMA)
    if sys.argv[3:] == ["service"]:
        service = start_embedded_marker_service()
        write(
            spark,
            df,
            sys.argv[1],
            "upsert",
            WriteOptions(
                lock_lease_s=LEASE_S, markers="service", marker_service_address=service.address
            ),
        )
    else:
        write(spark, df, sys.argv[1], "upsert", WriteOptions(lock_lease_s=LEASE_S))
