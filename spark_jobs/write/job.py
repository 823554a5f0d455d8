"""What every step of a write shares (``WriteJob``): the caller's options and what the
write set up from them once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tidemark.clients.index import IndexClient
from tidemark.jobs.job_options import Locking, MarkerOptions
from tidemark.jobs.write.result import TableMemo
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import StorageLease

ROLE = "write"
POLL_S = 0.5
"""How often a waiting write looks at the timeline again (a running clustering plan, an
earlier write on table version 6)."""


@dataclass(frozen=True)
class WriteJob:
    """A write under way: its ``options``, how its tasks make markers (the marker service
    started by now), how keys are tagged (``record`` or ``simple``), the index service
    client (None: the table has no record index), the writer's ``memo`` and how it holds
    the table lock."""

    options: WriteOptions
    markers: MarkerOptions
    tagging: str
    index: IndexClient | None
    memo: TableMemo
    locking: Locking

    @contextmanager
    def locked(self, table: HoodieTable, wait_s: float | None = None) -> Iterator[StorageLease]:
        """The table lock for one of the write's two short steps (begin, commit)."""
        with self.locking.changing(table, ROLE, wait_s, merge_on_read=True) as lock:
            yield lock
