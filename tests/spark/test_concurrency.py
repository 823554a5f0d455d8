"""Writers beside each other and beside table services, with real processes and threads: a
write holds the table lock only to begin and to commit, so a second write begins and
writes its files while the first is held at its commit point, and completes after it
(table version 6 completes writes in instant order); a write whose file group or new key
was taken meanwhile is rolled back and written again; a ``cluster run`` holds the table
lock only to start and to commit, so writes commit during its rewrite; a runner paused
past its run lease never commits and a second runner completes the plan; writers started
together both commit; a writer waiting on a dead holder takes over once its lease ran
out; an index service killed during a build serves the built index once restarted.
Everything is checked exactly (hudi-rs, the record index)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, MutableMapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import structlog
from faults.faultkit import (
    DATA,
    KEYS,
    SCHEMA,
    StageHook,
    Writer,
    model_rows,
    wait_for,
    write_input,
)
from pyspark.sql import SparkSession

from spark.indexkit import assert_index_agrees
from spark.sparkkit import assert_readers_agree, hudi_rs_table, local_frame, table_bytes
from tidemark.clients.index import IndexClient
from tidemark.errors import ConflictError, FailedPreconditionError, TidemarkError
from tidemark.faults import HOLD_AT_ENV, REACHED_FILE, RESUME_FILE
from tidemark.index import layout
from tidemark.index.build import build_lease
from tidemark.jobs.cluster import ClusterResult, run_clustering
from tidemark.jobs.cluster_options import ClusterOptions
from tidemark.jobs.index_build import BuildResult, build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.rollback import rollback_table
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.rpc.process import ServeProcess
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import new_file_id
from tidemark.table.leases.plan_run import RUNS_DIR, run_lock
from tidemark.table.leases.storage_lease import FIRST_POLL_S, StorageLease
from tidemark.table.leases.table_lock import changing
from tidemark.table.leases.write_lease import WRITES_DIR
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    save_plan,
)
from tidemark.table.timeline.instant import State, new_instant_time

PLANNED = "p0"
"""The partition the plan clusters; the others take writes during the run."""
RUN_LEASE_S = 120.0
"""A run held at its commit point while the test writes keeps its leases that long."""
SHORT_LEASE_S = 3.0
"""The lease of a process the test pauses: it runs out soon after the pause."""
RUN_HOLD = "cluster_before_commit"
"""Where a clustering run is held: rewritten and staged, not committed, no table lock."""
BUILD_HOLD = "index_build_before_publish"
"""Where an index build is held: before it catches up and publishes."""
T = TypeVar("T")


@pytest.fixture(scope="module")
def plain_source(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """400 rows in four partitions, several small files each."""
    folder = tmp_path_factory.mktemp("concurrency")
    batch = write_input(folder / "in.parquet", range(400), "v1")
    frame = spark.read.parquet(str(batch)).repartition(4)
    uri = str(folder / "plain")
    write(spark, frame, uri, "bulk_insert", WriteOptions(**KEYS))
    return uri


@pytest.fixture(scope="module")
def indexed_source(spark: SparkSession, plain_source: str) -> str:
    """``plain_source`` with a record index."""
    uri = str(Path(plain_source).with_name("indexed"))
    shutil.copytree(plain_source, uri)
    build_index(spark, HoodieTable.open(uri), IndexBuildOptions(shards=2))
    return uri


@pytest.fixture
def plain_table(plain_source: str, tmp_path: Path) -> str:
    return shutil.copytree(plain_source, tmp_path / "table").as_posix()


@pytest.fixture
def table(indexed_source: str, tmp_path: Path) -> str:
    return shutil.copytree(indexed_source, tmp_path / "table").as_posix()


def assert_exact(uri: str, model: dict[str, dict[str, Any]]) -> None:
    """Both readers return exactly ``model``, each key once, and the index agrees."""
    read = assert_readers_agree(uri, DATA)
    assert {key: {c: row[c] for c in DATA} for key, row in read.items()} == model
    assert_index_agrees(uri)


def schedule(uri: str, partition: str = PLANNED) -> str:
    """A plan stitching every file group of ``partition`` into one."""
    hudi = HoodieTable.open(uri)
    files = hudi.view().file_groups_by_partition()[partition]
    slices = tuple(SliceInfo(f.partition_path, f.file_id, f.path, f.size) for f in files)
    plan = ClusteringPlan(
        groups=(ClusteringGroup(slices, 1),), strategy=ClusteringStrategy(("id",), "linear", 1)
    )
    with changing(hudi, "test-scheduler"):
        return save_plan(hudi, plan).timestamp


def start_runner(uri: str, folder: Path, lease_s: float) -> tuple[Path, Writer]:
    """A ``cluster run`` process, once it is held at its commit point."""
    command = ["cluster", "run", "--table", uri, "--markers", "direct"]
    return start_held(command, RUN_HOLD, folder, lease_s)


def start_builder(uri: str, folder: Path, lease_s: float) -> tuple[Path, Writer]:
    """An ``index build`` process, once it is held before it catches up and publishes."""
    command = ["index", "build", "--table", uri]
    return start_held(command, BUILD_HOLD, folder, lease_s)


def start_held(args: list[str], point: str, folder: Path, lease_s: float) -> tuple[Path, Writer]:
    """A ``tidemark`` process (a session leader, to pause it as a tree), once it waits at
    ``point``; it goes on when the test creates ``hold``/resume (``resume``)."""
    hold = folder / "hold"
    hold.mkdir()
    env = {**os.environ, HOLD_AT_ENV: f"{point}:{hold}"}
    command = [
        sys.executable,
        "-m",
        "tidemark.cli",
        *args,
        "--master",
        "local[2]",
        "--lock-lease-s",
        str(lease_s),
    ]
    held = Writer(
        subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    )
    try:
        wait_for(lambda: (hold / REACHED_FILE).exists(), f"the process to reach {point}", held)
    except BaseException:
        held.kill()
        raise
    return hold, held


def resume(hold: Path, held: Writer) -> tuple[int, str, str]:
    """Let the held process go on; its exit code and output."""
    (hold / RESUME_FILE).touch()
    return held.finish()


def test_writes_commit_during_a_runs_rewrite(
    spark: SparkSession, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instant = schedule(table)
    outside = range(1, 400, 4)  # p1: outside the plan
    with held_at(monkeypatch, tmp_path / "hold", RUN_HOLD, running(spark, table, instant)) as run:
        # held at its commit point: rewritten and staged, not committed; no table lock
        assert HoodieTable.open(table).timeline.find(instant).state is State.INFLIGHT
        inserted = write_input(tmp_path / "insert.parquet", range(400, 440), "v2")
        write(
            spark, spark.read.parquet(str(inserted)), table, "insert", WriteOptions(lock_wait_s=0)
        )
        updated = write_input(tmp_path / "upsert.parquet", outside, "v3")
        write(spark, spark.read.parquet(str(updated)), table, "upsert", WriteOptions(lock_wait_s=0))
        assert HoodieTable.open(table).timeline.find(instant).state is State.INFLIGHT
    [result] = run.result()
    assert result.instant == instant
    assert HoodieTable.open(table).timeline.find(instant).is_completed
    model = model_rows(range(400), "v1") | model_rows(range(400, 440), "v2")
    assert_exact(table, model | model_rows(outside, "v3"))


@pytest.mark.parametrize(
    ("into", "refusal"),
    [("planned group", "is stale"), ("p1", "was written meanwhile to file group")],
)
def test_a_commit_touching_the_plan_meanwhile_stops_the_run(
    spark: SparkSession,
    table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    into: str,
    refusal: str,
) -> None:
    """Writers are refused on planned file groups and keys, so a forged commit stands in
    for one that got through: a new slice of a planned group, or a planned file's keys
    in a new group of p1. The run's commit refuses and rolls back to the plan."""
    instant = schedule(table)
    with held_at(monkeypatch, tmp_path / "hold", RUN_HOLD, running(spark, table, instant)) as run:
        forge_copy_of_a_planned_file(table, into)
    with pytest.raises(TidemarkError) as refused:
        run.result()
    err = str(refused.value)
    assert refusal in err and f"plan {instant}" in err
    assert "rolled back; its plan stays pending" in err
    assert HoodieTable.open(table).timeline.find(instant).state is State.REQUESTED


def forge_copy_of_a_planned_file(uri: str, into: str) -> None:
    """A completed commit whose one base file is a copy of a planned file: in the same
    file group (``planned group``) or in a new file group of partition ``into``."""
    hudi = HoodieTable.open(uri)
    victim = hudi.view().file_groups_by_partition()[PLANNED][0]
    partition, file_id = victim.partition_path, victim.file_id
    if into != "planned group":
        partition, file_id = into, new_file_id()
    with changing(hudi, "forger"):
        forged = new_instant_time(after=hudi.timeline.latest_timestamp())
        hudi.timeline.create_requested(forged, COMMIT)
        hudi.timeline.transition_inflight(forged, COMMIT)
        name = victim.path.rpartition("/")[2].replace(victim.instant, forged)
        path = f"{partition}/{name.replace(victim.file_id, file_id)}"
        hudi.storage.write(path, hudi.storage.read(victim.path))
        rows = 100
        stat = WriteStat(
            file_id=file_id,
            path=path,
            prev_commit=victim.instant,
            num_writes=rows,
            num_deletes=0,
            num_update_writes=rows,
            num_inserts=0,
            total_write_bytes=victim.size,
            file_size_in_bytes=victim.size,
            partition_path=partition,
        )
        metadata = CommitMetadata.from_write_stats([stat], "UPSERT", hudi.current_avro_schema(), {})
        hudi.timeline.complete(forged, COMMIT, metadata.to_json())


def test_a_runner_paused_past_its_run_lease_never_commits(
    spark: SparkSession, table: str, tmp_path: Path
) -> None:
    instant = schedule(table)
    before = {k: r["name"] for k, r in assert_readers_agree(table, DATA).items()}
    hold, paused = start_runner(table, tmp_path, SHORT_LEASE_S)
    try:
        paused.signal_tree(signal.SIGSTOP)
        wait_for(lambda: run_lease_expired(table, instant), "the run lease to expire")
        [result] = run_clustering(spark, HoodieTable.open(table))
        assert result.instant == instant and result.rolled_back_earlier_run
        paused.signal_tree(signal.SIGCONT)
        code, _, err = resume(hold, paused)
    finally:
        paused.kill()
    assert code == 2
    assert f"lost the clustering plan {instant} lock" in err.strip().splitlines()[-1]
    timeline = HoodieTable.open(table).timeline
    assert timeline.find(instant).is_completed and timeline.pending() == []
    assert {k: r["name"] for k, r in assert_readers_agree(table, DATA).items()} == before
    assert_index_agrees(table)


def run_lease_expired(uri: str, instant: str) -> bool:
    return run_lock(open_storage(uri), instant, "probe", heartbeat=False).live_lease() is None


def test_a_plan_being_run_cannot_be_run_twice_or_cancelled(
    spark: SparkSession, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidemark.services.planner.config import PlannerConfig
    from tidemark.services.planner.engine import PlannerEngine

    instant = schedule(table)
    engine = PlannerEngine(PlannerConfig(lock_wait_s=0))
    try:
        hold = tmp_path / "hold"
        with held_at(monkeypatch, hold, RUN_HOLD, running(spark, table, instant)) as run:
            assert (
                run_clustering(spark, HoodieTable.open(table)) == []
            )  # every pending plan: left to its runner
            with pytest.raises(ConflictError, match=f"clustering plan {instant} is locked by"):
                run_clustering(spark, HoodieTable.open(table), instant)
            with pytest.raises(FailedPreconditionError, match="is being run by"):
                engine.cancel(HoodieTable.open(table), instant)
    finally:
        engine.close()
    [result] = run.result()
    assert result.instant == instant
    assert HoodieTable.open(table).timeline.find(instant).is_completed
    assert list(open_storage(table).list(f"{RUNS_DIR}/")) == []


def test_two_writers_started_together_both_commit(
    spark: SparkSession, table: str, tmp_path: Path
) -> None:
    """Two inserts released together from two threads of this process (neither is paused
    nor killed, so no process boundary is needed): each holds its own lease on the table
    lock, told apart by its token, and waits its turn; both commit."""
    inputs = {"a": range(500, 520), "b": range(520, 540)}
    frames = {
        name: spark.read.parquet(str(write_input(tmp_path / f"{name}.parquet", ids, name)))
        for name, ids in inputs.items()
    }
    together = threading.Barrier(len(frames))
    options = WriteOptions(markers="direct")

    def insert(name: str) -> WriteResult:
        together.wait()
        return write(spark, frames[name], table, "insert", options)

    with ThreadPoolExecutor(len(frames)) as pool:
        results = list(pool.map(insert, frames))
    assert len({result.instant for result in results}) == 2
    model = model_rows(range(400), "v1") | model_rows(range(500, 520), "a")
    assert_exact(table, model | model_rows(range(520, 540), "b"))
    assert HoodieTable.open(table).timeline.pending() == []


@contextmanager
def held_at(
    monkeypatch: pytest.MonkeyPatch, folder: Path, point: str, job: Callable[[], T]
) -> Iterator[Future[T]]:
    """``job`` in a thread of this process (its JVM, its session), held at ``point``
    until the block ends; the hold applies to this job only. A test about the process
    boundary (a pause, a kill) starts a ``tidemark`` child instead (``start_held``)."""
    folder.mkdir()
    monkeypatch.setenv(HOLD_AT_ENV, f"{point}:{folder}")
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(job)
        wait_for(lambda: (folder / REACHED_FILE).exists() or held.done(), f"the job at {point}")
        monkeypatch.delenv(HOLD_AT_ENV)
        try:
            yield held
        finally:
            (folder / RESUME_FILE).touch()


def held_at_commit(
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    folder: Path,
    rows: list[tuple[int, str, str, int]],
    table: str,
    operation: str = "upsert",
) -> AbstractContextManager[Future[WriteResult]]:
    """A write of ``rows`` held at its commit point (files written, index changes
    staged, no table lock) until the block ends."""
    frame = local_frame(spark, rows, SCHEMA)
    return held_at(
        monkeypatch, folder, "before_commit", lambda: write(spark, frame, table, operation)
    )


def running(spark: SparkSession, uri: str, instant: str) -> Callable[[], list[ClusterResult]]:
    """``cluster run`` of the plan at ``instant``, with direct markers as the CLI's
    ``--markers direct``, and a run lease that outlasts the test's hold."""
    options = ClusterOptions(markers="direct", lock_lease_s=RUN_LEASE_S)
    return lambda: run_clustering(spark, HoodieTable.open(uri), instant, options)


def building(spark: SparkSession, uri: str) -> Callable[[], BuildResult]:
    """``index build``, with a lease that outlasts the test's hold."""
    options = IndexBuildOptions(lock_lease_s=RUN_LEASE_S)
    return lambda: build_index(spark, HoodieTable.open(uri), options)


def logged(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == event]


def test_a_write_runs_while_another_waits_to_commit_and_completes_after_it(
    spark: SparkSession, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held write keeps no table lock: the second begins, writes its files in other
    file groups, then waits for the earlier instant to complete before its own."""
    with (
        structlog.testing.capture_logs() as logs,
        ThreadPoolExecutor(1) as pool,
        held_at_commit(spark, monkeypatch, tmp_path / "hold", [(0, "a", "p0", 2)], table) as a,
    ):
        frame = local_frame(spark, [(1, "b", "p1", 2), (900, "b", "p1", 2)], SCHEMA)
        b = pool.submit(write, spark, frame, table, "upsert")
        wait_for(
            lambda: bool(logged(logs, "write.waiting_for_earlier_write")) or b.done(),
            "the second write to wait for the first",
        )
        assert not a.done() and not b.done()
        pending = HoodieTable.open(table).timeline.pending()
        assert [i.state for i in pending] == [State.INFLIGHT, State.INFLIGHT]
        assert logged(logs, "rollback.running_write_left")  # the held one was left alone
        with pytest.raises(
            FailedPreconditionError, match=f"write {pending[0].timestamp} is running"
        ):
            rollback_table(HoodieTable.open(table), pending[0].timestamp)
    first, second = a.result(), b.result()
    assert first.instant < second.instant and (first.rows_updated, second.rows_inserted) == (1, 1)
    timeline = HoodieTable.open(table).timeline
    assert timeline.pending() == [] and timeline.rollbacks() == []
    assert list(open_storage(table).list(f"{WRITES_DIR}/")) == []
    model = model_rows(range(400), "v1")
    model["0"] |= {"name": "a", "ts": 2}
    model["1"] |= {"name": "b", "ts": 2}
    assert_exact(table, model | {"900": {"id": 900, "name": "b", "part": "p1", "ts": 2}})


def test_a_write_whose_file_group_was_rewritten_meanwhile_is_written_again(
    spark: SparkSession, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both update key 0's file group; the later write finds the earlier's commit on it,
    is rolled back (its files and staged index changes) and written again on top."""
    with (
        structlog.testing.capture_logs() as logs,
        ThreadPoolExecutor(1) as pool,
        held_at_commit(spark, monkeypatch, tmp_path / "hold", [(0, "a", "p0", 2)], table),
    ):
        frame = local_frame(spark, [(0, "b", "p0", 3), (4, "b", "p0", 3)], SCHEMA)
        b = pool.submit(write, spark, frame, table, "upsert")
        wait_for(
            lambda: bool(logged(logs, "write.waiting_for_earlier_write")) or b.done(),
            "the second write to wait for the first",
        )
    second = b.result()
    [retry] = logged(logs, "write.retrying_after_conflict")
    assert "was written by commit" in retry["conflict"]
    timeline = HoodieTable.open(table).timeline
    [(_, rolled_back)] = timeline.rollbacks()
    assert [info.commit_time for info in rolled_back.instants_rollback] == [retry["instant"]]
    assert second.instant > retry["instant"] and second.rows_updated == 2
    model = model_rows(range(400), "v1")
    model["0"] |= {"name": "b", "ts": 3}
    model["4"] |= {"name": "b", "ts": 3}
    assert_exact(table, model)


def test_a_key_inserted_by_two_writes_at_once_is_held_once(
    spark: SparkSession, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both insert key 900, in different partitions (so different file groups); the later
    write finds the key committed meanwhile, is rolled back, and its retry moves the key
    (the record index is global)."""
    first_rows = [(900, "a", "p0", 2)]
    with (
        structlog.testing.capture_logs() as logs,
        ThreadPoolExecutor(1) as pool,
        held_at_commit(spark, monkeypatch, tmp_path / "hold", first_rows, table, "insert"),
    ):
        frame = local_frame(spark, [(900, "b", "p2", 3)], SCHEMA)
        b = pool.submit(write, spark, frame, table, "insert")
        wait_for(
            lambda: bool(logged(logs, "write.waiting_for_earlier_write")) or b.done(),
            "the second write to wait for the first",
        )
    b.result()
    [retry] = logged(logs, "write.retrying_after_conflict")
    assert "key '900' (1 keys in all) was inserted by a write" in retry["conflict"]
    model = model_rows(range(400), "v1")
    assert_exact(table, model | {"900": {"id": 900, "name": "b", "part": "p2", "ts": 3}})


def test_a_write_that_may_not_wait_for_an_earlier_one_fails_and_is_rolled_back(
    spark: SparkSession, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lock_wait_s=0``: the later write refuses to complete before the earlier one; its
    instant is left without a lease and the next write rolls it back."""
    hold = tmp_path / "hold"
    with held_at_commit(spark, monkeypatch, hold, [(0, "a", "p0", 2)], table) as held:
        frame = local_frame(spark, [(1, "b", "p1", 2)], SCHEMA)
        with pytest.raises(ConflictError, match="requested before this one, did not complete"):
            write(spark, frame, table, "upsert", WriteOptions(lock_wait_s=0))
    later = write(spark, local_frame(spark, [(2, "c", "p2", 2)], SCHEMA), table, "upsert")
    timeline = HoodieTable.open(table).timeline
    assert timeline.pending() == [] and len(timeline.rollbacks()) == 1
    model = model_rows(range(400), "v1")
    model["0"] |= {"name": "a", "ts": 2}
    model["2"] |= {"name": "c", "ts": 2}
    assert_exact(table, model)
    assert [i.timestamp for i in timeline.completed(frozenset({COMMIT}))][-2:] == [
        held.result().instant,
        later.instant,
    ]


def test_a_writer_waits_out_a_dead_holders_lease(spark: SparkSession, table: str) -> None:
    """The holder takes the lock once the write is ready for it and never renews it, as
    a process killed holding it: the write waits, logs the holder once, takes over."""
    dead = StorageLease(
        open_storage(table), "a dead writer", lease_s=SHORT_LEASE_S, heartbeat=False
    )
    frame = local_frame(spark, [(7, "v9", "p3", 9)], SCHEMA)
    with structlog.testing.capture_logs() as logs:
        result = write(
            spark,
            frame,
            table,
            "upsert",
            listener=StageHook(finished={"prepare": dead.acquire}),
        )
    [waiting] = [entry for entry in logs if entry["event"] == "lock.waiting"]
    assert "table is locked by 'a dead writer'" in waiting["held"]
    assert any(entry["event"] == "lock.taken_over" for entry in logs)
    assert HoodieTable.open(table).timeline.find(result.instant).is_completed
    read = hudi_rs_table(table)
    assert read is not None
    names = dict(zip(read.column("id").to_pylist(), read.column("name").to_pylist(), strict=True))
    assert names[7] == "v9" and len(names) == 400


def test_the_result_counts_the_commits_wait_for_the_table_lock(
    spark: SparkSession, table: str
) -> None:
    """Another holder takes the table lock as the write's files are done and keeps it
    until the write's commit waits for it: the write's ``lock_wait_s`` counts that wait
    (at least one poll's sleep), not only the begin's (which found the lock free)."""
    holder = StorageLease(open_storage(table), "another writer", lease_s=RUN_LEASE_S)
    frame = local_frame(spark, [(7, "v9", "p3", 9)], SCHEMA)
    hook = StageHook(finished={"write files": holder.acquire})
    with structlog.testing.capture_logs() as logs, ThreadPoolExecutor(1) as pool:
        committing = pool.submit(write, spark, frame, table, "upsert", listener=hook)
        wait_for(
            lambda: bool(logged(logs, "lock.waiting")) or committing.done(),
            "the commit to wait for the lock",
        )
        holder.release()
        result = committing.result()
    assert result.lock_wait_s >= FIRST_POLL_S / 2  # the shortest sleep between two polls
    assert HoodieTable.open(table).timeline.find(result.instant).is_completed


def test_writes_during_an_index_build_are_caught_up(
    spark: SparkSession, plain_table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    with held_at(monkeypatch, hold, BUILD_HOLD, building(spark, plain_table)) as build:
        # every shard's base file written as of the snapshot
        inserted = write_input(tmp_path / "insert.parquet", range(400, 440), "v2")
        write(
            spark,
            spark.read.parquet(str(inserted)),
            plain_table,
            "insert",
            WriteOptions(lock_wait_s=0),
        )
        updated = write_input(tmp_path / "upsert.parquet", range(0, 400, 5), "v3")
        with structlog.testing.capture_logs() as logs:
            write(
                spark,
                spark.read.parquet(str(updated)),
                plain_table,
                "upsert",
                WriteOptions(index="record", lock_wait_s=0),
            )
        assert [e["event"] for e in logs].count("write.index_being_built") == 1
        deleted = local_frame(spark, [(i, "x", "p3", 9) for i in range(3, 400, 8)], SCHEMA)
        write(spark, deleted, plain_table, "delete", WriteOptions(lock_wait_s=0))
    assert build.result().commits_caught_up == 3
    model = model_rows(range(400), "v1") | model_rows(range(400, 440), "v2")
    model |= model_rows(range(0, 400, 5), "v3")
    for key in range(3, 400, 8):
        del model[str(key)]
    assert_exact(plain_table, model)


def test_a_build_paused_past_its_lease_never_publishes(
    spark: SparkSession, plain_table: str, tmp_path: Path
) -> None:
    hold, paused = start_builder(plain_table, tmp_path, SHORT_LEASE_S)
    try:
        paused.signal_tree(signal.SIGSTOP)
        storage = open_storage(plain_table)
        wait_for(
            lambda: build_lease(storage, "probe").live_lease() is None,
            "the build lease to expire",
        )
        inserted = write_input(tmp_path / "insert.parquet", range(400, 420), "v2")
        write(
            spark,
            spark.read.parquet(str(inserted)),
            plain_table,
            "insert",
            WriteOptions(lock_wait_s=0),
        )
        second = build_index(spark, HoodieTable.open(plain_table), IndexBuildOptions(shards=2))
        assert second.entries == 420
        published = index_bytes(plain_table)
        paused.signal_tree(signal.SIGCONT)
        code, _, err = resume(hold, paused)
    finally:
        paused.kill()
    assert code == 2
    assert "lost the record index build lock" in err.strip().splitlines()[-1]
    assert index_bytes(plain_table) == published
    assert_index_agrees(plain_table)


def index_bytes(uri: str) -> dict[str, bytes]:
    """The files of the table's record index, with their content."""
    return {path: data for path, data in table_bytes(uri).items() if path.startswith(layout.ROOT)}


def test_an_index_service_killed_during_a_build_serves_it_once_restarted(
    spark: SparkSession, plain_table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tidemark serve index`` sees the build in progress, is killed (SIGKILL) before the
    build publishes; the build still completes, and the restarted service answers every
    key exactly as the table holds it."""
    first = ServeProcess("index")
    try:
        hold = tmp_path / "hold"
        with held_at(monkeypatch, hold, BUILD_HOLD, building(spark, plain_table)) as build:
            status = IndexClient(first.address, plain_table).status()
            assert status.build_in_progress and not status.exists
            first.kill()
    finally:
        first.kill()
    assert build.result().as_of
    expected = assert_index_agrees(plain_table)
    second = ServeProcess("index")
    try:
        client = IndexClient(second.address, plain_table)
        located = client.lookup(sorted(expected))
        status = client.status()
    finally:
        second.close()
    assert {r["key"]: (r["partition"], r["file_id"]) for r in located.to_pylist()} == expected
    assert status.exists and not status.build_in_progress
