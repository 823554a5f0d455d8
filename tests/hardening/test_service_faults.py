"""Faults during the services' own work, on ``tidemark serve`` processes: the planner
killed (SIGKILL) between saving a plan and answering, and its schedules through storage
errors (503s, dropped connections after the store acted, slow responses); the index
service killed during a compaction of its deltas, and compacting through the same storage
errors. After each, every answer is exact and
nothing is half-written. The other services' faults have their
tests beside their code; docs/reliability.md lists them all."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from index.test_index_compaction import (
    SHARDS,
    assert_clean,
    assert_exact,
    commit,
    first_new_base,
    indexed_with_deltas,
)
from planner.conftest import FAST_CLIENT
from planner.plankit import add_file_groups, serve_planner
from table.table_testkit import people_config

from tidemark.clients.index import IndexClient
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.config import ClientConfig
from tidemark.errors import ConflictError, TidemarkError, UnavailableError
from tidemark.faults import HOLD_AT_ENV, REACHED_FILE
from tidemark.index import layout
from tidemark.index.record_index import COMPACTION_LEASE_S
from tidemark.rpc.process import ServeProcess
from tidemark.storage import open_storage
from tidemark.storage.local import TEMP_MARKER
from tidemark.storage.retry import MAX_ATTEMPTS_ENV
from tidemark.table import HoodieTable
from tidemark.table.plans.clustering import pending_plans
from tidemark.testing.leases import outlive_lease
from tidemark.testing.s3local import FaultProxy

WAIT_S = 120.0
SMALL_FILES = {"eu": [50, 400, 30, 200], "us": [10, 20]}
OPTIONS = plan_options(small_file_limit_bytes=10 << 20, target_file_bytes=64 << 20)
PLAN_PUT = r"replacecommit\.requested"


def small_files_table(uri: str) -> tuple[HoodieTable, set[tuple[str, str]]]:
    """Six small file groups in two partitions; returns them as (partition, file id)."""
    table = HoodieTable.create(uri, people_config())
    add_file_groups(table, SMALL_FILES)
    groups = {(f.partition_path, f.file_id) for f in table.view().latest_base_files()}
    assert len(groups) == 6
    return table, groups


def leftovers(uri: str) -> list[str]:
    """Temporaries and half-written objects under ``.hoodie`` (none may be left)."""
    storage = open_storage(uri)
    return [
        info.path
        for info in storage.list(".hoodie/")
        if TEMP_MARKER in info.path.rpartition("/")[2]
        or (info.size == 0 and info.path.endswith(".replacecommit.requested"))
    ]


def assert_one_whole_plan(uri: str, groups: set[tuple[str, str]]) -> str:
    """Exactly one pending plan, readable, of exactly ``groups``; returns its instant."""
    (pending,) = pending_plans(HoodieTable.open(uri))
    assert pending.plan.file_groups() == groups
    assert leftovers(uri) == []
    return pending.timestamp


@pytest.fixture
def planners() -> Iterator[Callable[..., ServeProcess]]:
    """``start(env)``: a ``tidemark serve planner`` process, killed at the end."""
    started: list[ServeProcess] = []

    def start(env: dict[str, str] | None = None) -> ServeProcess:
        started.append(serve_planner(env))
        return started[-1]

    yield start
    for process in started:
        if process.process.poll() is None:
            process.kill()


def test_planner_killed_between_saving_a_plan_and_answering(
    tmp_path: Path, planners: Callable[..., ServeProcess]
) -> None:
    """The caller gets UNAVAILABLE, not an answer; the saved plan is whole, and the next
    planner serves it, plans nothing on its file groups, and cancels it cleanly."""
    table, groups = small_files_table(str(tmp_path / "people"))
    before = {(f.partition_path, f.file_id, f.path) for f in table.view().latest_base_files()}
    held = tmp_path / "held"
    held.mkdir()
    first = planners(
        {HOLD_AT_ENV: f"planner_plan_saved:{held}", "TIDEMARK_PLANNER_LOCK_LEASE_S": "2"}
    )
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(PlannerClient(first.address, FAST_CLIENT).schedule, table.uri, OPTIONS)
        wait_until(lambda: (held / REACHED_FILE).exists(), "the plan to be saved")
        first.kill()
        with pytest.raises(UnavailableError):
            answer.result(timeout=WAIT_S)
    instant = assert_one_whole_plan(table.uri, groups)
    second = PlannerClient(planners().address, FAST_CLIENT)
    assert [plan.instant_time for plan in second.list_plans(table.uri)] == [instant]
    again = second.schedule(table.uri, OPTIONS)  # waits out the dead planner's 2 s lock lease
    assert not again.HasField("plan") and again.reason
    second.cancel_plan(table.uri, instant)
    assert second.list_plans(table.uri) == []
    assert {(f.partition_path, f.file_id, f.path) for f in table.view().latest_base_files()} == (
        before
    )
    assert leftovers(table.uri) == []


FAULTS: dict[str, Callable[[FaultProxy], None]] = {
    "503s on the plan's PUT": lambda proxy: proxy.fail_next(2, method="PUT", path_pattern=PLAN_PUT),
    "the plan's PUT stored, its connection dropped": lambda proxy: proxy.fail_next(
        1, method="PUT", path_pattern=PLAN_PUT, forward=True, reset=True
    ),
    "connections dropped on reads": lambda proxy: proxy.fail_next(3, method="GET", reset=True),
}
SLOW = "slow responses"
FAULTS[SLOW] = lambda proxy: proxy.delay(300, method="GET")


@pytest.mark.parametrize("fault", FAULTS)
def test_planner_schedules_through_storage_faults(
    faulty_s3: FaultProxy,
    s3_bucket: str,
    planners: Callable[..., ServeProcess],
    fault: str,
) -> None:
    """Transient faults are retried: one answer, one whole plan of every small file."""
    _, groups = small_files_table(s3_bucket)
    client = PlannerClient(planners().address, FAST_CLIENT)
    FAULTS[fault](faulty_s3)
    answer = client.schedule(s3_bucket, OPTIONS)
    faulty_s3.clear()
    assert faulty_s3.injected > 0 or fault == SLOW
    instant = assert_one_whole_plan(s3_bucket, groups)
    assert answer.plan.instant_time == instant
    assert {(g.partition_path, s.file_id) for g in answer.plan.groups for s in g.slices} == groups


def test_a_plan_storage_refuses_to_store_leaves_no_plan_and_no_lock(
    faulty_s3: FaultProxy,
    s3_bucket: str,
    planners: Callable[..., ServeProcess],
) -> None:
    _, groups = small_files_table(s3_bucket)
    client = PlannerClient(planners({MAX_ATTEMPTS_ENV: "2"}).address, FAST_CLIENT)
    faulty_s3.fail_always(method="PUT", path_pattern=PLAN_PUT)
    with pytest.raises(TidemarkError) as caught:
        client.schedule(s3_bucket, OPTIONS)
    faulty_s3.clear()
    assert "replacecommit.requested" in str(caught.value) or "503" in str(caught.value)
    assert pending_plans(HoodieTable.open(s3_bucket)) == []
    assert leftovers(s3_bucket) == []
    answer = client.schedule(s3_bucket, OPTIONS)  # the lock was released: no lease to wait out
    assert assert_one_whole_plan(s3_bucket, groups) == answer.plan.instant_time


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


NO_BACKGROUND_COMPACTION = {"TIDEMARK_INDEX_COMPACT_DELTAS": "1000"}
ONE_ATTEMPT = ClientConfig(max_attempts=1)


def test_index_service_killed_during_its_compaction(local_root: str) -> None:
    """``tidemark serve index`` is killed once its Compact call wrote a first new base: a
    restarted service answers exactly at once, takes writes, refuses to compact while
    the dead one's compaction lease holds, and once it is outlived (on a clock past it,
    not a minute of waiting) compacts everything and deletes the orphans."""
    rng = np.random.default_rng(29)
    storage, model, keys, latest = indexed_with_deltas(local_root, rng)
    first = ServeProcess("index", env=NO_BACKGROUND_COMPACTION)
    try:
        with ThreadPoolExecutor(1) as pool:
            compaction = pool.submit(IndexClient(first.address, local_root, ONE_ATTEMPT).compact)
            wait_until(lambda: first_new_base(storage), "a first new base")
            first.kill()
            with pytest.raises(TidemarkError):
                compaction.result(timeout=WAIT_S)
    finally:
        first.kill()
    second = ServeProcess("index", env=NO_BACKGROUND_COMPACTION)
    try:
        client = IndexClient(second.address, local_root)
        assert_exact(client, model, keys, latest)
        latest = commit(storage, model, keys, rng, count=600, stage=client)
        assert_exact(client, model, keys, latest)
        with pytest.raises(ConflictError):  # the dead service's compaction lease holds
            client.compact()
        outlive_lease(storage, lock_dir=layout.COMPACTION_LOCK_DIR, lease_s=COMPACTION_LEASE_S)
        done = client.compact()
        assert done.shards_compacted == SHARDS
        assert_exact(client, model, keys, latest)
    finally:
        second.close()
    assert_clean(storage, SHARDS)


COMPACTION_FAULTS: dict[str, Callable[[FaultProxy], None]] = {
    "503s on the new bases' PUTs": lambda proxy: proxy.fail_next(
        3, method="PUT", path_pattern=r"record-index/shards/.*/base_"
    ),
    "the bases record stored, its connection dropped": lambda proxy: proxy.fail_next(
        1, method="PUT", path_pattern="record-index/bases/", forward=True, reset=True
    ),
    "connections dropped on reads": lambda proxy: proxy.fail_next(4, method="GET", reset=True),
    SLOW: lambda proxy: proxy.delay(200, method="GET"),
}


@pytest.mark.parametrize("fault", COMPACTION_FAULTS)
def test_index_service_compacts_through_storage_faults(
    faulty_s3: FaultProxy, s3_bucket: str, fault: str
) -> None:
    """Transient faults during the service's Compact call are retried: it folds every
    shard, lookups stay exact throughout, and nothing is left behind."""
    storage, model, keys, latest = indexed_with_deltas(
        s3_bucket, np.random.default_rng(31), keys=600, shards=3, commits=4, changes=60
    )
    served = ServeProcess("index", env=NO_BACKGROUND_COMPACTION)
    try:
        client = IndexClient(served.address, s3_bucket)
        assert_exact(client, model, keys, latest)
        COMPACTION_FAULTS[fault](faulty_s3)
        done = client.compact()
        faulty_s3.clear()
        assert faulty_s3.injected > 0 or fault == SLOW
        assert done.shards_compacted == 3
        assert_exact(client, model, keys, latest)
    finally:
        served.close()
    assert_clean(storage, 3)
