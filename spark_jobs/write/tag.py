"""The write's keys tagged with their file groups, without the table lock (``tag_keys``):
the record index or a join with the latest base files says where each key is, and the
tagged batch is profiled into the file groups it touches and its inserts per partition.
Given the input's validation pass (``InputChecks``), the profile and the pass are
collected by one Spark job."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import structlog
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row, SparkSession

from tidemark.clients.index import IndexClient
from tidemark.errors import FailedPreconditionError, TidemarkError
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.index_writes import tag_with_index
from tidemark.jobs.tagging import (
    OLD_FILE_ID,
    OLD_PARTITION,
    latest_slices,
    slice_keys,
    tag,
)
from tidemark.jobs.together import collect_together
from tidemark.jobs.validation import InputChecks, InputCounts
from tidemark.jobs.write.job import WriteJob
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile, FileSystemView
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.records.keys import PARTITION_PATH

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Tagged:
    """A batch's keys tagged with their file groups, without the table lock: ``seen``
    are the writes completed when it was tagged (a write completed later may conflict),
    ``touched`` the latest base files of the groups its keys are in, ``inserts`` the new
    rows per partition, ``latest`` the base files of the partitions it goes to or comes
    from, ``counts`` the input's counts when its validation pass came along."""

    rows: DataFrame
    seen: frozenset[str]
    latest: list[BaseFile]
    touched: list[BaseFile]
    inserts: dict[str, int]
    counts: InputCounts | None = None


def tag_keys(
    spark: SparkSession,
    table: HoodieTable,
    keyed: DataFrame,
    operation: str,
    job: WriteJob,
    checks: InputChecks | None = None,
) -> Tagged:
    """Tag keys with their file groups (upsert, delete; insert too with a record index),
    as of the latest completed write, and count what goes where; runs without the table
    lock. Tagged by the record index, only the partitions the batch goes to or comes from
    are listed: the file view costs what the batch touches, not the table. ``checks``:
    the input's validation pass, run in the profile's job (``Tagged.counts``)."""
    seen, view = _listed(table)
    looked_up = ("upsert", "delete", "insert") if job.index else ("upsert", "delete")
    latest: list[BaseFile] | None = None
    if operation not in looked_up:
        tagged = tag(keyed, None)
    elif job.tagging == "record":
        assert job.index is not None
        last = table.timeline.last_completed()
        if last is not None:
            looked_up_keys = _LookedUp(table, keyed, job.index, seen, view, operation, checks)
            return looked_up_keys.tagged(last.timestamp)
        tagged = tag(keyed, None)
    else:
        slices = latest_slices(table, view)
        latest = slices.base_files()
        tagged = tag(
            keyed, slice_keys(spark, table.uri, table.config, slices) if len(slices) else None
        )
    with _persisted(tagged) as persisted:
        return _profiled(table, persisted, seen, view, latest, operation, checks)


@dataclass(frozen=True)
class _LookedUp:
    """Keys tagged by the record index as of the latest completed write. Instants complete
    out of their order: a clustering planned before that write may have committed after
    it, and an index view holding the write completed may still hold the plan pending, so
    the index places the keys the clustering moved in the groups it replaced. Those keys
    are looked up once more, as of the replacing commit, which makes the index read the
    timeline again."""

    table: HoodieTable
    keyed: DataFrame
    index: IndexClient
    seen: frozenset[str]
    view: FileSystemView
    operation: str
    checks: InputChecks | None

    def tagged(self, as_of: str) -> Tagged:
        try:
            return self._profiled(as_of)
        except _IndexBehindViewError as behind:
            log.info(
                "write.index_behind_view",
                table=self.table.uri,
                as_of=as_of,
                replaced_by=behind.replaced_by,
            )
            return self._profiled(behind.replaced_by)

    def _profiled(self, as_of: str) -> Tagged:
        with _persisted(tag_with_index(self.keyed, self.index, as_of)) as rows:
            return _profiled(
                self.table, rows, self.seen, self.view, None, self.operation, self.checks
            )


class _IndexBehindViewError(FailedPreconditionError):
    """The index placed keys in file groups the view lists as replaced by ``replaced_by``."""

    def __init__(self, message: str, replaced_by: str) -> None:
        super().__init__(message, field="index")
        self.replaced_by = replaced_by


@contextmanager
def _persisted(tagged: DataFrame) -> Iterator[DataFrame]:
    """The tagged rows persisted for the write; unpersisted when profiling them fails."""
    persisted = tagged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield persisted
    except BaseException:
        persisted.unpersist()
        raise


def _listed(table: HoodieTable) -> tuple[frozenset[str], FileSystemView]:
    """The writes completed now and the file-system view as of them."""
    table.timeline.refresh()
    seen = frozenset(i.timestamp for i in table.timeline.completed(WRITE_ACTIONS))
    return seen, table.view()


def release(tagged: Tagged | None) -> None:
    """Unpersist the tagged rows of a batch that is tagged again or done."""
    if tagged is not None:
        tagged.rows.unpersist()


def _profiled(
    table: HoodieTable,
    tagged: DataFrame,
    seen: frozenset[str],
    view: FileSystemView,
    latest: list[BaseFile] | None,
    operation: str,
    checks: InputChecks | None,
) -> Tagged:
    """``tag_keys`` once keys are tagged: the file groups the write touches and its inserts
    per partition. ``latest``: the table's latest base files when tagging listed them
    already, else the partitions the batch's rows go to and come from are listed here."""
    profile, counts = _collected(
        tagged.groupBy(PARTITION_PATH, OLD_PARTITION, OLD_FILE_ID).count(), checks
    )
    if latest is None:  # a delete's rows carry no partition path: only where keys are
        partitions = {row[PARTITION_PATH] for row in profile if operation != "delete"}
        partitions |= {row[OLD_PARTITION] for row in profile if row[OLD_FILE_ID] is not None}
        latest = view.latest_base_files(partitions)
        if _unknown_groups(profile, latest):
            # The index may answer as of a write that completed after ``view`` was listed
            # (a clustering's replacecommit moving keys to new groups): list again, once.
            seen, view = _listed(table)
            latest = view.latest_base_files(partitions)
    by_file = {f.file_id: f for f in latest}
    unknown = _unknown_groups(profile, latest)
    if unknown:
        message = (
            f"the record index places keys in file group {unknown[0][OLD_FILE_ID]} "
            f"(partition {unknown[0][OLD_PARTITION]!r}), which the table does not have "
            "(rebuild the index with `tidemark index build --rebuild`)"
        )
        replaced = view.replaced_file_groups()
        replacing = [replaced.get((row[OLD_PARTITION], row[OLD_FILE_ID])) for row in unknown]
        if all(replacing):
            raise _IndexBehindViewError(message, replaced_by=max(filter(None, replacing)))
        raise FailedPreconditionError(message, field="index")
    inserts: dict[str, int] = {}
    touched: list[BaseFile] = []
    for row in profile:
        old_file = row[OLD_FILE_ID]
        if old_file is not None:
            touched.append(by_file[old_file])
        moved = old_file is not None and row[OLD_PARTITION] != row[PARTITION_PATH]
        if moved and operation != "delete" and table.config.orders_by_event_time:
            raise FailedPreconditionError(
                f"value 'EVENT_TIME_ORDERING' is not supported for writes moving keys to "
                f"another partition ({row[OLD_PARTITION]!r} to {row[PARTITION_PATH]!r}): the "
                "stored record may be the newer one",
                field="hoodie.record.merge.mode",
            )
        if operation != "delete" and (old_file is None or moved):
            partition = row[PARTITION_PATH]
            inserts[partition] = inserts.get(partition, 0) + row["count"]
    return Tagged(tagged, seen, latest, touched, inserts, counts)


def _collected(
    profile: DataFrame, checks: InputChecks | None
) -> tuple[list[Row], InputCounts | None]:
    """The profile's rows and, with ``checks``, the input's counts, from one job. Keying
    refuses a null key before the validation pass can name it: on a domain error the pass
    runs alone, raising what it finds."""
    if checks is None:
        return run_spark_action(profile.collect), None
    try:
        rows, groups = collect_together(profile, checks.frame)
    except TidemarkError:
        checks.run()
        raise
    return rows, checks.counted(groups)


def _unknown_groups(profile: list[Row], latest: list[BaseFile]) -> list[Row]:
    """The profile's rows whose keys the index places in a file group ``latest`` lacks."""
    known = {f.file_id for f in latest}
    return [row for row in profile if row[OLD_FILE_ID] not in (None, *known)]
