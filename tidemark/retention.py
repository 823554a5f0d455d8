"""Retention of one table: clean, then archive, as Hudi runs them after every commit.

The one entry point for the inline run after each write (``jobs.write``), ``tidemark clean``
/ ``tidemark archive`` and the Python API. Archival is told the record index's oldest
unfolded delta (``tidemark.index``), which the table layer below it cannot read, so no
instant whose delta the index still judges by the timeline leaves the active timeline.
No Spark is needed: cleaning and archival are storage operations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tidemark.index.record_index import oldest_unfolded_delta
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S
from tidemark.table.maintenance.archival import ArchiveResult, ArchiveSettings, archive
from tidemark.table.maintenance.clean import CleanResult, clean
from tidemark.table.maintenance.clean_plan import CleanSettings


@dataclass(frozen=True)
class RetentionSettings:
    """The cleaner's and the archiver's settings, checked against each other."""

    clean: CleanSettings = field(default_factory=CleanSettings)
    archive: ArchiveSettings = field(default_factory=ArchiveSettings)

    def __post_init__(self) -> None:
        self.archive.check_cleaner(self.clean)


@dataclass
class RetentionResult:
    clean: CleanResult
    archive: ArchiveResult
    clean_s: float
    archive_s: float


def clean_table(
    table: HoodieTable,
    settings: CleanSettings | None = None,
    *,
    dry_run: bool = False,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> CleanResult:
    return clean(table, settings, dry_run=dry_run, wait_s=wait_s)


def archive_table(
    table: HoodieTable,
    settings: RetentionSettings | None = None,
    *,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
    reload: bool = True,
) -> ArchiveResult:
    """Archive with ``settings.archive`` (checked against ``settings.clean``)."""
    settings = settings or RetentionSettings()
    return archive(
        table,
        settings.archive,
        keep_from=lambda: oldest_unfolded_delta(table.storage),
        wait_s=wait_s,
        reload=reload,
    )


def run_retention(
    table: HoodieTable,
    settings: RetentionSettings | None = None,
    *,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> RetentionResult:
    """Clean, then archive (the archiver keeps what the new clean still needs)."""
    settings = settings or RetentionSettings()
    started = time.perf_counter()
    cleaned = clean(table, settings.clean, wait_s=wait_s)
    cleaned_at = time.perf_counter()
    archived = archive_table(table, settings, wait_s=wait_s, reload=False)
    return RetentionResult(
        cleaned, archived, cleaned_at - started, time.perf_counter() - cleaned_at
    )
