"""StorageLease: exclusive holder, conflicts name the holder, expired leases taken over,
renewals retried, and a holder that cannot prove its lock fenced off the timeline."""

from __future__ import annotations

import json
import threading
import time

import pytest

from table.table_testkit import people_config
from tidemark.errors import ConflictError, InvalidArgumentError
from tidemark.storage import open_storage
from tidemark.storage.retry import MAX_ATTEMPTS_ENV
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import LOCK_DIR, StorageLease
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.timeline.instant import new_instant_time
from tidemark.testing.clock import AdvancingClock, ManualClock
from tidemark.testing.s3local import FaultProxy

LOCK_REQUESTS = r"\.tidemark(/|%2F)lock"
"""The lock's objects and listings in request targets (list prefixes are URL-encoded)."""
LOADED_WAIT_S = 60.0
"""How long a contender waits for the lock: what a machine at load 30 needs, far more
than an idle one (the starvation it guards against makes any wait run out)."""
TIGHT_LOOP_TAKES = 60
"""Takes of the lock by the contenders of the tight loop (about three seconds on an idle
2-core machine)."""


def test_second_acquirer_conflicts_until_release(any_table_uri: str) -> None:
    storage = open_storage(any_table_uri)
    with StorageLease(storage, "writer-a", lease_s=30) as first:
        assert first.held
        with pytest.raises(ConflictError) as error:
            StorageLease(storage, "writer-b", lease_s=30).acquire()
        assert error.value.field == "table"
        assert "writer-a" in str(error.value)
    second = StorageLease(storage, "writer-b", lease_s=30)
    second.acquire()
    assert second.held
    second.release()
    assert not second.held


def test_contenders_in_a_tight_loop_never_hold_the_lock_together(table_uri: str) -> None:
    """Four contenders take and release the lock as fast as they can until it was taken
    60 times. A directory listing is not a snapshot: one made while the lock changed hands
    could miss both the old and the new generation, and the claim built on it (an old
    generation number, long deleted) used to succeed: two holders at once, the stale one
    failing its first ``check`` (about 40 times in five seconds here). Every holder is
    alone and proves its lock. The loop counts takes, not seconds: the race needs
    hand-overs, and a loaded machine makes fewer of them per second."""
    storage = open_storage(table_uri)
    holders, overlaps, lost, taken = 0, 0, 0, 0
    counting = threading.Lock()

    def contend(owner: str) -> None:
        nonlocal holders, overlaps, lost, taken
        while taken < TIGHT_LOOP_TAKES:
            lock = StorageLease(storage, owner, lease_s=60, heartbeat=False)
            try:
                lock.acquire()
            except ConflictError:
                continue
            with counting:
                holders += 1
                taken += 1
                overlaps += holders > 1
            try:
                lock.check()
            except ConflictError:
                with counting:
                    lost += 1
            with counting:
                holders -= 1
            lock.release()

    threads = [threading.Thread(target=contend, args=(f"writer-{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (overlaps, lost) == (0, 0)


def test_a_waiting_committer_gets_the_lock_from_a_writer_loop(table_uri: str) -> None:
    """A writer takes the lock again as soon as it released it, over and over; a committer
    (a clustering run's commit) waits for it. Waiters are served in arrival order, so the
    committer gets the lock at the writer's next release, not never: before the queue the
    writer won every hand-over and the committer's wait ran out."""
    storage = open_storage(table_uri)
    stop = threading.Event()
    holding = threading.Event()
    writes = 0

    def writer_loop() -> None:
        nonlocal writes
        while not stop.is_set():
            lock = StorageLease(storage, "writer", lease_s=30, heartbeat=False)
            lock.acquire(wait_s=LOADED_WAIT_S)
            holding.set()
            writes += 1  # while holding: a write counted is one the lock let through
            time.sleep(0.02)
            lock.release()

    writer = threading.Thread(target=writer_loop)
    writer.start()
    try:
        assert holding.wait(LOADED_WAIT_S)
        committer = StorageLease(storage, "clustering-commit", lease_s=30, heartbeat=False)
        committer.acquire(wait_s=LOADED_WAIT_S)
        assert committer.held
        written = writes
        time.sleep(0.2)
        assert writes == written  # the writer waits behind the committer now
        committer.release()
    finally:
        stop.set()
        writer.join()
    assert writes > written  # and gets the lock back after it


def test_a_dead_waiters_ticket_runs_out(table_uri: str) -> None:
    storage = open_storage(table_uri)
    dead = StorageLease(storage, "dead-waiter", lease_s=0.5, heartbeat=False)
    ticket = dead._renew_ticket(None)
    with pytest.raises(ConflictError, match="awaited first by 'dead-waiter'"):
        StorageLease(storage, "writer", lease_s=30, heartbeat=False).acquire()
    storage.write(
        ticket, json.dumps({"owner": "dead-waiter", "token": "t", "expires_at": 0}).encode()
    )
    with StorageLease(storage, "writer", lease_s=30, heartbeat=False) as lock:
        assert lock.held


def test_expired_lease_is_taken_over_and_old_holder_learns_it(any_table_uri: str) -> None:
    storage = open_storage(any_table_uri)
    crashed = StorageLease(storage, "crashed-writer", lease_s=30, heartbeat=False)
    crashed.acquire()
    later = AdvancingClock()
    later.advance(31)  # past the crashed writer's lease
    with StorageLease(storage, "new-writer", lease_s=30, clock=later) as successor:
        assert successor.held
        crashed.renew()
        assert crashed.lost.is_set()
        assert not crashed.held
        with pytest.raises(ConflictError, match="lost the table lock") as lost:
            crashed.check()
        assert lost.value.field == "lock"
        crashed.release()
        with pytest.raises(ConflictError) as error:
            StorageLease(storage, "third", lease_s=30).acquire()
        assert "new-writer" in str(error.value)


def test_heartbeat_keeps_a_short_lease_alive(table_uri: str) -> None:
    """The heartbeat renews the lease past its first end. Time moves only in the test's
    steps, each shorter than the safety margin and taken once the lease was renewed at the
    step before, so a stalled heartbeat thread on a loaded machine cannot lose the lock."""
    storage = open_storage(table_uri)
    clock = ManualClock()
    with StorageLease(storage, "busy-writer", lease_s=3.0, clock=clock) as busy:
        for _ in range(6):  # 4.2 s: past the first lease's end
            clock.advance(0.7)
            _wait_for_renewal(table_uri, clock.now() + 3.0)
        assert busy.held
        busy.check()
        with pytest.raises(ConflictError):
            StorageLease(storage, "other", lease_s=3.0, clock=clock).acquire()


def test_invalid_arguments(table_uri: str) -> None:
    storage = open_storage(table_uri)
    with pytest.raises(InvalidArgumentError) as owner:
        StorageLease(storage, "")
    assert owner.value.field == "owner"
    with pytest.raises(InvalidArgumentError) as lease:
        StorageLease(storage, "x", lease_s=0)
    assert lease.value.field == "lease_s"


def _lease_expiry(storage_uri: str) -> float:
    storage = open_storage(storage_uri)
    [latest] = [info.path for info in storage.list(f"{LOCK_DIR}/")]
    return float(json.loads(storage.read(latest))["expires_at"])


def _wait_for_renewal(storage_uri: str, expires_at: float) -> None:
    """Until the holder's heartbeat wrote a lease ending at ``expires_at``."""
    while _lease_expiry(storage_uri) != expires_at:
        time.sleep(0.05)


def test_a_failed_renewal_is_retried_on_the_next_tick(
    s3_bucket: str, faulty_s3: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renewal fails (its PUT is refused, with no retry); a later tick renews at the
    time the test stepped to, and the lock is still held and proven."""
    monkeypatch.setenv(MAX_ATTEMPTS_ENV, "1")
    clock = ManualClock()
    with StorageLease(open_storage(s3_bucket), "writer", lease_s=3, clock=clock) as lock:
        faulty_s3.fail_next(1, method="PUT", path_pattern=LOCK_REQUESTS)
        clock.advance(1.0)  # within the safety margin of 1.5 s
        _wait_for_renewal(s3_bucket, clock.now() + 3)
        assert faulty_s3.injected == 1
        assert lock.held
        lock.check()


def test_renewals_failing_past_the_margin_lose_the_lock_and_fence_the_timeline(
    s3_bucket: str, faulty_s3: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renewals fail from some tick on; once the clock passed the safety margin since the
    last one that succeeded, the heartbeat declares the lock lost, cancels the work and
    the timeline refuses the next transition."""
    monkeypatch.setenv(MAX_ATTEMPTS_ENV, "1")
    table = HoodieTable.create(s3_bucket, people_config())
    cancelled = threading.Event()
    clock = ManualClock()
    with StorageLease(
        table.storage, "writer", lease_s=1.5, on_lost=cancelled.set, clock=clock
    ) as lock:
        table.timeline.fence = lock
        instant = new_instant_time()
        table.timeline.create_requested(instant, COMMIT)
        faulty_s3.fail_always(path_pattern=LOCK_REQUESTS)
        while faulty_s3.injected == 0:  # a renewal failed: every later one fails too
            time.sleep(0.05)
        clock.advance(1.0)  # past the safety margin of 0.75 s
        assert cancelled.wait(60)
        assert lock.lost.is_set()
        assert not lock.held
        faulty_s3.clear()
        with pytest.raises(
            ConflictError, match=r"no lease renewal for over 0\.75 s \(the last renewal failed: "
        ):
            table.timeline.transition_inflight(instant, COMMIT)
    table.timeline.reload()
    assert [i.state.name for i in table.timeline.instants()] == ["REQUESTED"]
