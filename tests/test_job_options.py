"""The jobs' option objects refuse a bad value when they are made, naming the field (no
Spark, no table: the value is checked before any work), and have the defaults of the CLI
flags that set them."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tidemark.cli import build_parser
from tidemark.clients.planner import PlanOptions
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.cluster_options import ClusterOptions
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.read_options import LookupOptions, ReadOptions
from tidemark.jobs.write_options import WriteOptions


@pytest.mark.parametrize(
    ("make", "field", "message"),
    [
        (lambda: WriteOptions(sort_mode="random"), "sort_mode", "unknown sort mode 'random'"),
        (lambda: WriteOptions(index="bloom"), "index", "unknown index 'bloom'"),
        (
            lambda: WriteOptions(markers="files"),  # type: ignore[arg-type]
            "markers",
            "unknown marker kind 'files'",
        ),
        (
            lambda: WriteOptions(on_pending_clustering="ignore"),
            "on_pending_clustering",
            "unknown policy 'ignore'",
        ),
        (lambda: WriteOptions(target_file_bytes=0), "target_file_bytes", "must be > 0, got 0"),
        (
            lambda: WriteOptions(small_file_limit_bytes=-1),
            "small_file_limit_bytes",
            "must be >= 0 (0: no small-file top-up), got -1",
        ),
        (lambda: WriteOptions(lock_lease_s=float("nan")), "lock_lease_s", "must be > 0"),
        (lambda: WriteOptions(lock_wait_s=-1), "lock_wait_s", "must be >= 0"),
        (lambda: WriteOptions(idempotency_key=" "), "idempotency_key", "printable characters"),
        (lambda: WriteOptions(compact_after=0), "compact_after", "must be >= 1 deltacommits"),
        (
            lambda: WriteOptions(compact_after=2, table_type="COPY_ON_WRITE"),
            "compact_after",
            "needs a MERGE_ON_READ table",
        ),
        (
            lambda: WriteOptions(compaction_target_io_mb=float("inf")),
            "compaction_target_io_mb",
            "must be > 0, got inf",
        ),
        (lambda: ClusterOptions(row_group_bytes=0), "row_group_bytes", "must be > 0, got 0"),
        (lambda: ClusterOptions(min_slice_bytes=-5), "min_slice_bytes", "must be > 0, got -5"),
        (lambda: ClusterOptions(lock_lease_s=0), "lock_lease_s", "must be > 0, got 0"),
        (lambda: ClusterOptions(lock_wait_s=-0.5), "lock_wait_s", "must be >= 0"),
        (
            lambda: ClusterOptions(markers="files"),  # type: ignore[arg-type]
            "markers",
            "unknown marker kind",
        ),
        (lambda: IndexBuildOptions(shards=0), "shards", "must be 1 to 10000, got 0"),
        (lambda: IndexBuildOptions(shards=10_001), "shards", "must be 1 to 10000, got 10001"),
        (lambda: IndexBuildOptions(lock_lease_s=0), "lock_lease_s", "must be > 0, got 0"),
        (lambda: IndexBuildOptions(lock_wait_s=-1), "lock_wait_s", "must be >= 0"),
    ],
)
def test_a_bad_option_is_refused_naming_its_field(
    make: Callable[[], object], field: str, message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        make()
    assert refused.value.field == field
    assert message in refused.value.message


def test_the_defaults_are_valid_and_the_options_frozen() -> None:
    for options in (WriteOptions(), ClusterOptions(), IndexBuildOptions()):
        with pytest.raises(AttributeError):
            options.lock_wait_s = 1.0  # type: ignore[misc]
    assert ClusterOptions(markers="service").with_marker_service("h:1").marker_service_address


WRITE = ("write", "--table", "t", "--input", "in.parquet", "--op", "upsert")
CLUSTER_RUN = ("cluster", "run", "--table", "t")
CLUSTER_SCHEDULE = ("cluster", "schedule", "--table", "t")
READ = ("read", "--table", "t")

JOB_FLAGS = {
    "markers": ["--markers", "direct"],
    "marker_service_address": ["--marker-service", "h:1"],
    "marker_fallback_direct": ["--marker-fallback-direct"],
    "index_service_address": ["--index-service", "h:2"],
    "lock_lease_s": ["--lock-lease-s", "30"],
    "lock_wait_s": ["--lock-wait-s", "5"],
}
"""The flags of ``add_job_options``, which every job writing files takes (``JobOptions``)."""
FLAGS: dict[type[Any], tuple[tuple[str, ...], dict[str, list[str]]]] = {
    WriteOptions: (
        WRITE,
        {
            **JOB_FLAGS,
            "record_key_fields": ["--key", "id"],
            "partition_fields": ["--partition", "day"],
            "precombine_field": ["--precombine", "ts"],
            "hive_style": ["--hive-style"],
            "url_encode_partitions": ["--urlencode-partitions"],
            "table_version": ["--table-version", "8"],
            "table_type": ["--table-type", "MERGE_ON_READ"],
            "target_file_bytes": ["--target-file-mb", "64"],
            "small_file_limit_bytes": ["--small-file-mb", "10"],
            "sort_mode": ["--sort-mode", "global_sort"],
            "idempotency_key": ["--idempotency-key", "batch-1"],
            "disable_hudi_metadata_table": ["--disable-hudi-metadata-table"],
            "hudi_metadata_table": ["--hudi-metadata-table"],
            "allow_duplicates": ["--allow-duplicates"],
            "set_null_for_missing_columns": ["--set-null-for-missing-columns"],
            "index": ["--index", "simple"],
            "on_pending_clustering": ["--on-pending-clustering", "reject"],
            "auto_clean": ["--no-auto-clean"],
            "retain_commits": ["--retain-commits", "20"],
            "compact_after": ["--compact-after", "3"],
            "compaction_target_io_mb": ["--compaction-target-io-mb", "40"],
            "log_block_format": ["--log-block-format", "avro"],
        },
    ),
    ClusterOptions: (
        CLUSTER_RUN,
        {
            **JOB_FLAGS,
            "row_group_bytes": ["--row-group-mb", "8"],
            "min_slice_bytes": ["--min-slice-mb", "8"],
        },
    ),
    PlanOptions: (
        CLUSTER_SCHEDULE,
        {
            "sort_columns": ["--sort-columns", "a,b"],
            "layout": ["--layout", "hilbert"],
            "partitions": ["--partitions", "recent:2"],
            "target_file_bytes": ["--target-file-mb", "64"],
            "small_file_limit_bytes": ["--small-file-mb", "10"],
            "max_bytes_per_group": ["--max-group-mb", "100"],
            "max_groups": ["--max-groups", "3"],
            "hot_commits": ["--skip-hot-commits", "2"],
            "hot_minutes": ["--skip-hot-minutes", "5"],
            "planner_service_address": ["--planner-service", "h:3"],
        },
    ),
}
WITHOUT_FLAG = {WriteOptions: {"shuffle_parallelism"}}
"""Fields no CLI flag sets (the Python API's only)."""


def parsed(command: Sequence[str]) -> argparse.Namespace:
    return build_parser().parse_args(list(command))


@pytest.mark.parametrize("options", list(FLAGS), ids=lambda options: options.__name__)
def test_the_options_have_the_defaults_of_their_cli_flags(options: Any) -> None:
    """``tidemark write``, ``cluster run`` and ``cluster schedule`` given no option build the
    options object's defaults, field for field."""
    command, _ = FLAGS[options]
    assert options.from_args(parsed(command)) == options()


@pytest.mark.parametrize("options", list(FLAGS), ids=lambda options: options.__name__)
def test_from_args_sets_every_field_from_its_flag(options: Any) -> None:
    command, flags = FLAGS[options]
    names = {field.name for field in dataclasses.fields(options)}
    assert set(flags) == names - WITHOUT_FLAG.get(options, set())
    default = options()
    for name, flag in flags.items():
        given = options.from_args(parsed([*command, *flag]))
        assert getattr(given, name) != getattr(default, name), flag
        assert dataclasses.replace(given, **{name: getattr(default, name)}) == default, flag


@pytest.mark.parametrize("options", [ReadOptions, LookupOptions])
def test_the_read_options_have_the_defaults_of_tidemark_read(options: Any) -> None:
    """``tidemark read``'s flags for the fields it has (``--where``'s empty list is no
    condition, as ``where=None``); ``filters`` and ``reader`` are the Python API's only."""
    args = parsed(READ)
    cli = {
        "as_of": args.as_of,
        "columns": args.columns,
        "where": args.where or None,
        "query_type": args.query_type,
    }
    default = options()
    names = {field.name for field in dataclasses.fields(options)} - {"filters", "reader"}
    assert {name: getattr(default, name) for name in names} == {name: cli[name] for name in names}


def test_the_read_options_refuse_a_bad_reader() -> None:
    for options in (ReadOptions, LookupOptions):
        with pytest.raises(InvalidArgumentError) as refused:
            options(reader="executor")
        assert refused.value.field == "reader"
    with pytest.raises(InvalidArgumentError) as refused:
        PlanOptions(layout="spiral")
    assert refused.value.field == "layout"
