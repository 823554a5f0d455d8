"""Undoing writes under the table lock: failed writes rolled back with the index changes
they staged, a write's own instant rolled back, and the lease of a decided write
forgotten."""

from __future__ import annotations

import structlog

from tidemark.errors import TidemarkError
from tidemark.jobs.write.job import WriteJob
from tidemark.table import HoodieTable
from tidemark.table.leases.write_lease import forget_write
from tidemark.table.writes.commit import rollback, rollback_failed_writes
from tidemark.table.writes.markers import MarkerReader

log = structlog.get_logger(__name__)


def roll_back_failed_writes(
    table: HoodieTable, reader: MarkerReader, job: WriteJob, exclude: str | None = None
) -> None:
    """Roll back the failed writes (``commit.rollback_failed_writes``) and discard the index
    changes they staged."""
    undone = rollback_failed_writes(
        table, reader, lock_held=True, exclude=() if exclude is None else (exclude,)
    )
    if job.index is not None:
        for result in undone:
            job.index.discard(result.rolled_back.timestamp)


def roll_back_own(table: HoodieTable, instant: str, reader: MarkerReader, job: WriteJob) -> None:
    rollback(table, instant, reader)
    if job.index is not None:
        job.index.discard(instant)
    forget_write(table.storage, instant)


def forget_lease_quietly(table: HoodieTable, instant: str) -> None:
    """Delete the lease of a write that is decided; a failure is a warning, as the next
    write deletes the leases of instants that are not pending."""
    try:
        forget_write(table.storage, instant)
    except TidemarkError as error:
        log.warning("write.lease_left", table=table.uri, instant=instant, error=str(error))
