"""One way to change a table under its lock, for every party that does (writes, clustering
runs, rollbacks, index builds, the planner, benchmarks).

``changing(table, role)`` takes the table lock, waiting for a holder up to ``wait_s``
(``StorageLease.acquire``), makes it the timeline's fence, turns any failure after the lock
was lost into the one "lost the table lock" error, and releases the lock with one policy:
a release that fails is a warning (the lease ends on its own), never the outcome.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import structlog

from tidemark.errors import ConflictError, TidemarkError, with_note
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import (
    DEFAULT_LOCK_LEASE_S,
    DEFAULT_LOCK_WAIT_S,
    StorageLease,
)
from tidemark.table.properties.support import check_table_type

log = structlog.get_logger(__name__)


def owner_name(role: str) -> str:
    """Who holds a lock, as leases and errors name it: ``tidemark-<role>@host:pid``."""
    return f"tidemark-{role}@{socket.gethostname()}:{os.getpid()}"


@contextmanager
def changing(
    table: HoodieTable,
    role: str,
    *,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
    on_lost: Callable[[], None] | None = None,
    merge_on_read: bool = False,
) -> Iterator[StorageLease]:
    """The table lock held by ``tidemark-<role>`` for the block, fencing every timeline
    transition in it; ``on_lost`` runs once if the lease is lost (e.g. to cancel jobs).
    Every change passes here, so a merge-on-read table is refused here, before the lock
    is taken, to a ``role`` that does not say it handles one (``merge_on_read``)."""
    check_table_type(dict(table.config.properties), merge_on_read=merge_on_read, what=role)
    lock = StorageLease(table.storage, owner_name(role), lease_s=lease_s, on_lost=on_lost)
    lock.acquire(wait_s)
    table.timeline.fence = lock
    try:
        with holding(lock):
            table.timeline.reload()  # what the holders before changed; then ``refresh`` skips
            yield lock
    finally:
        table.timeline.fence = None


@contextmanager
def holding(lock: StorageLease) -> Iterator[StorageLease]:
    """An acquired lock (the table's, a plan's run, a build's) for the block: a failure
    once it was lost is the one lost-lock error; then it is released quietly."""
    try:
        yield lock
    except Exception as failure:
        if not lock.lost.is_set() or _is_lost_lock_error(failure):
            raise
        lost: TidemarkError = lock.lost_error()
        if isinstance(failure, TidemarkError):  # what the work said, e.g. its instant's fate
            lost = with_note(lost, failure.message)
        raise lost from failure
    finally:
        release_quietly(lock)


def release_quietly(lock: StorageLease) -> None:
    """Release after the outcome is decided: a release that fails (the lease then expires
    on its own) is a warning, never the change's result or error."""
    try:
        lock.release()
    except TidemarkError as error:
        log.warning(
            "lock.release_failed",
            owner=lock.owner,
            error=str(error),
            note=f"the lock frees itself when its lease ends (at most {lock.lease_s:.0f} s)",
        )


def _is_lost_lock_error(error: Exception) -> bool:
    """The fence already raised the one lost-lock error (with the work's notes)."""
    return isinstance(error, ConflictError) and error.field == "lock"
