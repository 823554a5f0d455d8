"""Snapshot reads of a table: the latest committed base files, pruned, filtered.

Pruning uses what is cheap: partition paths (for partition-field filters), the record
index, the table's column statistics and Parquet footer min/max statistics (for record
keys and column filters). Every byte is read
through ``Storage.open_input`` so local and S3 tables behave the same.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from tidemark.errors import InvalidArgumentError
from tidemark.storage.damaged import damaged, describe
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.merge import read_slice
from tidemark.table.files.query_types import SNAPSHOT, queried_slices
from tidemark.table.files.view import BaseFile, resolve_as_of
from tidemark.table.filters import arrow, partitions
from tidemark.table.filters.expression import BoundFilter, Filter, bind
from tidemark.table.filters.record_keys import keys_of
from tidemark.table.filters.statistics import may_match
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import (
    META_COLUMNS,
    RECORD_KEY,
    key_source_columns,
    stored_record_keys,
)
from tidemark.table.records.schema import avro_to_arrow_schema

PartitionFilter = Callable[[str], bool] | Mapping[str, Any]

Locator = Callable[[set[str]], Collection[str]]
"""Record keys -> ids of the file groups holding them (a record index lookup)."""

log = structlog.get_logger(__name__)


def read_snapshot(
    table: HoodieTable,
    *,
    columns: Collection[str] | None = None,
    partition_filter: PartitionFilter | None = None,
    record_keys: Collection[str] | None = None,
    filters: list[Filter] | None = None,
    as_of: str | None = None,
    locate: Locator | None = None,
    query_type: str = SNAPSHOT,
) -> pa.Table:
    """Rows visible at ``as_of`` (default: latest), meta columns first, Hudi's snapshot
    (or with ``query_type="read_optimized"`` its read-optimized query: latest base files
    only, ``query_types``), meeting ``filters`` (bound by
    ``tidemark.table.filters.expression.bind``). With ``locate`` (a record index) and
    filters naming every record key field, only the file groups holding those keys are
    opened."""
    declared = snapshot_schema(table)
    bound = bind(filters or [], declared, partition_fields=table.config.partition_fields)
    keys = set(record_keys) if record_keys is not None else keys_of(bound, table.config)
    accept_partition = _partition_predicate(table.config, declared, partition_filter, bound)
    view = table.view(as_of)
    queried = queried_slices(view, None, query_type)
    slices = [s for s in queried if accept_partition(s.partition_path)]
    base_files = [s.base for s in slices if s.base is not None and not s.logs]
    pieces: list[pa.Table] = []
    schemas: list[pa.Schema] = []
    holding = groups_holding(keys, locate)
    merged = [s for s in slices if s.logs and (holding is None or s.file_id in holding)]
    if merged:  # merge-on-read slices with logs: merged first, then filtered like a file
        completed = view.completed_deltacommits()
        schemas.append(declared)
        for file_slice in merged:
            rows = read_slice(table.storage, file_slice, completed, table.config, declared, keys)
            pieces.append(_kept(rows, table.config, columns, keys, bound))
    pruned = files_holding(table.uri, base_files, holding)
    pruned = column_stats.may_hold(table.storage, pruned, bound)
    if len(pruned) < len(base_files):
        schemas.append(declared)  # columns of the files left unopened
    for base_file in pruned:
        try:
            with (
                table.storage.open_input(base_file.path) as stream,
                pq.ParquetFile(stream) as parquet,
            ):
                promoted = _promoted(parquet.schema_arrow, declared)
                schemas.append(promoted)
                if _may_match(parquet, keys, bound, table.config):
                    pieces.append(_read_file(parquet, table.config, promoted, columns, keys, bound))
        except (pa.ArrowInvalid, OSError) as error:  # what pyarrow raises for bad Parquet
            raise damaged(f"{table.uri}/{base_file.path}", describe(error)) from error
    schema = pa.unify_schemas(schemas, promote_options="permissive") if schemas else declared
    for name in columns or ():
        if name not in schema.names:
            raise InvalidArgumentError("no such column in the table", field=name)
    wanted = pa.schema([schema.field(n) for n in columns]) if columns else schema
    if not pieces:
        return wanted.empty_table()
    rows = pa.concat_tables(pieces, promote_options="permissive")
    for field in wanted:  # a column only files left out by the filters have: null, as hudi-rs
        if field.name not in rows.column_names:
            rows = rows.append_column(field, pa.nulls(rows.num_rows, field.type))
    return rows


def groups_holding(keys: set[str] | None, locate: Locator | None) -> set[str] | None:
    """The file groups ``locate`` places ``keys`` in; None (every group may) when either is
    None."""
    return None if keys is None or locate is None else set(locate(keys))


def files_holding(
    table_uri: str, files: list[BaseFile], holding: set[str] | None
) -> list[BaseFile]:
    """``files`` reduced to the file groups in ``holding`` (``groups_holding``; all of them
    when None); the count is logged at debug level (``read.files_opened``)."""
    if holding is not None:
        files = [f for f in files if f.file_id in holding]
    log.debug("read.files_opened", table=table_uri, files=len(files))
    return files


def _partition_predicate(
    config: TableConfig,
    schema: pa.Schema,
    partition_filter: PartitionFilter | None,
    bound: BoundFilter,
) -> Callable[[str], bool]:
    """Partitions that may hold rows meeting ``bound`` and ``partition_filter`` (a
    callable on the path, or ``{field: value}``: equality on partition fields)."""
    if isinstance(partition_filter, Mapping):
        for name in partition_filter:
            if name not in config.partition_fields:
                raise InvalidArgumentError("not a partition field", field=name)
        equal = [(name, "=", value) for name, value in partition_filter.items()]
        bound = bound & bind(equal, schema, partition_fields=config.partition_fields)

    def accept(partition_path: str) -> bool:
        if callable(partition_filter) and not partition_filter(partition_path):
            return False
        return partitions.may_hold(bound, partition_path, config)

    return accept


def _may_match(
    parquet: pq.ParquetFile, keys: set[str] | None, bound: BoundFilter, config: TableConfig
) -> bool:
    """False only when footer statistics prove no row group can match. The record key
    column's statistics count only where it is written (a table of virtual keys leaves it
    null and derives keys from their fields)."""
    if keys is not None and not keys:
        return False
    if keys is not None and config.populate_meta_fields:
        key_schema = pa.schema([pa.field(RECORD_KEY, pa.string())])
        bound = bound & bind([(RECORD_KEY, "in", sorted(keys))], key_schema)
    if not bound:
        return True
    metadata = parquet.metadata
    return any(
        may_match(bound, column_stats.row_group_stats(metadata, rg, bound.columns))
        for rg in range(metadata.num_row_groups)
    )


def _read_file(
    parquet: pq.ParquetFile,
    config: TableConfig,
    promoted: pa.Schema,
    columns: Collection[str] | None,
    keys: set[str] | None,
    bound: BoundFilter,
) -> pa.Table:
    """The file's rows meeting ``bound`` and having one of ``keys``, as ``promoted`` (the
    file's schema, types promoted as declared): filters compare values in the declared
    types, and see a column the file lacks as null."""
    needed = None
    if columns is not None:
        extra = bound.columns + (key_source_columns(config) if keys is not None else [])
        needed = list(dict.fromkeys([*columns, *extra]))
        needed = [n for n in needed if n in parquet.schema_arrow.names]
    data = parquet.read(columns=needed)
    return _kept(data.cast(_promoted(data.schema, promoted)), config, columns, keys, bound)


def _kept(
    data: pa.Table,
    config: TableConfig,
    columns: Collection[str] | None,
    keys: set[str] | None,
    bound: BoundFilter,
) -> pa.Table:
    """``data``'s rows meeting ``bound`` and having one of ``keys``, in ``columns``."""
    stored = data.column_names
    if keys is not None:
        wanted = pa.array(sorted(keys), pa.string())
        data = data.filter(pc.is_in(stored_record_keys(data, config), value_set=wanted))
    for predicate in bound:
        if predicate.column not in data.column_names:
            field = pa.field(predicate.column, predicate.kind)
            data = data.append_column(field, pa.nulls(data.num_rows, predicate.kind))
    condition = arrow.expression(bound)
    if condition is not None:
        data = data.filter(condition)
    return data.select([n for n in columns or stored if n in stored])


def _promoted(schema: pa.Schema, declared: pa.Schema) -> pa.Schema:
    """``schema`` with each scalar column whose type a later write promoted (Hudi's schema
    evolution: int to long, long to string, ...) given its type in the latest writer
    schema, to which Hudi readers (hudi-rs too) cast every file."""
    fields = []
    for field in schema:
        latest = declared.field(field.name) if field.name in declared.names else None
        if latest is not None and latest.type != field.type and _scalar(field.type, latest.type):
            field = field.with_type(latest.type)
        fields.append(field)
    return pa.schema(fields, metadata=schema.metadata)


def _scalar(*kinds: pa.DataType) -> bool:
    return all(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_string(kind)
        or pa.types.is_binary(kind)
        for kind in kinds
    )


def snapshot_schema(table: HoodieTable, as_of: str | None = None) -> pa.Schema:
    """The snapshot's schema as Hudi readers take it: meta columns plus the writer schema
    of the last commit completed by ``as_of`` (``fsview.resolve_as_of``; the table's
    declared schema before any)."""
    avro = table.config.avro_schema
    at = resolve_as_of(table.timeline, table.archive, as_of) if as_of else None
    done = [i for i in table.timeline.completed(WRITE_ACTIONS) if not at or i.completed_at <= at]
    last = max(done, key=lambda i: i.completed_at, default=None)
    if last is not None:
        avro = table.timeline.read_metadata(last).extra_metadata.get("schema", avro)
    meta = [pa.field(name, pa.string()) for name in META_COLUMNS]
    data = list(avro_to_arrow_schema(avro)) if avro else []
    return pa.schema(meta + data)
