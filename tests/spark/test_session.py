"""The SparkSession every job builds (spark_jobs/session.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pyspark.sql import SparkSession


def test_python_workers_talk_to_their_jvm_over_unix_domain_sockets(spark: SparkSession) -> None:
    """Over loopback TCP a Python task waited about 30 ms longer for its input: the
    worker running a task holds a Unix domain socket (one listed in /proc/net/unix)."""

    def unix_sockets(_: Iterable[int]) -> Iterator[int]:
        from pathlib import Path  # runs in the worker: a closure, pickled by value

        prefix = "socket:["
        held = set()
        for fd in Path("/proc/self/fd").iterdir():
            try:
                target = str(fd.readlink())
            except FileNotFoundError:  # the listing's own descriptor, closed since
                continue
            if target.startswith(prefix):
                held.add(target[len(prefix) : -1])
        rows = Path("/proc/net/unix").read_text().splitlines()[1:]
        yield len(held & {row.split()[6] for row in rows if len(row.split()) > 6})

    assert spark.conf.get("spark.python.unix.domain.socket.enabled") == "true"
    [unix] = spark.sparkContext.parallelize([0], 1).mapPartitions(unix_sockets).collect()
    assert unix >= 1
