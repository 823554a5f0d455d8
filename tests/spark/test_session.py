"""The SparkSession every job builds (spark_jobs/session.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
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


def test_local_workers_are_the_quiet_worker_module(spark: SparkSession) -> None:
    """A local session's tasks run in ``pyspark_tidemark_worker`` (tests/test_quiet_worker.py
    shows what it changes); a task run through it still answers."""

    def worker_module(_: Iterable[int]) -> Iterator[str]:
        import sys  # runs in the worker

        yield str(sys.modules.get("pyspark_tidemark_worker"))

    assert spark.conf.get("spark.python.worker.module") == "pyspark_tidemark_worker"
    [module] = spark.sparkContext.parallelize([0], 1).mapPartitions(worker_module).collect()
    assert "pyspark_tidemark_worker" in module


def test_reused_workers_run_tasks_with_their_modules_frozen(spark: SparkSession) -> None:
    """A worker's later tasks find its long-lived objects frozen (``gc.freeze``), so the
    daemon's collection after each task walks only what the task left. (Workers run the
    jobs' Arrow tasks again, an idle one each, the session's earlier tests' too; an RDD's
    Python task here got a new worker each time.)"""

    def frozen(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import gc
        import os

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "n": [gc.get_freeze_count()]})

    one_task = spark.range(1, numPartitions=1)
    runs = [tuple(one_task.mapInArrow(frozen, "pid long, n long").collect()[0]) for _ in range(6)]
    again = [count for n, (pid, count) in enumerate(runs) if pid in dict(runs[:n])]
    assert all(count > 0 for count in again), runs
    assert any(count > 0 for _, count in runs), runs  # a worker that ran a task before
