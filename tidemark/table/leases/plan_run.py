"""The lease on a clustering or compaction plan's run (``.hoodie/.tidemark/runs/<instant>/``).

A run rewrites its plan's file groups without the table lock, so the plan's run holds a
lease of its own (``StorageLease``'s generations, in the plan's folder): two runners never
execute one plan, a runner paused past its lease finds it lost and commits nothing, and
no one rolls back an inflight plan whose runner is alive. A plan whose runner died is
taken over once the lease expires.
"""

from __future__ import annotations

from collections.abc import Callable

from tidemark.errors import FailedPreconditionError
from tidemark.storage.base import Storage
from tidemark.table.leases.instant_lease import instant_lease, live_holder
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, Lease, StorageLease

RUNS_DIR = ".hoodie/.tidemark/runs"


def run_lock(
    storage: Storage,
    instant: str,
    owner: str,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
    *,
    on_lost: Callable[[], None] | None = None,
    heartbeat: bool = True,
    what: str = "clustering",
) -> StorageLease:
    """The lease of plan ``instant``'s run (``acquire()`` raises ConflictError(field=
    "instant") naming the runner and ``what`` the plan is: "clustering plan T")."""
    return instant_lease(
        storage,
        f"{RUNS_DIR}/{instant}",
        f"{what} plan {instant}",
        owner,
        lease_s,
        on_lost=on_lost,
        heartbeat=heartbeat,
    )


def live_run(storage: Storage, instant: str) -> Lease | None:
    """The run lease of plan ``instant`` while a live runner executes it, else None."""
    return live_holder(storage, f"{RUNS_DIR}/{instant}", f"clustering plan {instant}")


def check_not_running(storage: Storage, instant: str) -> None:
    """FailedPreconditionError(field="instant") while a live runner executes the plan:
    rolling it back would pull its files from under it."""
    lease = live_run(storage, instant)
    if lease is not None:
        raise FailedPreconditionError(
            f"clustering plan {instant} is being run by {lease.owner!r} (its run lease ends "
            f"{lease.ends})",
            field="instant",
        )


def forget_runs(storage: Storage, instant: str) -> None:
    """Delete the run leases of a plan that completed or was rolled back."""
    storage.delete_prefix(f"{RUNS_DIR}/{instant}/")
