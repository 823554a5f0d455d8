"""Every Storage operation, run against local disk and the real moto S3 server."""

from __future__ import annotations

import io
import pickle
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidemark.errors import NotFoundError
from tidemark.storage import FileInfo, Storage, open_storage


def test_write_read_exists_size_round_trip(storage: Storage) -> None:
    storage.write("p1/a.bin", b"first")
    storage.write("p1/a.bin", b"second version")
    assert storage.read("p1/a.bin") == b"second version"
    assert storage.exists("p1/a.bin")
    assert not storage.exists("p1/missing.bin")
    assert storage.size("p1/a.bin") == len(b"second version")
    assert storage.requests.snapshot() == {"put": 2, "get": 1, "head": 3}


def test_missing_objects_raise_not_found_naming_path(storage: Storage) -> None:
    for operation in (storage.read, storage.size, storage.open_input):
        with pytest.raises(NotFoundError) as raised:
            operation("nope/none.bin")
        assert raised.value.field == "path"
        assert "nope/none.bin" in str(raised.value)


def test_create_if_absent_creates_once_and_keeps_first_content(storage: Storage) -> None:
    assert storage.create_if_absent("locks/l1", b"owner-a") is True
    assert storage.create_if_absent("locks/l1", b"owner-b") is False
    assert storage.read("locks/l1") == b"owner-a"
    assert storage.requests.snapshot()["conditional_put"] == 2


def test_create_if_absent_race_has_exactly_one_winner(storage: Storage) -> None:
    barrier = threading.Barrier(16)
    created: dict[int, bool] = {}

    def contend(writer: int) -> None:
        barrier.wait()
        created[writer] = storage.create_if_absent("markers/f1.marker", str(writer).encode())

    threads = [threading.Thread(target=contend, args=(writer,)) for writer in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [writer for writer, won in created.items() if won]
    assert len(created) == 16
    assert len(winners) == 1
    assert storage.read("markers/f1.marker") == str(winners[0]).encode()


def test_writes_into_a_folder_that_deletes_leave_empty_never_fail(local_root: str) -> None:
    """A delete prunes the folder it leaves empty, as an object store has none: writers
    of the same folder (lock waiters' tickets) must make it again, whenever it goes."""
    storage = open_storage(local_root)
    failures: list[str] = []

    def write_and_delete(writer: int) -> None:
        for number in range(400):
            path = f"lock.queue/{writer}-{number}"
            try:
                if number % 3 == 0:
                    assert storage.create_if_absent(path, b"ticket")
                elif number % 3 == 1:
                    storage.write(path, b"ticket")
                else:
                    with storage.open_output(path) as out:
                        out.write(b"ticket")
                storage.delete(path)
            except (OSError, AssertionError) as error:
                failures.append(f"{path}: {error!r}")

    threads = [threading.Thread(target=write_and_delete, args=(writer,)) for writer in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    assert storage.list_dir("").dirs == ()  # the last delete pruned the folder


def test_list_is_recursive_sorted_relative_and_prefix_filtered(storage: Storage) -> None:
    began = time.time()
    for path in ["b/2.txt", "a/1.txt", "a/sub/3.txt", "ab.txt", "c.txt"]:
        storage.write(path, path.encode())
    assert [info.path for info in storage.list("")] == [
        "a/1.txt",
        "a/sub/3.txt",
        "ab.txt",
        "b/2.txt",
        "c.txt",
    ]
    assert list(storage.list("a/")) == [FileInfo("a/1.txt", 7, 0), FileInfo("a/sub/3.txt", 11, 0)]
    written = [info.modified_s for info in [*storage.list(""), *storage.list_dir("a").files]]
    assert all(began - 2 <= modified <= time.time() + 2 for modified in written)  # S3: seconds
    assert [info.path for info in storage.list("a")] == ["a/1.txt", "a/sub/3.txt", "ab.txt"]
    assert list(storage.list("zzz/")) == []


def test_delete_many_ignores_missing_and_delete_prefix_empties(storage: Storage) -> None:
    for path in ["t/1", "t/2", "t/3", "keep/1"]:
        storage.write(path, b"x")
    assert storage.delete_many(["t/1", "t/2", "t/never-existed"]) == 3
    assert [info.path for info in storage.list("")] == ["keep/1", "t/3"]
    assert storage.delete_prefix("t/") == 1
    storage.delete("keep/1")
    assert list(storage.list("")) == []


def test_open_input_seeks_and_reads_ranges(storage: Storage) -> None:
    data = bytes(range(256)) * 4096
    storage.write("blob", data)
    with storage.open_input("blob") as stream:
        assert stream.seekable()
        stream.seek(-8, io.SEEK_END)
        assert stream.read() == data[-8:]
        stream.seek(1000)
        assert stream.read(24) == data[1000:1024]
        assert stream.tell() == 1024
        stream.seek(10, io.SEEK_CUR)
        assert stream.read(6) == data[1034:1040]
        stream.seek(0)
        assert stream.read() == data
        assert stream.read(5) == b""


def test_open_output_publishes_on_close_only(storage: Storage) -> None:
    with storage.open_output("out/file.bin") as stream:
        stream.write(b"part one, ")
        stream.flush()
        assert not storage.exists("out/file.bin")
        assert list(storage.list("")) == []
        stream.write(b"part two")
    assert storage.read("out/file.bin") == b"part one, part two"
    assert [info.path for info in storage.list("out/")] == ["out/file.bin"]


def test_open_output_discards_when_the_writer_fails(storage: Storage) -> None:
    with pytest.raises(RuntimeError), storage.open_output("out/broken.bin") as stream:
        stream.write(b"partial")
        raise RuntimeError("writer crashed")
    assert not storage.exists("out/broken.bin")
    assert list(storage.list("")) == []


def test_parquet_written_with_open_output_reads_back(storage: Storage) -> None:
    table = pa.table({"key": [f"k{i}" for i in range(5000)], "value": list(range(5000))})
    with storage.open_output("p=1/data.parquet") as stream:
        pq.write_table(table, stream, row_group_size=1000)
    with storage.open_input("p=1/data.parquet") as stream:
        parquet = pq.ParquetFile(stream)
        assert parquet.metadata.num_row_groups == 5
        assert parquet.read_row_group(3).column("value").to_pylist() == list(range(3000, 4000))
    with storage.open_input("p=1/data.parquet") as stream:
        assert pq.read_table(stream).equals(table)


def test_storage_pickles_to_an_equivalent_storage(storage: Storage) -> None:
    storage.write("shared.txt", b"visible to executors")
    clone = pickle.loads(pickle.dumps(storage))
    assert type(clone) is type(storage)
    assert clone.uri == storage.uri
    assert clone.read("shared.txt") == b"visible to executors"
    assert clone.requests.snapshot() == {"get": 1}


def test_open_storage_of_same_uri_sees_same_objects(storage: Storage) -> None:
    storage.write("x/y", b"z")
    assert open_storage(storage.uri).read("x/y") == b"z"
