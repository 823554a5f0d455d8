"""RecordIndex over real storage and a real timeline: visibility, discard, compaction,
restarts, and a model-based test against a dict."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from table.hudi_archive import archived_commit, write_archive

from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.index import layout
from tidemark.index.block_cache import BlockCache
from tidemark.index.build import build_index, shard_count_for
from tidemark.index.record_index import RecordIndex
from tidemark.index.sharding import shard_of
from tidemark.storage import Storage, open_storage

from .indexkit import Commits, uuid_keys
from .servicekit import create_table

Location = tuple[str, str, str]
Indexed = tuple[Storage, Commits, dict[str, Location]]


def build(storage: Storage, entries: dict[str, Location], num_shards: int, as_of: str) -> None:
    """What the Spark bootstrap does: one base file per shard, then index.properties."""
    keys = pa.array(list(entries), pa.string())
    columns = (pa.array([loc[i] for loc in entries.values()], pa.string()) for i in range(3))
    build_index(storage, keys, *columns, as_of=as_of, num_shards=num_shards)


def answers(
    index: RecordIndex, keys: list[str], as_of: str | None = None
) -> dict[str, Location | None]:
    table = index.lookup(pa.array(keys, pa.string()), as_of=as_of)
    assert table.column("key").to_pylist() == keys
    rows = zip(
        *(table.column(c).to_pylist() for c in ("partition", "file_id", "instant")), strict=True
    )
    return {key: (row if row[0] is not None else None) for key, row in zip(keys, rows, strict=True)}


def changes(rows: dict[str, tuple[str, str] | None]) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(list(rows), pa.string()),
            "partition": pa.array([r[0] if r else None for r in rows.values()], pa.string()),
            "file_id": pa.array([r[1] if r else None for r in rows.values()], pa.string()),
        }
    )


@pytest.fixture
def indexed(local_storage: Storage) -> Indexed:
    commits = Commits(local_storage)
    first = commits.start()
    commits.complete(first)
    entries = dict.fromkeys(uuid_keys(300), ("p1", "f1-0", first)) | {"é": ("p2", "f2-0", first)}
    build(local_storage, entries, 10, first)
    return local_storage, commits, entries


def test_a_table_without_index_is_a_failed_precondition(local_storage: Storage) -> None:
    assert not RecordIndex.exists(local_storage)
    with pytest.raises(FailedPreconditionError) as refused:
        RecordIndex.open(local_storage)
    assert refused.value.field == "table"
    assert local_storage.list_dir(".hoodie").files == ()


def test_lookup_after_build_keeps_input_order_and_duplicates(indexed: Indexed) -> None:
    storage, _, entries = indexed
    index = RecordIndex.open(storage)
    keys = ["absent", *list(entries)[:50], "é", "absent"]

    assert answers(index, keys) == {k: entries.get(k) for k in keys}
    assert index.stats().entries == len(entries)
    assert index.stats().shards == 10


def test_staged_changes_show_exactly_when_the_commit_completes(indexed: Indexed) -> None:
    storage, commits, entries = indexed
    index = RecordIndex.open(storage)
    moved, deleted = list(entries)[:2]
    instant = commits.start()
    index.stage(instant, changes({moved: ("p9", "f9-0"), deleted: None, "new": ("p3", "f3-0")}))

    assert answers(index, [moved, deleted, "new"]) == {
        moved: entries[moved],
        deleted: entries[deleted],
        "new": None,
    }
    commits.complete(instant)
    assert answers(index, [moved, deleted, "new"], as_of=instant) == {
        moved: ("p9", "f9-0", instant),
        deleted: None,
        "new": ("p3", "f3-0", instant),
    }
    reopened = RecordIndex.open(storage)
    assert answers(reopened, [moved, deleted, "new"]) == answers(index, [moved, deleted, "new"])


def test_a_rolled_back_write_never_shows_and_discard_removes_its_files(indexed: Indexed) -> None:
    storage, commits, entries = indexed
    index = RecordIndex.open(storage)
    key = next(iter(entries))
    failed = commits.start()
    index.stage(failed, changes({key: None, "new": ("p", "f")}))
    commits.roll_back(failed)
    later = commits.start()
    commits.complete(later)

    assert answers(index, [key, "new"], as_of=later) == {key: entries[key], "new": None}
    assert index.discard_rolled_back() == 1
    assert not [f for f in storage.list(layout.ROOT) if "delta_" in f.path]
    assert answers(index, [key, "new"]) == {key: entries[key], "new": None}


def test_discard_refuses_a_completed_instant(indexed: Indexed) -> None:
    storage, commits, _ = indexed
    index = RecordIndex.open(storage)
    instant = commits.start()
    index.stage(instant, changes({"k": ("p", "f")}))
    assert index.discard(instant) == 1
    index.stage(instant, changes({"k": ("p", "f")}))
    commits.complete(instant)

    with pytest.raises(FailedPreconditionError) as refused:
        index.discard(instant)
    assert refused.value.field == "instant"
    with pytest.raises(FailedPreconditionError):
        index.stage(instant, changes({"other": ("p", "f")}))
    index.stage(instant, changes({"k": ("p", "f")}))  # a retry of the same call is harmless
    assert answers(index, ["k"]) == {"k": ("p", "f", instant)}


def test_compaction_folds_visible_deltas_and_keeps_pending_ones(indexed: Indexed) -> None:
    storage, commits, entries = indexed
    index = RecordIndex.open(storage)
    keys = list(entries)
    done = []
    for i in range(3):
        instant = commits.start()
        index.stage(instant, changes({keys[i]: None, f"new-{i}": ("p", f"f{i}")}))
        commits.complete(instant)
        done.append(instant)
    pending = commits.start()
    index.stage(pending, changes({keys[5]: None}))
    before = answers(index, [*keys, "new-0", "new-1", "new-2"])

    compacted = index.compact(min_deltas=1)
    assert compacted.shards and compacted.deltas_folded >= len(compacted.shards)
    assert compacted.manifests_deleted == 3  # the pending instant's manifest stays
    assert len(list(storage.list(layout.STAGED_DIR + "/"))) == 1
    assert answers(index, [*keys, "new-0", "new-1", "new-2"]) == before
    assert answers(RecordIndex.open(storage), [*keys, "new-0"]) == {
        k: before[k] for k in [*keys, "new-0"]
    }
    deltas = [f.path for f in storage.list(layout.ROOT) if "delta_" in f.path]
    assert deltas and all(pending in path for path in deltas)
    commits.complete(pending)
    assert answers(index, [keys[5]], as_of=pending) == {keys[5]: None}


def test_a_delta_as_large_as_its_base_is_compacted_however_few_deltas(indexed: Indexed) -> None:
    """One write moving every key of a shard (as a clustering of the whole table does)
    makes that shard due, far from ``COMPACT_AFTER_DELTAS`` deltas (unless the rule is
    the count alone, as the service's background compaction has it); a shard with a
    small delta is left as it is, and lookups answer the same after."""
    storage, commits, entries = indexed
    keys = list(entries)
    shards = shard_of(pa.array(keys, pa.string()), 10).tolist()
    heavy = next(shard for shard in shards if shard != shards[0])
    index = RecordIndex.open(storage)
    small = commits.start()
    index.stage(small, changes({keys[0]: ("p", "f-small")}))
    commits.complete(small)
    index.refresh()
    assert not index.needs_compaction()
    moved = commits.start()
    in_heavy = [key for key, shard in zip(keys, shards, strict=True) if shard == heavy]
    index.stage(moved, changes(dict.fromkeys(in_heavy, ("p", "f-moved"))))
    commits.complete(moved)
    index.refresh()
    assert index.needs_compaction() and index.max_deltas() == 1
    assert not index.needs_compaction(delta_share=None)  # the service's rule: by count
    before = answers(index, keys)

    assert index.compact().shards == (heavy,)
    assert answers(RecordIndex.open(storage), keys) == before
    assert before[keys[0]] == ("p", "f-small", small)
    assert not index.needs_compaction()


def test_a_single_use_index_searches_deltas_in_turn_with_the_same_answers(
    indexed: Indexed,
) -> None:
    """Deltas moving, deleting and re-adding the same keys: an index opened for one lookup
    (a read's plan) answers as the merging one, and caches no merge nor resident file."""
    storage, commits, entries = indexed
    keys = list(entries)
    steps: list[dict[str, tuple[str, str] | None]] = [
        {keys[0]: ("p", "fa"), keys[1]: None, keys[2]: ("p", "fc")},
        {keys[0]: None, keys[1]: ("p", "fb"), keys[2]: ("p", "fd")},
        {keys[0]: ("p", "fe"), "new": ("p", "ff")},
    ]
    index = RecordIndex.open(storage)
    for rows in steps:
        instant = commits.start()
        index.stage(instant, changes(rows))
        commits.complete(instant)
    index.refresh()
    assert index.max_deltas() == 3
    asked = [*keys, "new", "absent"]
    single, merging = RecordIndex.open(storage, single_use=True), RecordIndex.open(storage)
    found = answers(single, asked)
    assert found == answers(merging, asked)
    assert [(found[k] or ())[:2] for k in (keys[0], keys[1], keys[2], "new")] == [
        ("p", "fe"),
        ("p", "fb"),
        ("p", "fd"),
        ("p", "ff"),
    ]
    assert found["absent"] is None and found[keys[3]] == entries[keys[3]]
    assert single.cache.stats().bytes < merging.cache.stats().bytes  # no merged deltas


def test_bad_stage_input_names_the_field_and_writes_nothing(indexed: Indexed) -> None:
    storage, commits, _ = indexed
    index = RecordIndex.open(storage)
    instant = commits.start()
    before = sorted(f.path for f in storage.list(layout.ROOT))
    for bad, field in [
        (changes({"": ("p", "f")}), "key"),
        (changes({"a": ("p", "f")}).drop_columns(["file_id"]), "changes"),
        (pa.table({"key": ["a", "a"], "partition": ["p", "p"], "file_id": ["f", "f"]}), "key"),
    ]:
        with pytest.raises(InvalidArgumentError) as refused:
            index.stage(instant, bad)
        assert refused.value.field == field
    with pytest.raises(InvalidArgumentError) as refused:
        index.stage("yesterday", changes({"a": ("p", "f")}))
    assert refused.value.field == "instant"
    assert sorted(f.path for f in storage.list(layout.ROOT)) == before


def test_shard_count_follows_hudi_sizing() -> None:
    assert shard_count_for(0) == 10
    assert shard_count_for(1_000_000) == 10
    assert shard_count_for(1_000_000_000) == 90
    assert shard_count_for(10**12) == 10000
    assert shard_count_for(1_000_000, max_shard_bytes=1 << 20) == 92


def test_index_on_s3_with_a_small_cache(s3_bucket: str) -> None:
    storage = open_storage(s3_bucket)
    commits = Commits(storage)
    first = commits.start()
    commits.complete(first)
    entries = dict.fromkeys(uuid_keys(2000), ("p", "f-0", first))
    build(storage, entries, 3, first)
    index = RecordIndex.open(storage, BlockCache(budget_bytes=64 << 10))
    instant = commits.start()
    index.stage(instant, changes({"added": ("q", "g-0")}))
    commits.complete(instant)

    keys = [*entries, "added", "absent"]
    assert answers(index, keys, as_of=instant) == {
        **entries,
        "added": ("q", "g-0", instant),
        "absent": None,
    }
    assert index.cache.stats().bytes <= 64 << 10


def test_a_delta_older_than_the_active_timeline_counts_only_if_the_archive_lists_it(
    local_root: str,
) -> None:
    """Older than the active timeline proves nothing by itself: a fenced writer's late delta
    (its write rolled back) must not count, a delta of a commit Hudi archived must."""
    storage = create_table(local_root).storage
    commits = Commits(storage)
    archived, late = commits.start(), commits.start()
    build(storage, {"kept": ("p1", "f1-0", "20200101000000000")}, 10, "20200101000000000")
    index = RecordIndex.open(storage)
    index.stage(archived, changes({"archived": ("p2", "f2-0")}))
    index.stage(late, changes({"kept": None, "late": ("p3", "f3-0")}))
    commits.roll_back(archived)
    commits.roll_back(late)
    newest = commits.start()
    commits.complete(newest)
    write_archive(Path(local_root) / ".hoodie" / "archived", 1, archived_commit(archived))

    assert answers(RecordIndex.open(storage), ["archived", "kept", "late"], as_of=newest) == {
        "archived": ("p2", "f2-0", archived),
        "kept": ("p1", "f1-0", "20200101000000000"),
        "late": None,
    }
