"""What a reused Python worker keeps between tasks stays bounded: a stream's tasks each
write for a new instant, and the worker keeps a marker writer for a few of them only."""

from __future__ import annotations

from pathlib import Path

from tidemark.jobs.task import MARKER_WRITERS_KEPT, marker_writer
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.writes.markers import DirectMarkerWriter, MarkerSpec


def test_a_worker_keeps_marker_writers_of_its_last_instants_only(tmp_path: Path) -> None:
    instants = [new_instant_time() for _ in range(3 * MARKER_WRITERS_KEPT)]
    writers = [marker_writer(MarkerSpec("direct", str(tmp_path), i)) for i in instants]
    assert all(isinstance(writer, DirectMarkerWriter) for writer in writers)
    assert marker_writer.cache_info().currsize <= MARKER_WRITERS_KEPT
    newest = MarkerSpec("direct", str(tmp_path), instants[-1])
    assert marker_writer(newest) is writers[-1]  # the running task's writer is reused
