"""Three index service replicas (real ``tidemark serve index`` processes) behind one
IndexClient given their comma-separated addresses: each replica serves the shards it
owns; one killed with -9 in the middle of a stream of lookups loses no answer (and one
stopped is passed over once a call to it misses its deadline), its
shards served by the others, and it serves them again once restarted; changes staged
while it is down are visible through every replica; two replicas compacting the same
table never fold its deltas twice."""

from __future__ import annotations

import functools
import os
import pickle
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from index.indexkit import Commits
from index.servicekit import BUILT_AS_OF, KEYS, build_index, create_table, location_of

from tidemark.clients.index import IndexClient
from tidemark.clients.index_replicas import ranking
from tidemark.config import ClientConfig
from tidemark.errors import ConflictError, InvalidArgumentError, UnavailableError
from tidemark.index.record_index import RecordIndex
from tidemark.storage import open_storage
from tidemark.storage.uri import canonical_uri

from .index_replicakit import Replica, addresses, free_ports, owned_keys, running

SHARDS = 32
"""Enough shards that each of three replicas owns some."""
ABSENT = [f"absent-{number}" for number in range(20)]
CONFIG = ClientConfig(timeout_s=10.0, max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05)
HUNG = ClientConfig(timeout_s=2.0, max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05)
"""A short deadline, so a stopped replica is passed over soon."""
WAIT_S = 120.0
"""Longest wait for a restarted replica to get its shards back (the channel's reconnect
backoff); a failure past it is a replica that never serves again."""


def expected(keys: list[str]) -> list[tuple[str, str, str] | None]:
    return [(*location_of(key), BUILT_AS_OF) if key in KEYS else None for key in keys]


def answers(located: pa.Table) -> list[tuple[str, str, str] | None]:
    rows = located.select(["partition", "file_id", "instant"]).to_pylist()
    return [
        (row["partition"], row["file_id"], row["instant"]) if row["file_id"] else None
        for row in rows
    ]


@pytest.fixture
def table(tmp_path: Path) -> str:
    uri = str(tmp_path / "table")
    build_index(create_table(uri).storage, KEYS, SHARDS)
    return uri


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    with running(3) as started:
        yield started


def test_each_replica_serves_the_keys_of_the_shards_it_owns(
    table: str, replicas: list[Replica]
) -> None:
    client = IndexClient(addresses(replicas), table, CONFIG, batch_keys=40)
    asked = [*KEYS, *ABSENT][::-1]

    located = pickle.loads(pickle.dumps(client)).lookup(asked)

    assert located["key"].to_pylist() == asked
    assert answers(located) == expected(asked)
    owned = owned_keys(canonical_uri(table), asked, SHARDS, replicas)
    assert [replica.keys_served() for replica in replicas] == owned
    assert min(owned) > 0


def test_a_replica_killed_mid_stream_loses_no_answer_and_serves_again_once_back(
    table: str, replicas: list[Replica]
) -> None:
    client = IndexClient(addresses(replicas), table, CONFIG, batch_keys=30)
    asked = [*KEYS, *ABSENT]
    wrong: list[int] = []
    done = threading.Event()
    rounds = 0

    def lookups() -> None:
        nonlocal rounds
        while not done.is_set():
            if answers(client.lookup(asked)) != expected(asked):
                wrong.append(rounds)
            rounds += 1

    worker = threading.Thread(target=lookups)
    worker.start()
    try:
        wait_for(lambda: rounds >= 5, "lookups before the kill")
        victim = replicas[1]
        victim.kill()
        killed_at = rounds
        wait_for(lambda: rounds >= killed_at + 10, "lookups after the kill")
        survivors_before = sum(replica.keys_served() for replica in (replicas[0], replicas[2]))
        mine = [
            key
            for key in asked
            if owned_keys(canonical_uri(table), [key], SHARDS, replicas)[1] == 1
        ]
        assert answers(client.lookup(mine)) == expected(mine)
        survivors_after = sum(replica.keys_served() for replica in (replicas[0], replicas[2]))
        assert survivors_after - survivors_before >= len(mine)

        victim.start()
        wait_for(lambda: victim.keys_served() > 0, "the restarted replica serving")
    finally:
        done.set()
        worker.join()
    assert rounds > killed_at + 10
    assert wrong == []


def test_a_hung_replica_is_passed_over_once_a_call_to_it_misses_its_deadline(
    table: str, replicas: list[Replica]
) -> None:
    named = [replica.address for replica in replicas]
    owner = replicas[ranking(canonical_uri(table), 0, named)[0]]
    others = [replica for replica in replicas if replica is not owner]
    client = IndexClient(addresses(replicas), table, HUNG)
    asked = [*KEYS, *ABSENT]
    assert answers(client.lookup(asked)) == expected(asked)
    served = sum(replica.keys_served() for replica in others)
    assert owner.process is not None
    os.kill(owner.process.pid, signal.SIGSTOP)
    try:
        status = client.status()
        located = client.lookup(asked)
    finally:
        os.kill(owner.process.pid, signal.SIGCONT)

    assert (status.exists, status.shards) == (True, SHARDS)
    assert answers(located) == expected(asked)
    assert sum(replica.keys_served() for replica in others) >= served + len(asked)


def test_changes_staged_while_a_replica_is_down_are_seen_through_every_replica(
    table: str, replicas: list[Replica]
) -> None:
    client = IndexClient(addresses(replicas), table, CONFIG, batch_keys=25)
    client.lookup(KEYS)
    replicas[2].kill()
    commits = Commits(open_storage(table))
    instant = commits.start()
    moved = KEYS[:100]
    added = [f"new-{number}" for number in range(60)]
    changes = pa.table(
        {
            "key": [*moved, *added, *KEYS[100:110]],
            "partition": [*["dt=2024-09-09"] * 160, *[None] * 10],
            "file_id": [*["moved-0"] * 160, *[None] * 10],
        }
    )

    assert client.stage(instant, changes) == 170
    commits.complete(instant)
    after: dict[str, tuple[str, str, str] | None] = dict.fromkeys(
        [*moved, *added], ("dt=2024-09-09", "moved-0", instant)
    )
    after |= dict.fromkeys(KEYS[100:110])
    asked = [*KEYS, *added, *ABSENT]
    want = [after.get(key, row) for key, row in zip(asked, expected(asked), strict=True)]
    assert answers(client.lookup(asked, as_of=instant)) == want

    replicas[2].start()
    for replica in replicas:
        alone = IndexClient(replica.address, table, CONFIG)
        wait_for(functools.partial(reachable, alone), f"{replica.address} answering")
        assert answers(alone.lookup(asked, as_of=instant)) == want
    assert answers(client.lookup(asked)) == want


def test_two_replicas_compacting_one_table_fold_each_delta_once(
    table: str, replicas: list[Replica]
) -> None:
    routed = IndexClient(addresses(replicas), table, CONFIG)
    commits = Commits(open_storage(table))
    first, second = (IndexClient(replica.address, table, CONFIG) for replica in replicas[:2])
    latest = {key: (*location_of(key), BUILT_AS_OF) for key in KEYS}
    for round_ in range(4):
        for step in range(3):
            instant = commits.start()
            keys = KEYS[step * 50 : step * 50 + 60]
            changes = pa.table(
                {
                    "key": keys,
                    "partition": [f"dt=2024-10-{round_:02d}"] * len(keys),
                    "file_id": [f"group-{round_}-{step}"] * len(keys),
                }
            )
            routed.stage(instant, changes)
            commits.complete(instant)
            latest |= dict.fromkeys(
                keys, (f"dt=2024-10-{round_:02d}", f"group-{round_}-{step}", instant)
            )
        before = RecordIndex.open(open_storage(table)).stats().delta_files
        barrier = threading.Barrier(2)
        with ThreadPoolExecutor(2) as pool:
            folded = list(pool.map(functools.partial(compact, barrier), (first, second)))

        assert sum(folded) == before, f"round {round_}: {folded} folded of {before} deltas"
        for client in (first, second, routed):
            # stats without as_of may come from a view up to a second old (the
            # same rule as lookups), so a replica sees the other's folds within it
            wait_for(lambda: client.stats().delta_files == 0, "every delta folded")  # noqa: B023
            stats = client.stats()
            assert (stats.entries, stats.delta_files) == (len(KEYS), 0)
            assert answers(client.lookup(KEYS, as_of=instant)) == [latest[key] for key in KEYS]


def test_shards_spread_evenly_and_a_down_replicas_shards_over_the_others() -> None:
    named = ["index-0.svc:50052", "index-1.svc:50052", "index-2.svc:50052"]
    rankings = [ranking("s3://bucket/orders", shard, named) for shard in range(3000)]
    owners = Counter(order[0] for order in rankings)
    seconds = Counter(order[1] for order in rankings if order[0] == 1)

    assert all(sorted(order) == [0, 1, 2] for order in rankings)
    assert all(900 < owners[replica] < 1100 for replica in range(3)), owners
    assert all(0.4 < seconds[replica] / owners[1] < 0.6 for replica in (0, 2)), seconds
    assert rankings == [ranking("s3://bucket/orders", shard, named) for shard in range(3000)]
    assert rankings != [ranking("s3://bucket/other", shard, named) for shard in range(3000)]


def test_a_bad_list_is_refused_and_a_list_of_dead_replicas_is_named(table: str) -> None:
    with pytest.raises(InvalidArgumentError) as empty:
        IndexClient("127.0.0.1:1,,127.0.0.1:2", table)
    assert empty.value.field == "index_service_address"
    with pytest.raises(InvalidArgumentError, match=r"lists 127\.0\.0\.1:1 twice"):
        IndexClient("127.0.0.1:1, 127.0.0.1:1", table)
    dead = [f"127.0.0.1:{port}" for port in free_ports(2)]
    client = IndexClient(",".join(dead), table, CONFIG)

    with pytest.raises(UnavailableError) as caught:
        client.lookup(KEYS[:3])

    assert caught.value.field == "index_service_address"
    assert f"no replica of the index service ({dead[0]}, {dead[1]})" in str(caught.value)
    with pytest.raises(UnavailableError, match="no replica of the index service"):
        client.check_reachable()


def compact(barrier: threading.Barrier, client: IndexClient) -> int:
    """Deltas folded by one Compact call started with the other's (0: the other held
    the table's compaction lease)."""
    barrier.wait()
    try:
        return client.compact().deltas_folded
    except ConflictError:
        return 0


def reachable(client: IndexClient) -> bool:
    try:
        client.check_reachable()
    except UnavailableError:
        return False
    return True


def wait_for(condition: object, what: str) -> None:
    """Poll ``condition`` until true; a failure names ``what`` after ``WAIT_S``."""
    assert callable(condition)
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"waited {WAIT_S:g} s for {what}"
        time.sleep(0.05)
