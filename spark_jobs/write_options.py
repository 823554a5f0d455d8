"""Every option of a write as one frozen value, with the CLI's defaults.

``tidemark write``, ``spark-submit spark_jobs/write/__main__.py`` and the Python API
(``tidemark.spark.write``) all build a ``WriteOptions`` (the CLI from its flags with
``from_args``), so a write has one default for everything wherever it starts, and
options that cannot be right are refused when the value is made, before any work.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from tidemark.checks import require_non_negative, require_positive
from tidemark.config import MIB
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.bulk import DEFAULT_SORT_MODE, SORT_MODES
from tidemark.jobs.checks import require_one_of
from tidemark.jobs.index_writes import TAGGINGS
from tidemark.jobs.job_options import JobOptions
from tidemark.jobs.sizing import DEFAULT_SMALL_FILE_LIMIT_BYTES, DEFAULT_TARGET_FILE_BYTES
from tidemark.table.logfiles.data_blocks import DEFAULT_LOG_BLOCK_FORMAT, LOG_BLOCK_FORMATS
from tidemark.table.maintenance.clean_plan import DEFAULT_RETAIN_COMMITS
from tidemark.table.metadata_table.bootstrap import check_new_metadata_table
from tidemark.table.plans.compaction import DEFAULT_TARGET_IO_MB
from tidemark.table.properties.config import TABLE_TYPES
from tidemark.table.properties.support import COPY_ON_WRITE
from tidemark.table.writes import pending_clustering

MAX_IDEMPOTENCY_KEY_CHARS = 256


@dataclass(frozen=True)
class WriteOptions(JobOptions):
    """How to write; every field has the CLI's default (``JobOptions``: the markers, the
    index service and the table lock, as every job that writes files)."""

    record_key_fields: Sequence[str] = ()
    """Record key field(s); needed only when the write creates the table (``--key``)."""
    partition_fields: Sequence[str] = ()
    """Partition field(s) of a table the write creates (``--partition``)."""
    precombine_field: str | None = None
    """Field deciding between rows of one key: the largest wins (``--precombine``)."""
    hive_style: bool = False
    """``field=value`` partition folders, for a table the write creates."""
    url_encode_partitions: bool = False
    """URL-encode partition values as Hudi does, for a table the write creates."""
    table_version: int | None = None
    """Hudi table version (6, 8 or 9) of a table the write creates (None: 6); on an
    existing table a different version is refused (``--table-version``)."""
    table_type: str | None = None
    """COPY_ON_WRITE or MERGE_ON_READ, for a table the write creates (None: copy-on-write);
    on an existing table a different type is refused (``--table-type``)."""
    log_block_format: str = DEFAULT_LOG_BLOCK_FORMAT
    """Data blocks of the log files a write appends to a merge-on-read table: ``parquet``
    or ``avro`` (Hudi's ``hoodie.logfile.data.block.format``; ``--log-block-format``)."""
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    """Size of the base files the write aims at (``--target-file-mb``)."""
    small_file_limit_bytes: int = DEFAULT_SMALL_FILE_LIMIT_BYTES
    """Files below it are topped up by inserts (``--small-file-mb``)."""
    sort_mode: str = DEFAULT_SORT_MODE
    """bulk_insert layout: none (no shuffle, Hudi's default), partition_sort, global_sort."""
    idempotency_key: str | None = None
    """Stored with the commit; a write whose key a completed instant carries does nothing."""
    disable_hudi_metadata_table: bool = False
    """Remove Hudi's metadata table (a write to one Tidemark does not keep is refused
    otherwise: table version 6, or no ``files`` partition)."""
    hudi_metadata_table: bool = False
    """A table this write creates gets Hudi's metadata table with its ``files`` partition
    (table versions 8 and 9; ``--hudi-metadata-table``)."""
    allow_duplicates: bool = False
    """bulk_insert and insert keep every row of a key that comes several times."""
    set_null_for_missing_columns: bool = False
    """Write the table's top-level columns the input lacks as nulls (Hudi's
    ``hoodie.write.set.null.for.missing.columns``, default false: such an input is refused,
    the error saying both ways on)."""
    index: str | None = None
    """How keys are tagged: ``record`` (the record index; the default once the table has
    one) or ``simple`` (a join with the latest base files)."""
    on_pending_clustering: str = pending_clustering.REPLAN
    """A write touching a pending clustering plan's file groups takes them from the plan
    (``replan``: the rest is saved as a new plan; a running or protected plan is waited
    for), is refused as Hudi's copy-on-write writers do (``reject``), or rolls the plan back
    first (``rollback``)."""
    auto_clean: bool = True
    """After the commit, clean (KEEP_LATEST_COMMITS) and archive inline, as Hudi does by
    default (``hoodie.clean.automatic``); ``--no-auto-clean`` turns both off."""
    retain_commits: int = DEFAULT_RETAIN_COMMITS
    """Commits whose snapshots the inline clean keeps readable (``--retain-commits``)."""
    compact_after: int | None = None
    """On a merge-on-read table, Hudi's inline compaction
    (``hoodie.compact.inline.max.delta.commits``): after the commit, once this many
    deltacommits completed since the last compaction, a compaction is scheduled and run in
    the same Spark session (``--compact-after``); None: never inline."""
    compaction_target_io_mb: float = DEFAULT_TARGET_IO_MB
    """The IO (MB read and written) one inline compaction plan may reach, its file groups
    taken largest logs first (Hudi's ``hoodie.compaction.target.io``, default 500 GB: the
    whole table); a smaller bound compacts part of the table each time
    (``--compaction-target-io-mb``)."""
    shuffle_parallelism: int = 0
    """Partitions of the write's shuffles, as Hudi's ``hoodie.upsert.shuffle.parallelism``;
    0 sizes them to the input (``tidemark.jobs.shuffles``), at most the session's
    ``spark.sql.shuffle.partitions``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("record_key_fields", "partition_fields"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        require_one_of("sort_mode", self.sort_mode, SORT_MODES, "sort mode")
        if self.table_type is not None:
            require_one_of("table_type", self.table_type, TABLE_TYPES, "table type")
        require_one_of(
            "log_block_format", self.log_block_format, LOG_BLOCK_FORMATS, "log block format"
        )
        if self.index is not None:
            require_one_of("index", self.index, TAGGINGS, "index")
        require_one_of(
            "on_pending_clustering",
            self.on_pending_clustering,
            pending_clustering.POLICIES,
            "policy",
        )
        require_positive("target_file_bytes", self.target_file_bytes)
        require_non_negative(
            "small_file_limit_bytes", self.small_file_limit_bytes, "no small-file top-up"
        )
        check_compact_after(self.compact_after, self.table_type)
        require_positive("compaction_target_io_mb", self.compaction_target_io_mb)
        check_new_metadata_table(
            self.hudi_metadata_table, self.table_version, disable=self.disable_hudi_metadata_table
        )
        require_non_negative("shuffle_parallelism", self.shuffle_parallelism, "sized to the input")
        _check_idempotency_key(self.idempotency_key)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> WriteOptions:
        """The options ``tidemark.jobs.write.add_arguments`` parsed."""
        return cls(
            **cls.job_fields(args),
            record_key_fields=args.key,
            partition_fields=args.partition,
            precombine_field=args.precombine,
            hive_style=args.hive_style,
            url_encode_partitions=args.urlencode_partitions,
            table_version=args.table_version,
            table_type=args.table_type,
            log_block_format=args.log_block_format,
            target_file_bytes=args.target_file_mb * MIB,
            small_file_limit_bytes=args.small_file_mb * MIB,
            sort_mode=args.sort_mode,
            idempotency_key=args.idempotency_key,
            disable_hudi_metadata_table=args.disable_hudi_metadata_table,
            hudi_metadata_table=args.hudi_metadata_table,
            allow_duplicates=args.allow_duplicates,
            set_null_for_missing_columns=args.set_null_for_missing_columns,
            index=args.index,
            on_pending_clustering=args.on_pending_clustering,
            auto_clean=not args.no_auto_clean,
            retain_commits=args.retain_commits,
            compact_after=args.compact_after,
            compaction_target_io_mb=args.compaction_target_io_mb,
        )


def check_compact_after(compact_after: int | None, table_type: str | None) -> None:
    """``compact_after`` is a count of deltacommits (at least 1), and only merge-on-read
    tables have deltacommits to compact (None: the table's type is not known yet)."""
    if compact_after is None:
        return
    if not compact_after >= 1:
        raise InvalidArgumentError(
            f"must be >= 1 deltacommits, got {compact_after}", field="compact_after"
        )
    if table_type == COPY_ON_WRITE:
        raise InvalidArgumentError(
            "inline compaction needs a MERGE_ON_READ table; a COPY_ON_WRITE table has no "
            "log files to compact",
            field="compact_after",
        )


def _check_idempotency_key(key: str | None) -> None:
    if key is None:
        return
    if not key.strip() or len(key) > MAX_IDEMPOTENCY_KEY_CHARS or not key.isprintable():
        raise InvalidArgumentError(
            f"must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} printable characters, got {key!r}",
            field="idempotency_key",
        )


DEFAULT_OPTIONS = WriteOptions()
