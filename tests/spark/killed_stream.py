"""Run as a script by the stream restart test: a streaming query through the stream
writer, killed by a fault point in the middle of its first batch.

Usage: killed_stream.py TABLE_URI SOURCE_DIR CHECKPOINT_DIR (the test sets
``TIDEMARK_TEST_EXIT_AT``).
"""

from __future__ import annotations

import sys
from dataclasses import replace

import tidemark.spark
from tidemark.jobs.session import build_session

SCHEMA = "id int, name string, part string, ts long"
LEASE_S = 2.0
"""The table lock's lease: short, so the restarted query waits little for the dead one's."""
QUERY_ID = "killed-stream"


def run_query(table_uri: str, source: str, checkpoint: str) -> list[tidemark.spark.WriteResult]:
    """Every batch not yet in the checkpoint, then stop; the batches' results."""
    spark = build_session("local[2]", shuffle_partitions=2)
    options = replace(tidemark.spark.STREAM_OPTIONS, lock_lease_s=LEASE_S)
    with tidemark.spark.stream_writer(table_uri, query_id=QUERY_ID, options=options) as writer:
        query = (
            spark.readStream.schema(SCHEMA)
            .parquet(source)
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return writer.results


if __name__ == "__main__":
    run_query(*sys.argv[1:4])
