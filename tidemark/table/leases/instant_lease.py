"""A lease held on one instant (a clustering plan's run, a write) in a folder of its own:
``StorageLease``'s generations, heartbeat and fencing, as the table lock's, so the party
doing the instant's work without the table lock is known to be alive.
"""

from __future__ import annotations

from collections.abc import Callable

from tidemark.storage.base import Storage
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, Lease, StorageLease


def instant_lease(
    storage: Storage,
    folder: str,
    subject: str,
    owner: str,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
    *,
    on_lost: Callable[[], None] | None = None,
    heartbeat: bool = True,
) -> StorageLease:
    """The lease in ``folder``; its errors name ``subject`` and the field ``instant``."""
    return StorageLease(
        storage,
        owner,
        lease_s,
        heartbeat=heartbeat,
        on_lost=on_lost,
        lock_dir=folder,
        subject=subject,
        field="instant",
    )


def live_holder(storage: Storage, folder: str, subject: str) -> Lease | None:
    """The lease in ``folder`` while its holder is alive, else None."""
    return instant_lease(storage, folder, subject, "lease-check", heartbeat=False).live_lease()
