"""The lease of a running write (``.hoodie/.tidemark/writes/<instant>/``).

A write holds the table lock only to begin (roll back failed writes, tag, plan, request
its instant) and to commit; in between its files are written without it, so its instant
holds a lease of its own (``StorageLease``'s generations, renewed by a heartbeat): another
writer's start rolls back only pending writes whose lease is not live, and a writer paused
past its lease finds it lost and commits nothing (Hudi's heartbeats of a write client,
``.hoodie/.heartbeat/<instant>``, with the table lock's fencing).
"""

from __future__ import annotations

from collections.abc import Callable

from tidemark.errors import FailedPreconditionError
from tidemark.storage.base import Storage
from tidemark.table.leases.instant_lease import instant_lease, live_holder
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, Lease, StorageLease

WRITES_DIR = ".hoodie/.tidemark/writes"


def write_lease(
    storage: Storage,
    instant: str,
    owner: str,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
    *,
    on_lost: Callable[[], None] | None = None,
) -> StorageLease:
    """The lease of write ``instant`` (taken under the table lock, before the instant is
    requested, so a pending write without a live lease is a failed one)."""
    folder = f"{WRITES_DIR}/{instant}"
    return instant_lease(storage, folder, f"write {instant}", owner, lease_s, on_lost=on_lost)


def live_writer(storage: Storage, instant: str) -> Lease | None:
    """The lease of write ``instant`` while its writer is alive, else None."""
    return live_holder(storage, f"{WRITES_DIR}/{instant}", f"write {instant}")


def check_not_writing(storage: Storage, instant: str) -> None:
    """FailedPreconditionError(field="instant") while write ``instant`` runs: rolling it
    back would pull its files from under it."""
    lease = live_writer(storage, instant)
    if lease is not None:
        raise FailedPreconditionError(
            f"write {instant} is running ({lease.owner!r}, its lease ends {lease.ends}); "
            "a failed write is rolled back once its lease has run out",
            field="instant",
        )


def forget_write(storage: Storage, instant: str) -> None:
    """Delete the lease of a write that completed or was rolled back."""
    storage.delete_prefix(f"{WRITES_DIR}/{instant}/")
