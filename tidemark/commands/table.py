"""``tidemark create|read|show|rollback``: create, inspect and repair Hudi tables."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as dt
import decimal
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from tidemark.commands.args import positive_int
from tidemark.errors import InvalidArgumentError
from tidemark.index.pruning import index_locator
from tidemark.jobs.job_options import add_lock_options, add_lock_wait_option
from tidemark.jobs.rollback import rollback_table
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.query_types import QUERY_TYPES, SNAPSHOT
from tidemark.table.files.reader import read_snapshot
from tidemark.table.files.view import BaseFile
from tidemark.table.filters.expression import Filter
from tidemark.table.maintenance.upgrade import TARGETS, upgrade_table
from tidemark.table.metadata_table.bootstrap import (
    add_hudi_metadata_table_argument,
    check_new_metadata_table,
    create_metadata_table,
)
from tidemark.table.properties.config import TableConfig, add_table_type_argument
from tidemark.table.properties.support import COPY_ON_WRITE
from tidemark.table.records.avro_names import check_write_schema, table_name_from_uri
from tidemark.table.records.keys import META_COLUMNS
from tidemark.table.records.schema import arrow_to_avro_schema, avro_to_arrow_schema
from tidemark.table.timeline.history import HistoryEntry, table_history
from tidemark.table.timeline.versions import DEFAULT_TABLE_VERSION, add_table_version_argument
from tidemark.table.writes.commit import rollback_target

PIPE_WIDTH = 240
_IN_LIST = re.compile(r"\s*(?P<column>[^\s=]+)\s+in\s*\((?P<values>[^)]*)\)\s*", re.IGNORECASE)


def register(subparsers: Any) -> None:
    create = subparsers.add_parser("create", help="create an empty Hudi COW table")
    create.add_argument("--table", required=True, help="table base URI (path or s3://)")
    source = create.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--schema-from", metavar="PARQUET", help="take the schema of a Parquet file"
    )
    source.add_argument(
        "--schema", metavar="JSON", help='Avro record JSON or {"column": "arrow type"}'
    )
    create.add_argument("--key", required=True, help="record key field(s), comma-separated")
    create.add_argument("--partition", default="", help="partition field(s), comma-separated")
    create.add_argument("--precombine", help="field deciding between duplicate keys")
    create.add_argument("--hive-style", action="store_true", help="field=value partition folders")
    create.add_argument(
        "--urlencode-partitions",
        action="store_true",
        help="URL-encode partition values in folder names, as Hudi does",
    )
    create.add_argument("--name", help="table name (default: the last folder of --table)")
    add_table_version_argument(create, default=DEFAULT_TABLE_VERSION)
    add_table_type_argument(create, default=COPY_ON_WRITE)
    add_hudi_metadata_table_argument(create)
    create.set_defaults(handler=run_create)

    read = subparsers.add_parser(
        "read", help="print or export the latest snapshot (or the one --as-of an instant)"
    )
    read.add_argument("--table", required=True, help="table base URI")
    read.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="keep rows where COLUMN equals VALUE (or 'COLUMN in (V1,V2)'); repeatable; on "
        "every record key field of a table with a record index, only the file groups "
        "holding those keys are read",
    )
    read.add_argument(
        "--as-of",
        metavar="INSTANT",
        help="time travel: the rows of the writes completed at or before this time "
        "(17 digits yyyyMMddHHmmssSSS; table versions 8 and 9 record completion times, "
        "on version 6 the requested time stands in); a completed write's own instant "
        "reads that write's snapshot; refused before the table's first commit and when "
        "older than the earliest instant the cleaner kept readable",
    )
    read.add_argument(
        "--query-type",
        choices=QUERY_TYPES,
        default=SNAPSHOT,
        help="Hudi's query type: snapshot (base files merged with their log files) or "
        "read_optimized (the latest base files only, log files ignored: a merge-on-read "
        "table's rows as of each file group's last compaction, read without merging; on a "
        "copy-on-write table the snapshot)",
    )
    read.add_argument("--limit", type=positive_int, help="at most N rows")
    read.add_argument("--columns", nargs="+", help="columns to return (default: all)")
    read.add_argument("--output", metavar="PATH", help="write to PATH.parquet or PATH.json")
    read.set_defaults(handler=run_read)

    show = subparsers.add_parser(
        "show", help="print the table's history (its instants) and live file groups"
    )
    show.add_argument("--table", required=True, help="table base URI")
    show.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: the table's layout, its instants (requested and "
        "completion times, action, state, operation, rows and files written) and its "
        "file groups",
    )
    show.add_argument(
        "--archived", action="store_true", help="list the archived instants too, first"
    )
    show.set_defaults(handler=run_show)

    undo = subparsers.add_parser("rollback", help="roll back a pending (failed) write")
    undo.add_argument("--table", required=True, help="table base URI")
    undo.add_argument("--instant", required=True, help="instant time of the failed write")
    add_lock_wait_option(undo)
    undo.set_defaults(handler=run_rollback)

    stats = subparsers.add_parser("stats", help="the column statistics reads skip files by")
    stats_commands = stats.add_subparsers(dest="stats_command", required=True)
    rebuild = stats_commands.add_parser(
        "rebuild",
        help="recompute every live base file's column statistics from its footer",
        description="Writes record them as they commit; this recreates them (a table "
        "written by Hudi or before Tidemark kept them, a damaged or deleted stats file).",
    )
    rebuild.add_argument("--table", required=True, help="table base URI")
    rebuild.set_defaults(handler=run_stats_rebuild)
    upgrade = subparsers.add_parser(
        "upgrade", help="move a version 6 table to Hudi 1.x's table version 8 or 9 in place"
    )
    upgrade.add_argument("--table", required=True, help="table base URI")
    upgrade.add_argument("--to", required=True, type=int, choices=TARGETS, help="8 or 9")
    add_lock_options(upgrade)
    upgrade.set_defaults(handler=run_upgrade)


def run_create(args: argparse.Namespace) -> int:
    schema = _load_schema(args.schema_from, args.schema)
    name = args.name or table_name_from_uri(args.table)
    keys = _fields(args.key)
    partitions = _fields(args.partition)
    for option, names in (("key", keys), ("partition", partitions)):
        for field_name in names:
            if field_name not in schema.names:
                raise InvalidArgumentError(f"{field_name!r} is not a column", field=option)
    if args.precombine and args.precombine not in schema.names:
        raise InvalidArgumentError(f"{args.precombine!r} is not a column", field="precombine")
    config = TableConfig(
        name=name,
        record_key_fields=keys,
        partition_fields=partitions,
        precombine_field=args.precombine,
        hive_style=args.hive_style,
        avro_schema=arrow_to_avro_schema(schema, name),
        key_generator_class=TableConfig.default_key_generator(keys, partitions),
        url_encode_partitions=args.urlencode_partitions,
        table_version=args.table_version,
        table_type=args.table_type,
    )
    check_write_schema(schema, config)
    check_new_metadata_table(args.hudi_metadata_table, config.table_version, disable=False)
    table = HoodieTable.create(args.table, config)
    if args.hudi_metadata_table:
        table.config = create_metadata_table(table.storage, config)
    with_metadata = " with Hudi's metadata table" if args.hudi_metadata_table else ""
    print(
        f"created table {config.name} (version {config.table_version}, {config.table_type})"
        f"{with_metadata} at {table.uri}"
    )
    return 0


def run_read(args: argparse.Namespace) -> int:
    table = HoodieTable.open(args.table)
    result = read_snapshot(
        table,
        columns=args.columns,
        filters=[_parse_where(item) for item in args.where],
        as_of=args.as_of,
        locate=index_locator(table.storage),
        query_type=args.query_type,
    )
    if args.limit is not None:
        result = result.slice(0, args.limit)
    if args.output:
        _write_output(result, args.output)
        print(f"wrote {result.num_rows} rows to {args.output}")
        return 0
    _print_rows(result)
    return 0


def run_stats_rebuild(args: argparse.Namespace) -> int:
    table = HoodieTable.open(args.table)
    files = column_stats.rebuild(table.storage, table.view().latest_base_files())
    print(f"column statistics of {files} base files written to {column_stats.STATS_DIR}/")
    return 0


def run_show(args: argparse.Namespace) -> int:
    table = HoodieTable.open(args.table)
    config = table.config
    instants = table_history(table, archived=args.archived)
    groups = table.view().latest_base_files()
    if args.json:
        print(json.dumps(_show_document(table, instants, groups)))
        return 0
    console = _console()
    console.print(f"table {config.name} at {table.uri}")
    console.print(
        f"record key: {','.join(config.record_key_fields)}  "
        f"partitions: {','.join(config.partition_fields) or '(none)'}  "
        f"hive-style: {str(config.hive_style).lower()}"
    )
    console.print(f"table version: {config.table_version}  table type: {config.table_type}")
    timeline = Table(title="timeline")
    headers = ("instant", "completed at", "action", "state", "operation", "rows", "files")
    for header in headers:
        timeline.add_column(header)
    for entry in instants:
        row = (entry.requested, entry.completed, entry.action, entry.state, entry.operation)
        counts = (entry.rows_written, entry.files_written)
        timeline.add_row(
            *(value or "" for value in row), *("" if n is None else str(n) for n in counts)
        )
    console.print(timeline)
    listing = Table(title="file groups")
    for header in ("partition", "file id", "instant", "bytes"):
        listing.add_column(header)
    for base_file in groups:
        listing.add_row(
            base_file.partition_path or "(root)",
            base_file.file_id,
            base_file.instant,
            str(base_file.size),
        )
    console.print(listing)
    return 0


def _show_document(
    table: HoodieTable, instants: list[HistoryEntry], groups: list[BaseFile]
) -> dict[str, Any]:
    """What ``show --json`` prints: the layout, the instants and the live file groups."""
    config = table.config
    return {
        "table": table.uri,
        "name": config.name,
        "table_version": config.table_version,
        "table_type": config.table_type,
        "record_key_fields": list(config.record_key_fields),
        "partition_fields": list(config.partition_fields),
        "hive_style": config.hive_style,
        "instants": [dataclasses.asdict(entry) for entry in instants],
        "file_groups": [
            {
                "partition": f.partition_path,
                "file_id": f.file_id,
                "instant": f.instant,
                "bytes": f.size,
            }
            for f in groups
        ],
    }


def run_rollback(args: argparse.Namespace) -> int:
    table = HoodieTable.open(args.table)
    rollback_target(table, args.instant)
    (result,) = rollback_table(table, args.instant, lock_wait_s=args.lock_wait_s)
    print(
        f"rolled back {result.rolled_back.action} {args.instant} as rollback "
        f"{result.rollback_instant}: deleted {len(result.deleted_files)} files"
    )
    return 0


def run_upgrade(args: argparse.Namespace) -> int:
    result = upgrade_table(
        HoodieTable.open(args.table),
        args.to,
        lock_wait_s=args.lock_wait_s,
        lock_lease_s=args.lock_lease_s,
    )
    if result.from_version == result.to_version:
        print(f"the table is at version {result.to_version}")
        return 0
    print(
        f"upgraded the table from version {result.from_version} to {result.to_version}: "
        f"{result.instants} instants on the timeline, {result.archived} in the LSM history"
    )
    return 0


def _console() -> Console:
    """Full-width lines when piped or captured, so ids and paths are never cut."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPE_WIDTH, soft_wrap=True)


def _fields(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _load_schema(parquet_path: str | None, schema_json: str | None) -> pa.Schema:
    if parquet_path is not None:
        if not Path(parquet_path).is_file():
            raise InvalidArgumentError(f"no such file {parquet_path}", field="schema-from")
        try:
            return pq.read_schema(parquet_path)
        except pa.ArrowInvalid as error:
            raise InvalidArgumentError(
                f"not a Parquet file: {error}", field="schema-from"
            ) from error
    try:
        parsed = json.loads(schema_json or "")
    except ValueError as error:
        raise InvalidArgumentError(f"not JSON: {error}", field="schema") from error
    if isinstance(parsed, dict) and parsed.get("type") == "record":
        return avro_to_arrow_schema(json.dumps(parsed))
    if not isinstance(parsed, dict) or not parsed:
        raise InvalidArgumentError(
            'expected an Avro record or {"column": "type", ...}', field="schema"
        )
    fields = []
    for column, type_name in parsed.items():
        try:
            fields.append(pa.field(column, pa.type_for_alias(str(type_name))))
        except ValueError as error:
            raise InvalidArgumentError(f"unknown type {type_name!r}", field=column) from error
    return pa.schema(fields)


def _parse_where(item: str) -> Filter:
    """``COLUMN=VALUE`` or ``COLUMN in (V1,V2,...)``."""
    members = _IN_LIST.fullmatch(item)
    if members is not None:
        values = [value.strip() for value in members.group("values").split(",")]
        return members.group("column"), "in", [value for value in values if value]
    column, sep, value = item.partition("=")
    if not sep or not column:
        raise InvalidArgumentError(
            f"{item!r} is not COLUMN=VALUE or COLUMN in (V1,V2,...)", field="where"
        )
    return column, "=", value


def _json_value(value: Any, kind: pa.DataType) -> Any:
    """``value`` as JSON writes it faithfully: binary as base64 (as Spark's ``to_json``),
    maps as objects, structs and lists recursively, dates, times and decimals as text."""
    if value is None:
        return None
    if pa.types.is_map(kind):
        return {str(key): _json_value(item, kind.item_type) for key, item in value}
    if pa.types.is_struct(kind):
        return {f.name: _json_value(value[f.name], f.type) for f in kind}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_json_value(item, kind.value_type) for item in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return value


def _write_output(result: pa.Table, path: str) -> None:
    if not path.endswith((".parquet", ".json")):
        raise InvalidArgumentError("must end in .parquet or .json", field="output")
    folder = Path(path).parent
    if not folder.is_dir():
        raise InvalidArgumentError(f"folder {folder} does not exist", field="output")
    try:
        if path.endswith(".parquet"):
            pq.write_table(result, path)
        else:
            rows = [
                {field.name: _json_value(row[field.name], field.type) for field in result.schema}
                for row in result.to_pylist()
            ]
            Path(path).write_text(json.dumps(rows, indent=1))
    except OSError as error:
        raise InvalidArgumentError(f"cannot write {path}: {error}", field="output") from error


def _print_rows(result: pa.Table) -> None:
    view = Table(show_lines=False)
    shown = [n for n in result.column_names if n not in META_COLUMNS[:2]]
    for name in shown:
        view.add_column(name, overflow="fold")
    for row in result.select(shown).to_pylist():
        view.add_row(*("" if value is None else str(value) for value in row.values()))
    console = _console()
    console.print(view)
    console.print(f"{result.num_rows} rows")
