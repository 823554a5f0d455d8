"""Executor-side context: the running task's identity and per-process storage and markers.

Executors never receive driver-side clients: they reopen storage by URI and build marker
writers from a picklable MarkerSpec, once per Python worker process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark import TaskContext

from tidemark.clients.marker import marker_writer_for
from tidemark.storage import Storage, open_storage
from tidemark.table.files.file_names import write_token
from tidemark.table.writes.markers import MarkerSpec, MarkerWriter


@dataclass(frozen=True)
class TaskIdentity:
    """Who is writing: names files (write token) and numbers records (seqno)."""

    partition_id: int
    stage_id: int
    attempt_id: int

    @property
    def write_token(self) -> str:
        return write_token(self.partition_id, self.stage_id, self.attempt_id)


def current_task() -> TaskIdentity:
    context = TaskContext.get()
    if context is None:
        return TaskIdentity(partition_id=0, stage_id=0, attempt_id=0)
    return TaskIdentity(
        partition_id=context.partitionId(),
        stage_id=context.stageId(),
        attempt_id=context.taskAttemptId(),
    )


@functools.cache
def storage_for(uri: str) -> Storage:
    return open_storage(uri)


MARKER_WRITERS_KEPT = 8
"""Marker writers a reused Python worker keeps: one per instant it wrote for, so a
stream's worker would otherwise keep one per batch for as long as it lives."""


@functools.lru_cache(maxsize=MARKER_WRITERS_KEPT)
def marker_writer(spec: MarkerSpec) -> MarkerWriter:
    return marker_writer_for(spec)


_next_seqno: dict[int, int] = {}


def reserve_seqnos(task: TaskIdentity, count: int) -> int:
    """First of ``count`` record sequence numbers, unique within the task attempt. A Python
    worker runs one task at a time, so only the current attempt's count is kept (a reused
    worker would otherwise keep one per task it ever ran)."""
    if task.attempt_id not in _next_seqno:
        _next_seqno.clear()
    start = _next_seqno.get(task.attempt_id, 0)
    _next_seqno[task.attempt_id] = start + count
    return start
