"""The write's first step, before the table is touched: the input validated and keyed
(``prepare``), and the table to write opened or created (``create_or_join``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa
import structlog
from pyspark import StorageLevel
from pyspark.sql import DataFrame

from tidemark.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, with_note
from tidemark.index.build import create_empty_index, index_building, shard_count_for
from tidemark.index.record_index import RecordIndex
from tidemark.jobs.base_file import latest_file_schema
from tidemark.jobs.deletes import delete_keys, without_deleted
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.evolution import conform_to_table
from tidemark.jobs.index_writes import choose_tagging
from tidemark.jobs.keying import (
    arrow_schema,
    check_fields,
    data_columns,
    dedupe,
    keyed_schema,
    with_keys,
)
from tidemark.jobs.shuffles import coalesced_input, estimated_bytes
from tidemark.jobs.validation import InputChecks, InputCounts, check_layout, input_checks
from tidemark.jobs.write_options import WriteOptions, check_compact_after
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.metadata_table.bootstrap import (
    check_new_metadata_table,
    create_metadata_table,
)
from tidemark.table.properties.config import TableConfig
from tidemark.table.properties.support import COPY_ON_WRITE
from tidemark.table.records.avro_names import check_column_names, table_name_from_uri
from tidemark.table.records.schema import arrow_to_avro_schema
from tidemark.table.timeline.versions import DEFAULT_TABLE_VERSION
from tidemark.table.writes.checks import check_writable

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class WriteRequest:
    """What the caller asked for, kept to prepare the input again when another writer
    created the table meanwhile; ``known_partitions`` exist already (``TableMemo``)."""

    df: DataFrame
    table_uri: str
    operation: str
    options: WriteOptions
    known_partitions: frozenset[str] = frozenset()


TAGGED_WITH_VALIDATION = frozenset({"upsert", "delete", "insert"})
"""Operations whose validation pass rides in the record-index tagging's job when the
index service is already serving (an address given: a stream writer's, or deployed)."""


@dataclass(frozen=True)
class Prepared:
    """Validated input: ``rows`` are the data columns for bulk_insert (keyed while writing),
    else keyed (and, with duplicate keys, deduplicated) rows computed from ``cached``, the
    input persisted by the validation pass (None for bulk_insert, which reads its input
    once more instead of holding all of it). ``checks``: the validation pass left to the
    tagging's job (``row_count`` None until ``counted``). ``parallelism``: the write's
    ``shuffle_parallelism`` (0: sized by the input). ``input_bytes``: the input's size as
    Spark measured it caching it (None until ``counted``, and for bulk_insert, which caches
    nothing)."""

    config: TableConfig
    table: HoodieTable | None
    rows: DataFrame
    row_count: int | None
    file_schema: pa.Schema
    avro_schema: str
    indexed: bool
    tagging: str
    cached: DataFrame | None
    checks: InputChecks | None
    operation: str
    allow_duplicates: bool
    parallelism: int
    input_bytes: int | None = None

    def counted(self, counts: InputCounts) -> Prepared:
        """The input with its validation pass's counts: rows with duplicate keys reduced
        to one per key (``keying.dedupe``) unless ``allow_duplicates``; the winners of a
        keyed input persisted, numbered by arrival and chosen once. Its size is known now
        (Spark measured the input caching it): an input Spark could not size before (a
        checkpointed or driver-built frame, a JDBC read) is read by the rest of the write
        in one task per ``INPUT_TASK_BYTES`` (``coalesced_input``), not in one a partition
        it came in, each starting its Python runners (most of them empty for a few rows)."""
        deduplicate = counts.has_duplicate_keys and not self.allow_duplicates
        row_count = counts.keys if deduplicate else counts.rows
        rows = self.rows
        if deduplicate and row_count:
            config = self.config
            if self.operation == "delete":
                config = replace(config, precombine_field=None)
            rows = dedupe(rows, config)
            if self.operation != "bulk_insert":
                rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
                run_spark_action(rows.count)
        if self.operation in ("bulk_insert", "insert_overwrite"):
            rows = without_deleted(rows)
        size = None
        if self.cached is not None:
            # a new projection sees the cache: the frame's own plan was optimized before
            size = estimated_bytes(self.cached.select("*"))
            rows = coalesced_input(rows, self.parallelism, size)
        return replace(self, rows=rows, row_count=row_count, checks=None, input_bytes=size)

    def release(self) -> None:
        """Unpersist what ``prepare`` and ``counted`` persisted."""
        self.rows.unpersist()
        if self.cached is not None:
            self.cached.unpersist()


def prepare(asked: WriteRequest) -> Prepared:
    """Validate everything that can be validated without the lock; nothing is written.
    Rows with duplicate keys are reduced to one per key unless ``allow_duplicates``; a
    batch without duplicates is not shuffled. An empty input (``row_count`` 0) is returned
    as given, nothing persisted. On a table the record index tags, with the index service
    at an address, the validation pass is left to the tagging's job (``checks``)."""
    options, operation = asked.options, asked.operation
    data = data_columns(asked.df)
    check_column_names(arrow_schema(data.schema, data.sparkSession))
    table = _open_existing(asked.table_uri, options)
    config = table.config if table else _new_config(asked.table_uri, data, options)
    check_compact_after(options.compact_after, config.table_type)
    if table is not None:
        check_writable(config, disable_hudi_metadata_table=options.disable_hudi_metadata_table)
    if options.precombine_field:
        config = replace(config, precombine_field=options.precombine_field)
    creates_index = table is None and options.index == "record"
    indexed = creates_index or (table is not None and RecordIndex.exists(table.storage))
    tagging = choose_tagging(
        options.index, indexed, lambda: table is not None and index_building(table.storage)
    )
    if options.allow_duplicates and indexed:
        raise InvalidArgumentError(
            "the table has a record index, which maps each key to one file group",
            field="allow_duplicates",
        )
    if operation != "delete" or table is None:
        check_fields(data, config)  # a delete that creates the table gives its layout
    if operation != "delete" and table is not None:
        data = conform_to_table(
            data,
            table.current_avro_schema(),
            protected_fields=(*config.record_key_fields, *config.partition_fields),
            fill_missing=options.set_null_for_missing_columns,
        )
    data_schema = arrow_schema(data.schema, data.sparkSession)
    storage = table.storage if table is not None else open_storage(asked.table_uri)
    checks = input_checks(
        data, config, operation, table, storage.max_path_bytes, asked.known_partitions
    )
    if operation == "bulk_insert":
        rows = data
    elif operation == "delete":
        rows = delete_keys(data, config)
    else:
        rows = with_keys(data, config)
    if operation == "delete" and table is not None:
        file_schema = latest_file_schema(table) or arrow_schema(
            keyed_schema(data), data.sparkSession
        )
        avro_schema = table.current_avro_schema()
    else:
        file_schema = arrow_schema(keyed_schema(data), data.sparkSession)
        avro_schema = arrow_to_avro_schema(data_schema, config.name)
    # persisted before any job runs: the validation pass fills the cache the rows read
    cached = None if operation == "bulk_insert" else data.persist(StorageLevel.MEMORY_AND_DISK)
    prepared = Prepared(
        config,
        table,
        rows,
        None,
        file_schema,
        avro_schema,
        indexed,
        tagging,
        cached,
        checks,
        operation,
        options.allow_duplicates,
        options.shuffle_parallelism,
    )
    served = tagging == "record" and options.index_service_address is not None
    if table is not None and served and operation in TAGGED_WITH_VALIDATION:
        return prepared
    try:
        return prepared.counted(checks.run())
    except BaseException:
        data.unpersist()
        raise


def create_or_join(asked: WriteRequest, prepared: Prepared) -> tuple[HoodieTable, Prepared]:
    """The table to write: the existing one, a new one, or, when another writer created
    it concurrently, that one (the input checked again against its layout)."""
    if prepared.table is not None:
        return prepared.table, prepared
    wanted = asked.options.hudi_metadata_table
    check_new_metadata_table(wanted, prepared.config.table_version, disable=False)
    try:
        table = HoodieTable.create(asked.table_uri, prepared.config)
    except AlreadyExistsError:
        log.info("write.table_created_concurrently", table=asked.table_uri)
    else:
        if wanted:
            table.config = create_metadata_table(table.storage, table.config)
        if prepared.indexed:  # --index record on a new table: its index starts with it
            assert prepared.row_count is not None  # validated in prepare: no table to tag
            create_empty_index(table.storage, shard_count_for(prepared.row_count))
        return table, prepared
    prepared.release()
    try:
        joined = prepare(asked)
    except InvalidArgumentError as error:
        raise with_note(
            error, "another writer created the table concurrently with a different layout"
        ) from error
    assert joined.table is not None
    return joined.table, joined


def _open_existing(table_uri: str, options: WriteOptions) -> HoodieTable | None:
    try:
        table = HoodieTable.open(table_uri)
    except NotFoundError as missing:
        if missing.field != "table":
            raise
        if options.record_key_fields:
            return None
        raise with_note(
            missing, "a write creates the table when given its record key (--key)"
        ) from missing
    check_layout(table.config, options)
    return table


def _new_config(table_uri: str, data: DataFrame, options: WriteOptions) -> TableConfig:
    name = table_name_from_uri(table_uri)
    keys, partitions = tuple(options.record_key_fields), tuple(options.partition_fields)
    return TableConfig(
        name=name,
        record_key_fields=keys,
        partition_fields=partitions,
        precombine_field=options.precombine_field,
        hive_style=options.hive_style,
        avro_schema=arrow_to_avro_schema(arrow_schema(data.schema, data.sparkSession), name),
        key_generator_class=TableConfig.default_key_generator(keys, partitions),
        url_encode_partitions=options.url_encode_partitions,
        table_version=options.table_version or DEFAULT_TABLE_VERSION,
        table_type=options.table_type or COPY_ON_WRITE,
    )
