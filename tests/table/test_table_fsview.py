"""File-system view: latest committed file per group; pending, failed, replaced invisible."""

from __future__ import annotations

from pathlib import Path

from table.hudi_archive import Entry, archived_commit, write_archive
from table.table_testkit import Writer, copy_fixture, rows
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.view import partition_listings, partitions_around
from tidemark.table.timeline.instant import State

FIRST = rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0))


def test_latest_file_per_group_and_pending_instants_invisible(people: Writer) -> None:
    first = people.commit(FIRST)
    second = people.commit(rows((1, "ann", "eu", 5.0)))
    pending = people.begin()
    people.write_files(pending, rows((2, "bob", "us", 9.0), (3, "cid", "asia", 3.0)))
    view = people.table.view()
    latest = {f.partition_path: f.instant for f in view.latest_base_files()}
    assert latest == {"eu": second, "us": first}
    assert view.partitions() == ["eu", "us"]
    assert [f.partition_path for f in view.latest_base_files(["us"])] == ["us"]
    assert {
        f.partition_path: f.instant for f in people.table.view(as_of=first).latest_base_files()
    } == {
        "eu": first,
        "us": first,
    }
    assert [i.state for i in people.table.timeline.instants()][-1] is State.INFLIGHT


def test_requested_only_instant_files_are_invisible(people: Writer) -> None:
    people.commit(FIRST)
    instant = people.begin()
    people.write_files(instant, rows((3, "cid", "asia", 3.0)))
    people.table.storage.delete(f".hoodie/{instant}.inflight")
    people.table.timeline.reload()
    assert "asia" not in people.table.view().partitions()


def test_replaced_groups_excluded_in_fixture(tmp_path: Path) -> None:
    table = HoodieTable.open(copy_fixture("v6_simplekeygen_nonhivestyle_overwritetable", tmp_path))
    groups = table.view().file_groups_by_partition()
    assert {p: [f.file_id for f in files] for p, files in groups.items()} == {
        "30": ["ebcb261d-62d3-4895-90ec-5b3c9622dff4-0"]
    }


ARCHIVED_FIRST = "20240418172802262"
SECOND = "20240418172804498"


def _archive_first_commit(tmp_path: Path, archived: list[Entry] | None) -> HoodieTable:
    """The fixture as Hudi's archiver leaves it: the first commit gone from the active
    timeline and, unless ``archived`` is None, a log file under .hoodie/archived holding
    those entries."""
    uri = copy_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    for suffix in ("commit", "commit.requested", "inflight"):
        (Path(uri) / ".hoodie" / f"{ARCHIVED_FIRST}.{suffix}").unlink()
    folder = Path(uri) / ".hoodie" / "archived"
    folder.mkdir()
    if archived is not None:
        write_archive(folder, 1, archived)
    return HoodieTable.open(uri)


def test_archived_commits_stay_visible(tmp_path: Path) -> None:
    table = _archive_first_commit(tmp_path, archived_commit(ARCHIVED_FIRST))
    files = {f.partition_path: f.instant for f in table.view().latest_base_files()}
    assert files == {"10": SECOND, "20": ARCHIVED_FIRST, "30": SECOND}


def test_older_than_the_active_timeline_is_no_proof_of_a_commit(tmp_path: Path) -> None:
    """An empty archive folder (Hudi creates one with the table) archived nothing."""
    table = _archive_first_commit(tmp_path, None)
    files = {f.partition_path: f.instant for f in table.view().latest_base_files()}
    assert files == {"10": SECOND, "30": SECOND}


def test_instant_the_archive_does_not_list_as_completed_stays_invisible(
    tmp_path: Path,
) -> None:
    """Archived entries of other instants, and of this one only requested and inflight (a
    rolled-back write), prove nothing about its files."""
    entries = [*archived_commit("20240418172700000"), *archived_commit(ARCHIVED_FIRST)[:2]]
    table = _archive_first_commit(tmp_path, entries)
    files = {f.partition_path: f.instant for f in table.view().latest_base_files()}
    assert files == {"10": SECOND, "30": SECOND}


AROUND = {
    ("a/z",): {"a"},  # below a partition: the partition above
    ("x",): {"x/y"},  # above partitions: those below
    ("m/n",): {"m/n/o/p"},  # a folder of folders: the partitions deep below
    ("a", "new"): {"a"},  # a partition itself; a new path nests with nothing
}


def test_partitions_around_a_batch_are_those_a_full_listing_would_name(tmp_path: Path) -> None:
    """What a write's nesting check compares its paths with: the same partitions the
    listing of the whole table names around those paths, asking storage only about them,
    and nothing about partitions a writer knows."""
    storage = open_storage(str(tmp_path))
    for partition in ("a", "b", "x/y", "m/n/o/p"):
        storage.write(f"{partition}/.hoodie_partition_metadata", b"")
    storage.write(".hoodie/hoodie.properties", b"")
    every = set(partition_listings(storage))
    for paths, expected in AROUND.items():
        assert partitions_around(storage, paths) == expected
        near = {p for p in every if any(p == q or _nest(p, q) for q in paths)}
        assert near == expected
    listed = storage.requests.snapshot().get("list", 0)
    assert partitions_around(storage, ["a", "b"], known={"a", "b"}) == {"a", "b"}
    assert partitions_around(storage, ["a/z"], known={"a"}) == {"a"}
    assert storage.requests.snapshot().get("list", 0) == listed


def _nest(one: str, other: str) -> bool:
    return one.startswith(f"{other}/") or other.startswith(f"{one}/")
