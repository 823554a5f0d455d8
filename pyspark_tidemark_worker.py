"""PySpark's Python worker, for the sessions Tidemark builds (``spark.python.worker.module``;
PySpark's daemon runs only worker modules named ``pyspark*``).

A task cancelled with interruption (a writer that lost its table lock stops its tasks)
has its socket closed by the JVM at once, while its worker is still busy; the worker's
last flush then fails and PySpark's daemon prints a ``BrokenPipeError`` traceback for
each such task on the job's stderr. Nobody is left to read that output, so a worker whose
JVM side hung up ends quietly instead; everything else is PySpark's own worker.
"""

import os
import runpy
from typing import IO

from pyspark.worker import main as pyspark_worker_main

EXIT_HUNG_UP = 1
"""The exit status PySpark's daemon gives a worker that failed."""


def main(infile: IO[bytes], outfile: IO[bytes]) -> None:
    try:
        pyspark_worker_main(infile, outfile)
    finally:
        try:
            outfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            os._exit(EXIT_HUNG_UP)


if __name__ == "__main__":  # spark.python.use.daemon=false: PySpark's worker as it is
    runpy.run_module("pyspark.worker", run_name="__main__")
