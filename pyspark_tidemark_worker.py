"""PySpark's Python worker, for the sessions Tidemark builds (``spark.python.worker.module``;
PySpark's daemon runs only worker modules named ``pyspark*``).

A task cancelled with interruption (a writer that lost its table lock stops its tasks)
has its socket closed by the JVM at once, while its worker is still busy; the worker's
last flush then fails and PySpark's daemon prints a ``BrokenPipeError`` traceback for
each such task on the job's stderr. Nobody is left to read that output, so a worker whose
JVM side hung up ends quietly instead.

PySpark's daemon runs a full ``gc.collect()`` after every task of a reused worker, and a
worker that imported pyarrow, gRPC and the job's modules holds 80,000-110,000 tracked
objects: each collection walked them all, most of a small task's CPU (10 warm 2-row
upserts: the workers' CPU 5.9 s). The modules and what they hold live as long as the
worker, so after a task that imported modules the worker collects once and freezes what
survived (``gc.freeze``: the collector skips it from then on; reference counting still
frees it): 1.0 s for the same writes. Everything else is PySpark's own worker.
"""

import gc
import os
import runpy
import sys
from typing import IO

from pyspark.worker import main as pyspark_worker_main

EXIT_HUNG_UP = 1
"""The exit status PySpark's daemon gives a worker that failed."""

_modules_frozen = 0
"""How many modules were loaded when this worker last froze its long-lived objects."""


def main(infile: IO[bytes], outfile: IO[bytes]) -> None:
    try:
        pyspark_worker_main(infile, outfile)
    finally:
        try:
            outfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            os._exit(EXIT_HUNG_UP)
    freeze_new_modules()


def freeze_new_modules() -> None:
    """Collect, then freeze every tracked object, when modules were loaded since the last
    freeze: a worker's imports happen in its first tasks, so it freezes a few times, each
    time its long-lived state (modules, their caches) and no garbage (collected first)."""
    global _modules_frozen
    if len(sys.modules) > _modules_frozen:
        gc.collect()
        gc.freeze()
        _modules_frozen = len(sys.modules)


if __name__ == "__main__":  # spark.python.use.daemon=false: PySpark's worker as it is
    runpy.run_module("pyspark.worker", run_name="__main__")
