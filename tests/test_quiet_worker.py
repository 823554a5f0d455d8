"""``pyspark_tidemark_worker``: a Python worker whose task's JVM side hung up (a cancelled
task's socket, closed at once) ends quietly, where PySpark's own leaves unsendable output
that its daemon's last flush reports as a ``BrokenPipeError`` traceback on the job's stderr;
after a task that loaded modules it freezes its long-lived objects, not its garbage.

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


FREEZING = """
import gc, sys, weakref
import pyspark_tidemark_worker as worker

class Node:
    pass

garbage = Node(); garbage.self = garbage; dropped = weakref.ref(garbage); del garbage
kept = Node(); kept.self = kept
worker.freeze_new_modules()
first = gc.get_freeze_count()
worker.freeze_new_modules()
again = gc.get_freeze_count()
import json.tool  # a task that loads a module
worker.freeze_new_modules()
print(dropped() is None, first > 0, again == first, gc.get_freeze_count() > first)
"""


def test_a_worker_freezes_what_survives_only_after_loading_modules() -> None:
    """Freezing keeps the collector from walking the worker's modules after every task;
    garbage cycles are collected first, and no module loaded means no freeze."""
    done = subprocess.run(
        [sys.executable, "-c", FREEZING], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    collected, froze, unchanged, froze_again = done.stdout.split()
    assert collected == "True", "a garbage cycle was frozen instead of collected"
    assert (froze, unchanged, froze_again) == ("True", "True", "True")
