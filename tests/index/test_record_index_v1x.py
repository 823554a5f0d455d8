"""The record index on a version 8 table: deltas count once their instant completes on
the layout 2 timeline (``<requested>_<completion>.commit``), and never when rolled back."""

from __future__ import annotations

import dataclasses

from table.table_testkit import people_config

from tidemark.index.record_index import RecordIndex
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.timeline.instant import new_instant_time

from .test_record_index import answers, build, changes


def test_deltas_follow_the_layout_two_timeline(local_root: str) -> None:
    config = dataclasses.replace(people_config(), table_version=8)
    timeline = HoodieTable.create(local_root, config).timeline

    def start() -> str:
        instant = new_instant_time(timeline.latest_timestamp())
        timeline.create_requested(instant, COMMIT)
        timeline.transition_inflight(instant, COMMIT)
        return instant

    first = start()
    timeline.complete(first, COMMIT, b"")
    build(HoodieTable.open(local_root).storage, {"a": ("p1", "f1-0", first)}, 2, first)
    index = RecordIndex.open(HoodieTable.open(local_root).storage)
    written = start()
    index.stage(written, changes({"a": ("p2", "f2-0"), "b": ("p3", "f3-0")}))
    assert answers(index, ["a", "b"]) == {"a": ("p1", "f1-0", first), "b": None}
    done = timeline.complete(written, COMMIT, b"")
    assert done.path.startswith(".hoodie/timeline/") and done.completion_time
    assert answers(index, ["a", "b"], as_of=written) == {
        "a": ("p2", "f2-0", written),
        "b": ("p3", "f3-0", written),
    }
    failed = start()
    index.stage(failed, changes({"c": ("p4", "f4-0")}))
    timeline.delete_pending(timeline.find(failed))
    assert answers(RecordIndex.open(index.storage), ["c"]) == {"c": None}
