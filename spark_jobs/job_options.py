"""Command-line options of the Spark jobs that write files (``write``, ``cluster run``):
where markers and the record index are served, the Spark master and the lock lease, so
the jobs spell them the same way."""

from __future__ import annotations

import argparse

from spark_jobs.session import DEFAULT_MASTER

DEFAULT_LOCK_LEASE_S = 60.0


def add_job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--markers",
        choices=("direct", "service"),
        default="service",
        help="marker type (default service: batched by the marker service)",
    )
    parser.add_argument(
        "--marker-service",
        help="marker service address host:port (default: start an embedded one in the driver)",
    )
    parser.add_argument(
        "--index-service",
        metavar="HOST:PORT",
        help="index service address, for a table with a record index (default: start an "
        "embedded one in the driver)",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument(
        "--lock-lease-s",
        type=float,
        default=DEFAULT_LOCK_LEASE_S,
        help="table lock lease in seconds (renewed 6 times per lease; a writer that cannot "
        "renew for half of it stops and commits nothing)",
    )
