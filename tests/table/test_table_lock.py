"""TableLock: exclusive holder, conflicts name the holder, expired leases taken over."""

from __future__ import annotations

import time

import pytest

from tidemark.errors import ConflictError, InvalidArgumentError
from tidemark.storage import open_storage
from tidemark.table.lock import TableLock


def test_second_acquirer_conflicts_until_release(any_table_uri: str) -> None:
    storage = open_storage(any_table_uri)
    with TableLock(storage, "writer-a", lease_s=30) as first:
        assert first.held
        with pytest.raises(ConflictError) as error:
            TableLock(storage, "writer-b", lease_s=30).acquire()
        assert error.value.field == "table"
        assert "writer-a" in str(error.value)
    second = TableLock(storage, "writer-b", lease_s=30)
    second.acquire()
    assert second.held
    second.release()
    assert not second.held


def test_expired_lease_is_taken_over_and_old_holder_learns_it(any_table_uri: str) -> None:
    storage = open_storage(any_table_uri)
    crashed = TableLock(storage, "crashed-writer", lease_s=0.2, heartbeat=False)
    crashed.acquire()
    time.sleep(0.3)
    with TableLock(storage, "new-writer", lease_s=30) as successor:
        assert successor.held
        crashed.renew()
        assert crashed.lost.is_set()
        assert not crashed.held
        crashed.release()
        with pytest.raises(ConflictError) as error:
            TableLock(storage, "third", lease_s=30).acquire()
        assert "new-writer" in str(error.value)


def test_heartbeat_keeps_a_short_lease_alive(table_uri: str) -> None:
    storage = open_storage(table_uri)
    with TableLock(storage, "busy-writer", lease_s=0.3):
        time.sleep(0.6)
        with pytest.raises(ConflictError):
            TableLock(storage, "other", lease_s=0.3).acquire()


def test_invalid_arguments(table_uri: str) -> None:
    storage = open_storage(table_uri)
    with pytest.raises(InvalidArgumentError) as owner:
        TableLock(storage, "")
    assert owner.value.field == "owner"
    with pytest.raises(InvalidArgumentError) as lease:
        TableLock(storage, "x", lease_s=0)
    assert lease.value.field == "lease_s"
