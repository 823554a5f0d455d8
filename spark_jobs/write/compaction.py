"""After the commit, clean and archival: Hudi's inline compaction on a merge-on-read table
(``hoodie.compact.inline``), when the write's ``compact_after`` is set."""

from __future__ import annotations

import structlog
from pyspark.sql import SparkSession

from tidemark.errors import TidemarkError
from tidemark.jobs.compaction import CompactionResult, run_compaction
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.maintenance.compaction import schedule_compaction
from tidemark.table.plans.compaction import ScheduleOptions

log = structlog.get_logger(__name__)


def compact_inline(
    spark: SparkSession, table: HoodieTable, instant: str, options: WriteOptions
) -> tuple[list[CompactionResult], str | None]:
    """In Hudi's order (``runAnyPendingCompactions``, then ``inlineCompaction``): the
    pending compactions no other runner holds, then a plan scheduled once
    ``options.compact_after`` deltacommits completed since the last compaction (at most
    ``options.compaction_target_io_mb`` of IO), run at once. Returns the runs and the
    failure, if any. The write committed ``instant`` before, so a failure does not fail it
    (Hudi's ``hoodie.fail.writes.on.inline.table.service.exception`` would): it is logged
    and returned, and the failed run is back to its plan for the next run."""
    assert options.compact_after is not None
    results: list[CompactionResult] = []
    try:
        results += run_compaction(spark, table, None, options)
        planned = schedule_compaction(
            table,
            ScheduleOptions(options.compact_after, options.compaction_target_io_mb),
            lock_wait_s=options.lock_wait_s,
        )
        if planned is not None:
            results += run_compaction(spark, table, planned.timestamp, options)
    except TidemarkError as error:
        log.warning("write.compaction_failed", table=table.uri, instant=instant, error=str(error))
        return results, str(error)
    log.info("write.compacted_inline", table=table.uri, instant=instant, plans=len(results))
    return results, None
