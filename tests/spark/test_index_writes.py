"""Writes to a table with a record index keep it in step (issue 9): after every write the
index answers for exactly the snapshot's keys at their file groups (``indexkit``), on the
local file system and the local S3 server, whatever tags the keys (``--index record`` or
``simple``), for moves, deletes, inserts of existing keys, bulk_insert and insert_overwrite;
clustering moves keys to new file groups; a writer killed before its commit changes no
lookup; the executors stage a write's changes by shard, and a refused bulk_insert stages
nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from structlog.testing import capture_logs

from spark.clikit import Cli, refused_in_one_line, table_state
from spark.indexkit import assert_index_agrees, indexed_table, rows
from spark.killed_writer import LEASE_S as KILLED_LEASE_S
from spark.sparkkit import SCHEMA, files_in_view, kill_writer_before_commit, local_frame
from tidemark.clients.index import IndexClient
from tidemark.errors import FailedPreconditionError
from tidemark.index import layout
from tidemark.index.pruning import index_locator
from tidemark.index.record_index import RecordIndex
from tidemark.index.wire import CHANGES_DDL
from tidemark.jobs.cluster import run_clustering
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.index_writes import stage_changes
from tidemark.jobs.read import read_dataframe
from tidemark.jobs.write import tag, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.services.index.embedded import start_embedded_index_service
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.metadata.commit import NULL_COMMIT, WriteStat
from tidemark.table.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    save_plan,
)
from tidemark.table.timeline.instant import new_instant_time


def test_upserts_moves_and_deletes_keep_the_index(
    spark: SparkSession, local_or_s3_uri: str
) -> None:
    uri = local_or_s3_uri
    before = indexed_table(spark, uri)
    upsert = rows(spark, (1, "updated", "b", 2), (3, "moved", "b", 2), (20, "new", "c", 2))
    result = write(spark, upsert, uri, "upsert")
    assert (result.rows_inserted, result.rows_updated, result.tagging) == (2, 1, "record")
    after = assert_index_agrees(uri)
    assert after["3"][0] == "b" and before["3"][0] == "a"
    assert after["20"][0] == "c"
    holders = {after["1"], after["20"]}
    assert len(files_in_view(uri)) > len(holders)
    with capture_logs() as logs:
        read = read_snapshot(
            HoodieTable.open(uri),
            filters=[("id", "in", ["1", "20"])],
            locate=index_locator(open_storage(uri)),
        )
        frame = read_dataframe(spark, HoodieTable.open(uri), where={"id": [1, 20]}).toArrow()
    assert [e["files"] for e in logs if e["event"] == "read.files_opened"] == [len(holders)] * 2
    assert sorted(read.column("id").to_pylist()) == [1, 20]
    assert sorted(frame.column("id").to_pylist()) == [1, 20]
    deleted = write(
        spark, rows(spark, (3, "", "b", 0), (4, "", "b", 0), (99, "", "a", 0)), uri, "delete"
    )
    assert deleted.rows_deleted == 2
    assert set(assert_index_agrees(uri)) == {str(k) for k in [*range(12), 20]} - {"3", "4"}


def test_every_operation_and_tagging_keeps_the_index(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "t")
    indexed_table(spark, uri)
    write(
        spark,
        rows(spark, (5, "simple-move", "a", 3), (21, "simple", "a", 3)),
        uri,
        "upsert",
        WriteOptions(index="simple"),
    )
    assert assert_index_agrees(uri)["5"][0] == "a"
    write(spark, rows(spark, (6, "inserted-again", "a", 4), (22, "fresh", "b", 4)), uri, "insert")
    located = assert_index_agrees(uri)
    assert located["6"][0] == "a" and "22" in located
    names = read_snapshot(HoodieTable.open(uri), filters=[("id", "=", "6")], columns=["name"])
    assert names.column("name").to_pylist() == ["inserted-again"]
    write(spark, rows(spark, (30, "bulk", "c", 5), (31, "bulk", "a", 5)), uri, "bulk_insert")
    assert {"30", "31"} <= set(assert_index_agrees(uri))
    with pytest.raises(FailedPreconditionError, match="key '30' is already in the table"):
        write(spark, rows(spark, (30, "again", "a", 6)), uri, "bulk_insert")
    assert_index_agrees(uri)
    write(spark, rows(spark, (40, "over", "b", 6)), uri, "insert_overwrite")
    located = assert_index_agrees(uri)
    assert [k for k, (p, _) in located.items() if p == "b"] == ["40"]

    cli = Cli(tmp_path, capfd)
    before = table_state(uri)
    code, err = cli.write(
        uri, [{"id": 1, "name": "x", "part": "a", "ts": 9}], "--op", "insert", "--allow-duplicates"
    )
    assert "allow_duplicates: the table has a record index" in refused_in_one_line(code, err)
    plain = str(tmp_path / "plain")
    create = ["--key", "id", "--partition", "part", "--precombine", "ts"]
    first = [{"id": 1, "name": "x", "part": "a", "ts": 1}]
    assert cli.write(plain, first, "--op", "bulk_insert", *create)[0] == 0
    plain_before = table_state(plain)
    code, err = cli.write(
        plain, [{"id": 1, "name": "y", "part": "a", "ts": 2}], "--op", "upsert", "--index", "record"
    )
    assert refused_in_one_line(code, err).startswith("index: the table has no record index")
    assert table_state(plain) == plain_before
    assert table_state(uri) == before
    code, out = cli.output(
        "read", "--table", uri, "--where", "id in (40, 6,99)", "--output", str(tmp_path / "r.json")
    )
    assert code == 0 and out.startswith("wrote 2 rows")


def test_a_writer_killed_before_its_commit_changes_no_lookup(
    spark: SparkSession, table_uri: str
) -> None:
    indexed_table(spark, table_uri)
    storage = open_storage(table_uri)
    keys = pa.array(["1", "2", "10", "50"])
    answers = RecordIndex.open(storage).lookup(keys)
    kill_writer_before_commit(table_uri, "1,2,50")
    staged = {info.path for info in storage.list(layout.STAGED_DIR + "/")}
    assert staged  # the killed write's tasks staged its changes: they must not show
    assert RecordIndex.open(storage).lookup(keys) == answers
    time.sleep(1.5 * KILLED_LEASE_S)  # the dead writer's lock lease runs out
    write(spark, rows(spark, (60, "next", "c", 9)), table_uri, "upsert")
    assert staged.isdisjoint(info.path for info in storage.list(layout.STAGED_DIR + "/"))
    located = assert_index_agrees(table_uri)
    assert "50" not in located and "60" in located


def test_clustering_moves_keys_to_their_new_file_groups(
    spark: SparkSession, table_uri: str
) -> None:
    before = indexed_table(spark, table_uri)
    _cluster_every_group(spark, table_uri)
    after = assert_index_agrees(table_uri)
    assert set(after) == set(before)
    assert {file_id for _, file_id in after.values()}.isdisjoint(f for _, f in before.values())
    # every key moved: the run folded its deltas, as large as the bases, before it ended
    assert RecordIndex.open(open_storage(table_uri)).max_deltas() == 0


def test_keys_a_clustering_moved_after_the_writer_listed_the_table_are_written(
    spark: SparkSession, table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clustering that commits between a writer's listing of the table and its index
    lookup: the index already places the keys in the new groups, the writer lists again."""
    indexed_table(spark, table_uri)
    looked_up = tag.tag_with_index

    def clustering_commits_first(*args: Any) -> Any:
        _cluster_every_group(spark, table_uri)
        return looked_up(*args)

    monkeypatch.setattr(tag, "tag_with_index", clustering_commits_first)
    result = write(spark, rows(spark, (1, "updated", "b", 2)), table_uri, "upsert")
    monkeypatch.undo()
    assert (result.rows_updated, result.tagging) == (1, "record")
    timeline = HoodieTable.open(table_uri).timeline
    assert [i.action for i in timeline.completed()][-2:] == ["replacecommit", "commit"]
    located = assert_index_agrees(table_uri)
    latest = HoodieTable.open(table_uri).view().latest_base_files()
    assert located["1"][1] in {f.file_id for f in latest}
    row = read_dataframe(spark, HoodieTable.open(table_uri), where={"id": [1]}).collect()
    assert [(r["id"], r["name"]) for r in row] == [(1, "updated")]


def test_keys_a_clustering_planned_before_the_last_write_moved_after_it_are_written(
    spark: SparkSession, table_uri: str
) -> None:
    """Instants complete out of their order: a clustering planned before a write commits
    after it. An index service that read the timeline in between holds the write completed
    and the plan pending, and the next write asks it as of the latest write by instant
    time (version 6 records no completion times): it was told the moved keys' replaced
    groups and refused ("places keys in file group ..., which the table does not have"; a
    stream beside a clustering runner met it under load). It now looks those keys up
    again as of the replacing commit."""
    many_in_b = [(k, f"b{k}", "b", 1) for k in range(100, 300)]  # the moves a few deltas
    first = [(k, f"v{k}", "abc"[k % 3], 1) for k in range(12)] + many_in_b  # (no index fold)
    created = WriteOptions(record_key_fields=["id"], partition_fields=["part"])
    write(spark, rows(spark, *first), table_uri, "bulk_insert", created)
    build_index(spark, HoodieTable.open(table_uri), IndexBuildOptions(shards=3))
    plan = _save_plan(table_uri, partitions={"a"})
    with start_embedded_index_service() as service:
        served = WriteOptions(index_service_address=service.address)
        before = write(spark, rows(spark, (1, "b1", "b", 2)), table_uri, "upsert", served)
        assert before.instant > plan  # the plan's groups untouched: it stays pending
        IndexClient(service.address, table_uri).lookup(["1"], before.instant)
        run_clustering(spark, HoodieTable.open(table_uri))
        with capture_logs() as logs:
            after = write(spark, rows(spark, (0, "a0", "a", 3)), table_uri, "upsert", served)
    assert (after.rows_updated, after.tagging) == (1, "record")
    behind = [e for e in logs if e["event"] == "write.index_behind_view"]
    assert [(e["as_of"], e["replaced_by"]) for e in behind] == [(before.instant, plan)]
    located = assert_index_agrees(table_uri)
    latest = HoodieTable.open(table_uri).view().latest_base_files()
    assert located["0"][1] in {f.file_id for f in latest if f.partition_path == "a"}
    row = read_dataframe(spark, HoodieTable.open(table_uri), where={"id": [0, 1]}).collect()
    assert sorted((r["id"], r["name"]) for r in row) == [(0, "a0"), (1, "b1")]


def _cluster_every_group(spark: SparkSession, table_uri: str) -> None:
    """Plan one clustering group per partition over all its file groups, and run it."""
    _save_plan(table_uri)
    run_clustering(spark, HoodieTable.open(table_uri))


def _save_plan(table_uri: str, partitions: set[str] | None = None) -> str:
    """Plan one clustering group per partition (of ``partitions``, else every one) over all
    its file groups; the plan's instant."""
    table = HoodieTable.open(table_uri)
    groups = tuple(
        ClusteringGroup(
            tuple(SliceInfo(f.partition_path, f.file_id, f.path, f.size) for f in files), 1
        )
        for files in table.view().file_groups_by_partition(partitions).values()
    )
    plan = ClusteringPlan(groups=groups, strategy=ClusteringStrategy(("id",), "linear", 1 << 30))
    with StorageLease(table.storage, "test-scheduler") as lock:
        table.timeline.fence = lock
        return save_plan(table, plan).timestamp


def _staged_by_instant(uri: str, instant: str) -> tuple[list[str], list[str]]:
    """The stage manifests of ``instant`` and the shard directory of each of its deltas."""
    storage = open_storage(uri)
    manifests = [
        info.path
        for info in storage.list(layout.STAGED_DIR + "/")
        if info.path.rsplit("/", 1)[-1].startswith(f"{instant}_")
    ]
    deltas = [
        info.path.rsplit("/", 2)[-2]
        for info in storage.list(layout.SHARDS_DIR + "/")
        if info.path.rsplit("/", 1)[-1].startswith(f"delta_{instant}_")
    ]
    return manifests, deltas


def test_executors_stage_whole_shards_and_a_refused_bulk_insert_stages_nothing(
    spark: SparkSession, table_uri: str
) -> None:
    """Tasks stage the changes themselves, each its own shards in chunks rather than one
    call per Arrow batch (here 50 rows): an upsert of new and moved keys and a bulk_insert
    each leave several stage calls and exactly one delta per shard for their instant. A
    bulk_insert holding a key the table has is refused before anything is staged; an empty
    one (no task stages anything) changes nothing."""
    shards = 8
    indexed_table(spark, table_uri, shards)
    batch_conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
    spark.conf.set(batch_conf, "50")
    try:
        upsert = [(k, "up", "c" if k < 12 else "ab"[k % 2], 2) for k in range(600)]
        upserted = write(spark, rows(spark, *upsert), table_uri, "upsert")
        bulk = [(k, "bulk", "abc"[k % 3], 3) for k in range(1000, 1600)]
        bulked = write(spark, rows(spark, *bulk), table_uri, "bulk_insert")
    finally:
        spark.conf.unset(batch_conf)  # the session never sets it: back to Spark's default
    assert (upserted.rows_inserted, bulked.rows_inserted) == (588 + 8, 600)  # new keys, moves
    every_shard = [f"{shard:05d}" for shard in range(shards)]
    for instant in (upserted.instant, bulked.instant):
        manifests, deltas = _staged_by_instant(table_uri, instant)
        assert len(manifests) > 1  # several tasks staged, not the driver
        assert sorted(deltas) == every_shard
    located = assert_index_agrees(table_uri)
    assert len(located) == 1200 and located["3"][0] == "c"

    storage = open_storage(table_uri)
    before = sorted(info.path for info in storage.list(f"{layout.ROOT}/"))
    fresh = [(k, "fresh", "a", 4) for k in range(2000, 2300)]
    with pytest.raises(FailedPreconditionError, match="key '1500' is already in the table"):
        write(spark, rows(spark, *fresh, (1500, "again", "b", 4)), table_uri, "bulk_insert")
    assert sorted(info.path for info in storage.list(f"{layout.ROOT}/")) == before
    assert assert_index_agrees(table_uri) == located
    empty = write(spark, local_frame(spark, [], SCHEMA), table_uri, "bulk_insert")
    assert empty.rows_written == 0 and assert_index_agrees(table_uri) == located


def _stat(file_id: str, inserts: int, deletes: int) -> WriteStat:
    return WriteStat(
        file_id=file_id,
        path=f"a/{file_id}.parquet",
        prev_commit=NULL_COMMIT,
        num_writes=inserts,
        num_deletes=deletes,
        num_update_writes=0,
        num_inserts=inserts,
        total_write_bytes=1,
        file_size_in_bytes=1,
        partition_path="a",
    )


def test_index_changes_that_disagree_with_the_files_fail_before_the_commit(
    spark: SparkSession, table_uri: str
) -> None:
    """The last guard against a write whose index changes and files disagree (a bug in a
    write, never user input): staging compares the changes with the write stats, refuses
    naming what differs, and the refused instant's deltas never show in a lookup."""
    located = indexed_table(spark, table_uri)
    storage = open_storage(table_uri)
    keys = pa.array(["0", "900", "901"])
    answers = RecordIndex.open(storage).lookup(keys)
    new_keys = local_frame(spark, [("900", "a", "f1"), ("901", "a", "f1")], CHANGES_DDL)
    tombstone = local_frame(spark, [("0", None, None)], CHANGES_DDL)
    refusals = [
        (new_keys, [_stat("f1", 1, 0)], False, "hold 2 new locations but the files hold 1"),
        (tombstone, [_stat("f2", 0, 2)], True, "hold 1 tombstones but the files hold 2"),
    ]
    with start_embedded_index_service() as service:
        client = IndexClient(service.address, table_uri)
        for changes, stats, deleting, message in refusals:
            instant = new_instant_time()
            with pytest.raises(FailedPreconditionError, match=message) as refused:
                stage_changes(client, instant, changes, stats, deleting)
            assert refused.value.field == "index"
            assert "is not committed" in str(refused.value)
    assert RecordIndex.open(storage).lookup(keys) == answers
    assert assert_index_agrees(table_uri) == located


def test_a_write_creating_a_table_with_index_record_starts_its_index(
    spark: SparkSession, table_uri: str
) -> None:
    """``--index record`` on a new table (as enabling Hudi's record index on one): the
    first commit fills an index the table starts with, and later writes tag through it."""
    created = WriteOptions(record_key_fields=["id"], partition_fields=["part"], index="record")
    first = write(
        spark, rows(spark, (1, "a", "p", 1), (2, "b", "q", 1)), table_uri, "insert", created
    )
    assert RecordIndex.exists(open_storage(table_uri))
    assert first.tagging == "record"
    assert_index_agrees(table_uri)
    moved = write(spark, rows(spark, (2, "b2", "p", 2), (3, "c", "q", 2)), table_uri, "upsert")
    assert moved.tagging == "record"
    assert set(assert_index_agrees(table_uri)) == {"1", "2", "3"}
