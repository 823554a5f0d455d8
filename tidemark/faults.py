"""Failure injection points: inert in production, set by tests to prove retries, reconcile
and rollback.

Task faults are requested through a Spark local property (set on the driver thread, seen by
that job's tasks); driver faults through ``TIDEMARK_TEST_EXIT_AT`` so a test can kill a
writer process at a named point, or ``TIDEMARK_TEST_HOLD_AT`` (``point:folder``) so it can
act while the process waits there. All are inert unless a test sets them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the services call the hold points too, and have no pyspark
    from pyspark import TaskContext

FAIL_TASK_ATTEMPT_PROPERTY = "tidemark.test.fail_task_attempt"
EXIT_AT_ENV = "TIDEMARK_TEST_EXIT_AT"
EXIT_CODE = 17
HOLD_AT_ENV = "TIDEMARK_TEST_HOLD_AT"
REACHED_FILE = "reached"
RESUME_FILE = "resume"


class InjectedTaskFailureError(RuntimeError):
    """Raised by a task attempt a test asked to fail after it wrote its file."""


def fail_task_after_file_written(context: TaskContext) -> None:
    """Fail attempt 0 of each task once its data file exists (a lost or speculative attempt).

    The property value is the attempt number to fail, usually ``0``.
    """
    requested = context.getLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY)
    if requested is not None and int(requested) == context.attemptNumber():
        raise InjectedTaskFailureError(
            f"injected failure of task attempt {context.attemptNumber()}"
        )


def exit_if_requested(point: str) -> None:
    """Kill the driver process abruptly (no cleanup) when a test named this point."""
    if os.environ.get(EXIT_AT_ENV) == point:
        os._exit(EXIT_CODE)


def hold_if_requested(point: str) -> None:
    """When a test named this point (``point:folder``), create ``folder/reached`` and wait
    until the test creates ``folder/resume``: the test acts at a known moment."""
    requested, _, folder = os.environ.get(HOLD_AT_ENV, "").partition(":")
    if requested != point:
        return
    (Path(folder) / REACHED_FILE).touch()
    while not (Path(folder) / RESUME_FILE).exists():
        time.sleep(0.05)
