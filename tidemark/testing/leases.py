"""Freeing a killed process's lease the way time does, without waiting for it to run out."""

from __future__ import annotations

from tidemark.storage.base import Storage
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, LOCK_DIR, StorageLease
from tidemark.testing.clock import AdvancingClock


def outlive_lease(
    storage: Storage, *, lock_dir: str = LOCK_DIR, lease_s: float = DEFAULT_LOCK_LEASE_S
) -> None:
    """A contender whose clock is past a lease of ``lease_s`` takes the lease of
    ``lock_dir`` over and releases it, so the next holder takes it at once. A killed
    process can then keep a lease as long as production's: a short one, renewed by a
    thread a loaded machine stalls, was lost before the point the test kills it at."""
    later = AdvancingClock()
    later.advance(lease_s + 1)
    successor = StorageLease(
        storage, "a holder after the lease", heartbeat=False, lock_dir=lock_dir, clock=later
    )
    successor.acquire()
    successor.release()
