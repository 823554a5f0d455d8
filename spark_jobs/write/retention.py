"""After the commit: the inline clean and archival Hudi runs by default
(``hoodie.clean.automatic``), unless ``auto_clean`` is off."""

from __future__ import annotations

import structlog

from tidemark.errors import TidemarkError
from tidemark.jobs.write_options import WriteOptions
from tidemark.retention import RetentionResult, RetentionSettings, run_retention
from tidemark.table import HoodieTable
from tidemark.table.maintenance.archival import ArchiveSettings
from tidemark.table.maintenance.clean_plan import CleanSettings

log = structlog.get_logger(__name__)


def retention_of(options: WriteOptions) -> RetentionSettings | None:
    """The inline run's settings (checked when made: before the write begins), None when
    ``auto_clean`` is off. With inline compaction, archival keeps the ``compact_after``
    deltacommits it counts (Hudi's archiver reads the same setting)."""
    if not options.auto_clean:
        return None
    archive = ArchiveSettings()
    if options.compact_after is not None:
        archive = ArchiveSettings(compaction_delta_commits=options.compact_after)
    return RetentionSettings(CleanSettings(retain_commits=options.retain_commits), archive)


def retain(
    table: HoodieTable, settings: RetentionSettings, wait_s: float
) -> RetentionResult | None:
    """The inline clean and archival after a commit. The write is done whatever happens
    here: a failure is a warning, and the next write's run (or ``tidemark clean``)
    finishes what this one left."""
    try:
        return run_retention(table, settings, wait_s=wait_s)
    except TidemarkError as error:
        log.warning("write.retention_failed", table=table.uri, error=str(error))
        return None
