"""``pyspark_tidemark_worker``: a Python worker whose task's JVM side hung up (a cancelled
task's socket, closed at once) ends quietly, where PySpark's own leaves unsendable output
that its daemon's last flush reports as a ``BrokenPipeError`` traceback on the job's stderr.

Each worker runs in a child process, as under PySpark's daemon (a fork per worker), with a
socket whose other end, the JVM's, is closed."""

from __future__ import annotations

import subprocess
import sys

WORKER = """
import os, socket, sys
import {module} as worker

ours, jvm = socket.socketpair()
infile = os.fdopen(os.dup(ours.fileno()), "rb", 65536)
outfile = os.fdopen(os.dup(ours.fileno()), "wb", 65536)
jvm.close()
try:
    worker.main(infile, outfile)
except SystemExit:
    pass
finally:
    outfile.flush()  # what PySpark's daemon does after each worker
"""


def _run_worker(module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WORKER.format(module=module)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pysparks_worker_reports_a_hung_up_jvm_with_a_traceback() -> None:
    done = _run_worker("pyspark.worker")
    assert done.returncode == 1
    assert "BrokenPipeError" in done.stderr


def test_the_quiet_worker_ends_without_a_word() -> None:
    done = _run_worker("pyspark_tidemark_worker")
    assert done.returncode == 1
    assert done.stderr == ""
