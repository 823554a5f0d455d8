"""The write from the command line: ``tidemark write`` and ``spark-submit
spark_jobs/write/__main__.py`` parse the same flags (``add_arguments``) into the
``WriteOptions`` the Python API takes."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import DataType

from tidemark.checks import require_non_negative, require_positive
from tidemark.config import MIB
from tidemark.errors import NotFoundError
from tidemark.jobs.bulk import DEFAULT_SORT_MODE, SORT_MODES
from tidemark.jobs.index_writes import TAGGINGS
from tidemark.jobs.input import FORMATS, read_input
from tidemark.jobs.job_options import add_job_options
from tidemark.jobs.session import build_session
from tidemark.jobs.sizing import DEFAULT_SMALL_FILE_LIMIT_BYTES, DEFAULT_TARGET_FILE_BYTES
from tidemark.jobs.stages import StageListener
from tidemark.jobs.write.result import OPERATION_TYPES, WriteResult
from tidemark.jobs.write.steps import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.logfiles.data_blocks import DEFAULT_LOG_BLOCK_FORMAT, LOG_BLOCK_FORMATS
from tidemark.table.maintenance.clean_plan import DEFAULT_RETAIN_COMMITS
from tidemark.table.metadata_table.bootstrap import add_hudi_metadata_table_argument
from tidemark.table.plans.compaction import DEFAULT_TARGET_IO_MB
from tidemark.table.properties.config import add_table_type_argument
from tidemark.table.records.schema import avro_to_arrow_schema
from tidemark.table.timeline.versions import add_table_version_argument
from tidemark.table.writes import pending_clustering

PROG = "spark_jobs/write/__main__.py"
"""The file ``spark-submit`` runs."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The write options, shared by ``tidemark write`` and ``spark-submit``."""
    parser.add_argument("--table", required=True, help="table base URI (path or s3://)")
    parser.add_argument("--input", required=True, help="Parquet, CSV or JSON Lines path")
    parser.add_argument("--format", choices=FORMATS, help="input format (default: extension)")
    parser.add_argument("--op", required=True, help=", ".join(OPERATION_TYPES))
    parser.add_argument("--key", type=_fields, default=(), help="record key field(s), a,b")
    parser.add_argument("--partition", type=_fields, default=(), help="partition field(s)")
    parser.add_argument("--precombine", help="field deciding between duplicate keys")
    parser.add_argument("--hive-style", action="store_true", help="field=value partitions")
    parser.add_argument(
        "--urlencode-partitions",
        action="store_true",
        help="URL-encode partition values as Hudi does (table creation only)",
    )
    add_table_version_argument(parser, default=None)
    add_table_type_argument(parser, default=None)
    parser.add_argument(
        "--log-block-format",
        choices=LOG_BLOCK_FORMATS,
        default=DEFAULT_LOG_BLOCK_FORMAT,
        help="data blocks of the log files appended to a merge-on-read table (Hudi's "
        f"hoodie.logfile.data.block.format; default {DEFAULT_LOG_BLOCK_FORMAT})",
    )
    add_job_options(parser)
    parser.add_argument(
        "--idempotency-key",
        help="stored with the commit; a write whose key a completed instant already "
        "carries does nothing and reports that instant (makes a retry after an ambiguous "
        "failure safe)",
    )
    parser.add_argument(
        "--disable-hudi-metadata-table",
        action="store_true",
        help="remove Hudi's metadata table (.hoodie/metadata); without it a write to a table "
        "whose metadata table Tidemark does not keep (table version 6, or no files "
        "partition) is refused",
    )
    add_hudi_metadata_table_argument(parser)
    parser.add_argument(
        "--allow-duplicates",
        action="store_true",
        help="bulk_insert and insert: write every row of a key that comes several times "
        "(Hudi's hoodie.combine.before.insert=false); default: one row per key, the largest "
        "precombine value, ties to the last in input order",
    )
    parser.add_argument(
        "--set-null-for-missing-columns",
        action="store_true",
        help="write the table's columns the input lacks as nulls (Hudi's "
        "hoodie.write.set.null.for.missing.columns); default: such an input is refused",
    )
    parser.add_argument(
        "--index",
        choices=TAGGINGS,
        help="how keys are tagged with their file groups: record (the record index; the "
        "default once the table has one) or simple (join with the latest base files); a "
        "table's record index is kept in step either way",
    )
    parser.add_argument("--target-file-mb", type=int, default=DEFAULT_TARGET_FILE_BYTES // MIB)
    parser.add_argument("--small-file-mb", type=int, default=DEFAULT_SMALL_FILE_LIMIT_BYTES // MIB)
    parser.add_argument(
        "--sort-mode",
        choices=SORT_MODES,
        default=DEFAULT_SORT_MODE,
        help="bulk_insert layout (default none, as in Hudi: no shuffle; global_sort: "
        "fewest files, tightest key ranges)",
    )
    pending_clustering.add_argument(parser)
    parser.add_argument(
        "--no-auto-clean",
        action="store_true",
        help="do not clean and archive after the commit (Hudi's hoodie.clean.automatic=false)",
    )
    parser.add_argument(
        "--compact-after",
        type=int,
        metavar="N",
        help="merge-on-read tables: after the commit, once N deltacommits completed since "
        "the last compaction, schedule a compaction and run it in the same Spark session "
        "(Hudi's inline compaction, hoodie.compact.inline.max.delta.commits); default: never",
    )
    parser.add_argument(
        "--compaction-target-io-mb",
        type=float,
        default=DEFAULT_TARGET_IO_MB,
        metavar="MB",
        help="with --compact-after: the IO (MB read and written) one inline compaction may "
        "reach, file groups with the largest logs first (Hudi's hoodie.compaction.target.io; "
        f"default {DEFAULT_TARGET_IO_MB:.0f}, the whole table)",
    )
    parser.add_argument(
        "--retain-commits",
        type=int,
        default=DEFAULT_RETAIN_COMMITS,
        help=f"commits whose snapshots the inline clean keeps readable "
        f"(default {DEFAULT_RETAIN_COMMITS})",
    )


def _fields(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def run(args: argparse.Namespace, listener: StageListener | None = None) -> WriteResult:
    """Run a write described by parsed ``add_arguments`` options: the same
    ``WriteOptions`` the Python API takes. The size options are checked first, by their
    names on the command line."""
    require_positive("target_file_mb", args.target_file_mb)
    require_non_negative("small_file_mb", args.small_file_mb, "no small-file top-up")
    options = WriteOptions.from_args(args)
    spark = build_session(args.master)
    source = read_input(
        spark,
        args.input,
        args.format,
        _column_types(args.table),
        exact_columns=(*args.key, *args.partition),
    )
    return write(spark, source, args.table, args.op, options, listener=listener)


def _column_types(table_uri: str) -> dict[str, DataType]:
    """The existing table's column types, to read CSV and JSON values as (none for a new
    table: its types are inferred from the input)."""
    try:
        table = HoodieTable.open(table_uri)
    except NotFoundError:
        return {}
    schema = avro_to_arrow_schema(table.current_avro_schema())
    return {field.name: from_arrow_type(field.type) for field in schema}


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/write/__main__.py --table ... --op ...``; the master comes
    from spark-submit unless ``--master`` is given."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    add_arguments(parser)
    parser.set_defaults(master=None)
    args = parser.parse_args(argv)
    result = run(args)
    print(result)
    return 0
