"""Timeline reloads and file-system views list folder by folder on the real moto S3
server: a big direct-marker dir under ``.hoodie/.temp`` is never listed."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from table.table_testkit import Writer, people_config, rows
from tidemark.storage import Storage, open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name, new_file_id, write_token
from tidemark.table.files.view import FileSystemView
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.timeline.instant import Instant, State
from tidemark.table.timeline.layout1 import Timeline
from tidemark.table.writes.markers import IOType, marker_dir, marker_name

MARKERS = 3000


@pytest.fixture
def s3_writer(s3_bucket: str) -> Writer:
    return Writer(HoodieTable.create(s3_bucket, people_config()))


def _write_direct_markers(storage: Storage, instant: str, count: int) -> None:
    def create(task: int) -> None:
        name = base_file_name(new_file_id(), write_token(task, 1, 0), instant)
        storage.write(f"{marker_dir(instant)}/{marker_name('eu', name, IOType.CREATE)}", b"")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(count)))


def test_reload_lists_only_the_timeline_folder_not_thousands_of_markers(
    s3_writer: Writer,
) -> None:
    first = s3_writer.commit(rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0)))
    pending = s3_writer.begin()
    storage = open_storage(s3_writer.table.uri)
    _write_direct_markers(storage, pending, MARKERS)
    assert sum(1 for _ in storage.list(marker_dir(pending) + "/")) == MARKERS

    storage.requests.reset()
    timeline = Timeline(storage)
    assert storage.requests.snapshot() == {"list": 1}
    assert timeline.instants() == [
        Instant(first, COMMIT, State.COMPLETED),
        Instant(pending, COMMIT, State.INFLIGHT),
    ]


def test_view_costs_one_list_per_partition_plus_folders_above(s3_writer: Writer) -> None:
    data = rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0), (3, "cid", "asia", 3.0))
    first = s3_writer.commit(data)
    pending = s3_writer.begin()
    storage = open_storage(s3_writer.table.uri)
    _write_direct_markers(storage, pending, 50)
    storage.write(f"orphan/{uuid.uuid4()}.txt", b"not a partition")
    view = FileSystemView(storage, Timeline(storage))

    storage.requests.reset()
    files = view.latest_base_files()
    assert [(f.partition_path, f.instant) for f in files] == [
        ("asia", first),
        ("eu", first),
        ("us", first),
    ]
    assert storage.requests.snapshot() == {"list": 1 + 3 + 1}

    storage.requests.reset()
    assert [f.partition_path for f in view.latest_base_files(["us"])] == ["us"]
    assert storage.requests.snapshot() == {"list": 1}
