"""Changing a table under its lock (``tidemark.table.leases.table_lock.changing``): a held lock is
waited for (the holder released, or its lease expired and is taken over), a wait of 0 or
one that runs out fails with the holder's one-line error, and the lock is the timeline's
fence only inside the block."""

from __future__ import annotations

import threading
import time

import pytest
import structlog

from table.table_testkit import people_config
from tidemark.errors import (
    ConflictError,
    FailedPreconditionError,
    InvalidArgumentError,
    UnavailableError,
)
from tidemark.table import HoodieTable
from tidemark.table.leases.plan_run import check_not_running, run_lock
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.leases.table_lock import changing, holding, owner_name
from tidemark.testing.clock import AdvancingClock


@pytest.fixture
def table(table_uri: str) -> HoodieTable:
    return HoodieTable.create(table_uri, people_config())


def test_a_writer_waits_for_the_holder_to_release(table: HoodieTable) -> None:
    holder = StorageLease(table.storage, "a long write", lease_s=30)
    holder.acquire()
    with structlog.testing.capture_logs() as logs:

        def release_once_waited_for() -> None:
            while not any(entry["event"] == "lock.waiting" for entry in list(logs)):
                time.sleep(0.01)
            holder.release()

        releaser = threading.Thread(target=release_once_waited_for)
        releaser.start()
        with changing(table, "write", wait_s=60) as lock:
            assert table.timeline.fence is lock
            assert lock.owner == owner_name("write")
            assert not holder.held
        releaser.join()
    assert table.timeline.fence is None
    [waiting] = [entry for entry in logs if entry["event"] == "lock.waiting"]
    assert "table is locked by 'a long write' until" in waiting["held"]


def test_a_dead_holders_lease_is_taken_over_after_the_wait(table: HoodieTable) -> None:
    dead = StorageLease(table.storage, "dead writer", lease_s=1.0, heartbeat=False)
    dead.acquire()
    with changing(table, "write", wait_s=60) as lock:
        assert lock.held
    with pytest.raises(ConflictError, match="lost the table lock"):
        dead.check()


def test_no_wait_or_a_wait_that_runs_out_fails_naming_the_holder(table: HoodieTable) -> None:
    with StorageLease(table.storage, "a long write", lease_s=30):
        with pytest.raises(ConflictError, match="table is locked by 'a long write' until") as now:
            _change(table, wait_s=0)
        assert now.value.field == "table"
        assert "waited" not in str(now.value)
        with pytest.raises(ConflictError, match=r"waited 0\.5 s") as later:
            _change(table, wait_s=0.5)
        assert "a long write" in str(later.value)
    with pytest.raises(InvalidArgumentError) as negative:
        _change(table, wait_s=-1)
    assert negative.value.field == "lock_wait_s"


def _change(table: HoodieTable, wait_s: float) -> None:
    with changing(table, "write", wait_s=wait_s):
        raise AssertionError("the lock was not expected to be taken")


def test_a_plans_run_lease_excludes_a_second_runner(table: HoodieTable) -> None:
    storage = table.storage
    instant = "20240102030405006"
    with run_lock(storage, instant, "runner-a", lease_s=30):
        with pytest.raises(ConflictError, match=f"clustering plan {instant} is locked by") as held:
            run_lock(storage, instant, "runner-b", lease_s=30).acquire()
        assert held.value.field == "instant"
        with pytest.raises(FailedPreconditionError, match="is being run by 'runner-a'"):
            check_not_running(storage, instant)
    check_not_running(storage, instant)


def test_a_lost_lock_keeps_what_the_failed_work_said(table: HoodieTable) -> None:
    """A writer whose lease ran out (paused, or its storage unreachable) ends with the one
    lost-lock error, carrying the work's own message: which instant was not committed."""
    clock = AdvancingClock()
    paused = StorageLease(table.storage, "paused writer", lease_s=60, heartbeat=False, clock=clock)
    paused.acquire()
    with pytest.raises(ConflictError) as lost, holding(paused):
        clock.advance(31)  # past the safety margin of half a lease: the next check finds it lost
        with pytest.raises(ConflictError):
            paused.check()
        raise UnavailableError(
            "storage unavailable; instant 20240101000000000 was not committed", field="storage"
        )
    assert lost.value.field == "lock"
    message = str(lost.value)
    assert "lost the table lock" in message and "no lease renewal for over 30 s" in message
    assert message.endswith("instant 20240101000000000 was not committed")
