"""Compaction of the record index through a real index service on loopback: in the
background and on request (the Compact RPC), checked against a dict while writers stage,
complete and roll back; and killed (SIGKILL) or failed by storage faults mid-way, after
which lookups stay exact and the next compaction cleans up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pytest

from tidemark.clients.index import IndexClient
from tidemark.errors import ConflictError, TidemarkError
from tidemark.index import layout
from tidemark.index.record_index import COMPACTION_LEASE_S, RecordIndex
from tidemark.rpc.embedded import EmbeddedServer
from tidemark.services.index.config import IndexConfig
from tidemark.services.index.embedded import start_embedded_index_service
from tidemark.storage import Storage, open_storage
from tidemark.storage.retry import MAX_ATTEMPTS_ENV
from tidemark.testing.leases import outlive_lease
from tidemark.testing.s3local import FaultProxy

from .indexkit import Commits, uuid_keys
from .servicekit import BUILT_AS_OF, build_index, create_table, location_of

Model = dict[str, tuple[str, str, str]]
WAIT_S = 120.0


def indexed(uri: str, keys: list[str], shards: int) -> tuple[Storage, Model]:
    """A table whose index holds ``keys`` (``location_of``) and its model."""
    storage = create_table(uri).storage
    build_index(storage, keys, shards)
    return storage, {key: (*location_of(key), BUILT_AS_OF) for key in keys}


def commit(
    storage: Storage,
    model: Model,
    universe: list[str],
    rng: np.random.Generator,
    *,
    count: int,
    stage: IndexClient | RecordIndex,
) -> str:
    """One committed write of ``count`` upserts and deletes over ``universe``."""
    commits = Commits(storage)
    instant = commits.start()
    changes = random_changes(universe, rng, count)
    stage.stage(instant, changes)
    commits.complete(instant)
    apply(model, changes, instant)
    return instant


def random_changes(universe: list[str], rng: np.random.Generator, count: int) -> pa.Table:
    keys = [universe[i] for i in rng.choice(len(universe), count, replace=False)]
    deleted = rng.random(count) < 0.25
    group = rng.integers(0, 4, count)
    return pa.table(
        {
            "key": pa.array(keys, pa.string()),
            "partition": pa.array(
                [None if d else f"dt=2024-02-0{g}" for d, g in zip(deleted, group, strict=True)],
                pa.string(),
            ),
            "file_id": pa.array(
                [None if d else f"{g:08d}-new-0" for d, g in zip(deleted, group, strict=True)],
                pa.string(),
            ),
        }
    )


def apply(model: Model, changes: pa.Table, instant: str) -> None:
    for row in changes.to_pylist():
        if row["partition"] is None:
            model.pop(row["key"], None)
        else:
            model[row["key"]] = (row["partition"], row["file_id"], instant)


def assert_exact(client: IndexClient, model: Model, universe: list[str], as_of: str) -> None:
    assert found_in(client.lookup(universe, as_of=as_of), universe) == model


def found_in(located: pa.Table, universe: list[str]) -> Model:
    """The keys of ``universe`` a lookup found, with their locations."""
    rows = zip(*(located[c].to_pylist() for c in ("partition", "file_id", "instant")), strict=True)
    return {key: row for key, row in zip(universe, rows, strict=True) if row[0] is not None}


def assert_clean(storage: Storage, shards: int) -> None:
    """After a full compaction with nothing pending: one base per shard, no delta, no
    stage manifest, one bases record."""
    for shard in range(shards):
        names = [info.path for info in storage.list_dir(layout.shard_dir(shard)).files]
        assert len(names) == 1 and "/base_" in names[0], names
    assert storage.list_dir(layout.STAGED_DIR).files == ()
    assert len(storage.list_dir(layout.BASES_DIR).files) == 1


ServiceOf = Callable[[IndexConfig], EmbeddedServer]


@pytest.fixture
def service_of() -> Iterator[ServiceOf]:
    """``service_of(config)``: an embedded index service stopped at the end of the test."""
    started: list[EmbeddedServer] = []

    def start(config: IndexConfig) -> EmbeddedServer:
        service = start_embedded_index_service(config=config)
        started.append(service)
        return service

    yield start
    for service in started:
        service.close()


def test_compaction_under_concurrent_staging_is_exact(
    local_root: str, service_of: ServiceOf
) -> None:
    keys = uuid_keys(300)
    universe = keys + uuid_keys(100, seed=1)
    storage, model = indexed(local_root, keys, shards=4)
    service = service_of(IndexConfig(compact_deltas=2, compact_interval_s=0.02))
    client = IndexClient(service.address, local_root)
    stop = threading.Event()
    operator_runs: list[int] = []

    def operator() -> None:  # the Compact RPC, over and over, beside the background one
        while not stop.is_set():
            operator_runs.append(client.compact().shards_compacted)

    thread = threading.Thread(target=operator)
    thread.start()
    rng = np.random.default_rng(7)
    commits = Commits(storage)
    latest = BUILT_AS_OF
    try:
        for round_number in range(30):
            instant = commits.start()
            changes = random_changes(universe, rng, 12)
            client.stage(instant, changes.slice(0, 6))  # two stage calls, compactions between
            client.stage(instant, changes.slice(6))
            assert_exact(client, model, universe, latest)  # pending changes stay invisible
            if round_number % 5 == 4:  # rolled back: discarded now, or left to compaction
                commits.roll_back(instant)
                if round_number % 10 == 9:
                    assert client.discard(instant)
            else:
                commits.complete(instant)
                apply(model, changes, instant)
                latest = instant
            assert_exact(client, model, universe, latest)
    finally:
        stop.set()
        thread.join()
    assert sum(operator_runs) > 0
    client.compact()
    assert_exact(client, model, universe, latest)
    stats = client.stats()
    assert (stats.entries, stats.delta_files, stats.max_shard_deltas) == (len(model), 0, 0)
    assert_clean(storage, 4)


def test_background_compaction_keeps_deltas_per_shard_bounded(
    local_root: str, service_of: ServiceOf
) -> None:
    keys = uuid_keys(400)
    storage, model = indexed(local_root, keys, shards=5)
    service = service_of(IndexConfig(compact_deltas=3, compact_interval_s=0.05))
    client = IndexClient(service.address, local_root)
    rng = np.random.default_rng(3)
    latest = BUILT_AS_OF
    for _ in range(60):
        latest = commit(storage, model, keys, rng, count=8, stage=client)
        assert_exact(client, model, keys, latest)

    def settled() -> bool:
        """Deltas folded and the cleanup done: the older bases record goes last."""
        return (
            client.stats().max_shard_deltas < 3
            and len(storage.list_dir(layout.BASES_DIR).files) == 1
        )

    deadline = time.monotonic() + WAIT_S
    while not settled() and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = client.stats()
    assert stats.max_shard_deltas < 3  # 60 commits touched every shard about 60 times
    assert stats.delta_files < 3 * 5 and stats.entries == len(model)
    assert len(storage.list_dir(layout.STAGED_DIR).files) < 3 * 5
    assert len(storage.list_dir(layout.BASES_DIR).files) == 1
    assert_exact(client, model, keys, latest)


KILLABLE = (
    "import sys\n"
    "from tidemark.index.record_index import RecordIndex\n"
    "from tidemark.storage import open_storage\n"
    "RecordIndex.open(open_storage(sys.argv[1])).compact(1)\n"
)
SHARDS = 24


def first_new_base(storage: Storage) -> bool:
    return any(
        "/base_" in info.path and BUILT_AS_OF not in info.path
        for info in storage.list(layout.SHARDS_DIR + "/")
    )


def bases_record(storage: Storage) -> bool:
    """The new bases are published (the build's own record comes first)."""
    return any(BUILT_AS_OF not in info.path for info in storage.list_dir(layout.BASES_DIR).files)


def indexed_with_deltas(
    uri: str,
    rng: np.random.Generator,
    *,
    keys: int = 6000,
    shards: int = SHARDS,
    commits: int = 12,
    changes: int = 600,
) -> tuple[Storage, Model, list[str], str]:
    """``keys`` keys in ``shards`` shards, then ``commits`` commits of ``changes`` changes
    each, staged as deltas: the storage, the model, the keys and the latest instant."""
    universe = uuid_keys(keys)
    storage, model = indexed(uri, universe, shards=shards)
    index = RecordIndex.open(storage)
    latest = BUILT_AS_OF
    for _ in range(commits):
        latest = commit(storage, model, universe, rng, count=changes, stage=index)
    return storage, model, universe, latest


@pytest.mark.parametrize("moment", [first_new_base, bases_record], ids=["bases", "record"])
def test_compaction_killed_mid_way_leaves_exact_lookups(
    local_root: str, service_of: ServiceOf, moment: Callable[[Storage], bool]
) -> None:
    storage, model, keys, latest = indexed_with_deltas(local_root, np.random.default_rng(11))
    child = subprocess.Popen([sys.executable, "-c", KILLABLE, local_root], env=os.environ.copy())
    try:
        deadline = time.monotonic() + WAIT_S
        while not moment(storage) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL  # killed, not finished
    service = service_of(IndexConfig(compact_deltas=1000))  # no background compaction
    client = IndexClient(service.address, local_root)
    assert_exact(client, model, keys, latest)
    with pytest.raises(ConflictError):  # the killed compactor's lease is still live
        client.compact()
    outlive_lease(storage, lock_dir=layout.COMPACTION_LOCK_DIR, lease_s=COMPACTION_LEASE_S)
    done = client.compact()
    assert done.deltas_folded == (SHARDS * 12 if moment is first_new_base else 0)
    assert_exact(client, model, keys, latest)
    assert_clean(storage, SHARDS)


def test_compaction_failed_by_storage_faults_leaves_exact_lookups(
    s3_server: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, service_of: ServiceOf
) -> None:
    rng = np.random.default_rng(5)
    storage, model, keys, latest = indexed_with_deltas(
        s3_bucket, rng, keys=500, shards=3, commits=4, changes=40
    )
    with FaultProxy(s3_server) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        monkeypatch.setenv(MAX_ATTEMPTS_ENV, "2")
        faulty = RecordIndex.open(open_storage(s3_bucket))
        proxy.fail_always(method="PUT", path_pattern="record-index/bases/")
        with pytest.raises(TidemarkError):
            faulty.compact(1)  # new bases written, never published
        proxy.clear()
        for _ in range(2):
            latest = commit(storage, model, keys, rng, count=40, stage=faulty)
        proxy.fail_always(method="GET", path_pattern=r"prefix=[^&]*shards%2F")
        with pytest.raises(TidemarkError):
            faulty.compact(1)  # published; listing the shards to delete what it replaced fails
        proxy.clear()
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    service = service_of(IndexConfig(compact_deltas=1000))
    client = IndexClient(service.address, s3_bucket)
    assert_exact(client, model, keys, latest)
    latest = commit(storage, model, keys, rng, count=40, stage=client)
    assert client.compact().shards_compacted == 3  # and the orphans of both failures go
    assert_exact(client, model, keys, latest)
    assert_clean(storage, 3)


def test_lookups_are_exact_over_many_deltas_and_while_compaction_folds_them(
    local_root: str,
) -> None:
    """A lookup searches a shard's base and one merged view of its deltas: the newest
    instant wins (also for an older instant completing after newer ones), deletes hide
    base entries, a delta added between two lookups shows at once, and a compaction
    folding the deltas under lookups (of this index and of another process's) changes no
    answer."""
    keys = uuid_keys(300)
    universe = keys + uuid_keys(100, seed=1)
    storage, built = indexed(local_root, keys, shards=2)
    index = RecordIndex.open(storage)
    commits = Commits(storage)
    rng = np.random.default_rng(3)
    history: list[tuple[str, pa.Table]] = []

    def model() -> Model:
        state = dict(built)
        for instant, changes in sorted(history, key=lambda entry: entry[0]):
            apply(state, changes, instant)
        return state

    def exact(reader: RecordIndex, as_of: str) -> bool:
        return found_in(reader.lookup(pa.array(universe), as_of=as_of), universe) == model()

    late = commits.start()
    late_changes = random_changes(universe, rng, 40)
    index.stage(late, late_changes)
    for number in range(14):
        instant = commits.start()
        changes = random_changes(universe, rng, 40)
        index.stage(instant, changes)
        commits.complete(instant)
        history.append((instant, changes))
        assert exact(index, instant), number  # the new delta is in the merged view
        if number == 6:
            commits.complete(late)  # older than the seven after it: they win over it
            history.append((late, late_changes))
            assert exact(index, late)  # as of it: the view re-reads the timeline
    assert index.max_deltas() == 15  # nothing compacted these: 15 deltas per shard

    other = RecordIndex.open(storage)
    started, stop = threading.Event(), threading.Event()
    results: list[bool] = []

    def look_up() -> None:
        while not stop.is_set():
            results.extend([exact(index, instant), exact(other, instant)])
            started.set()

    thread = threading.Thread(target=look_up)
    thread.start()
    try:
        assert started.wait(WAIT_S)
        assert index.compact(min_deltas=1).deltas_folded == 30
    finally:
        stop.set()
        thread.join()
    assert results and all(results)
    assert index.max_deltas() == 0 and exact(index, instant) and exact(other, instant)
