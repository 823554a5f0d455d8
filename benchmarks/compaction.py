"""``python -m benchmarks compaction``: what compacting a merge-on-read table costs and
what it gives back (issue 50).

A table of ``--rows`` rows of each type, built as ``benchmarks stream --table-type`` builds
them (ten partitions by key modulo ten, the record index), takes ``--batches`` batches of
``--batch-rows`` upserts of keys spread over the whole table (every batch lands in every
file group), each batch written to both tables through a stream writer each, taking turns.
Then every file group of the merge-on-read table is compacted (one plan, scheduled and
run) and, as the baseline in the same run, the same number of generated rows is written
by a bulk_insert into a new table; a full snapshot scan of every column of each table
follows (Spark's ``noop`` sink, medians of ``--read-repeats`` taking turns).

``--long``: the merge-on-read table alone takes 200 batches (``--batches``) through a
stream writer compacting inline every ``--compact-every`` deltacommits
(``compact_after``), each compaction bounded by ``--compaction-target-io-mb`` (Hudi's
default takes every file group), with the inline clean keeping ``--retain-commits``
commits (Hudi's default, 10); reported: the table's storage after each batch (every data
file, base and log, that cleaning kept; the largest, the median and the last) against the
snapshot's size as Parquet (the bulk_insert's base files), the write p50 of the first
tenth of the batches against the last tenth, and the inline compactions' median.

Reported with the ratios and issue 50's targets, and the load average before and after
(the machine may be shared).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import tidemark.spark
from benchmarks.report import run_in_temp_root
from benchmarks.stream import (
    COW,
    MOR,
    PROGRESS_EVERY,
    batch,
    read_seconds,
    table_rows,
    targets_met,
)
from benchmarks.write import DEFAULT_TARGET_FILE_BYTES, bulk_insert_generated
from tidemark.commands.args import positive_int
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.table import HoodieTable
from tidemark.table.maintenance.clean_plan import DEFAULT_RETAIN_COMMITS
from tidemark.table.plans.compaction import DEFAULT_TARGET_IO_MB

SPREAD = "spread"
DEFAULT_BATCHES = 20
LONG_BATCHES = 200
DEFAULT_COMPACT_EVERY = 10
BASELINE = "bulk_insert"
TARGETS: dict[str, tuple[str, float]] = {
    "compaction_over_bulk_insert": ("<=", 1.3),
    "mor_over_cow_scan": ("<=", 1.1),
    "storage_over_snapshot": ("<=", 1.5),
}
"""Issue 50's targets: a figure of the report, how it must compare ("write p50 stays flat"
is reported as ``p50_last_over_first_tenth`` without a bound)."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "compaction",
        help="merge-on-read compaction: against a bulk_insert, scans after, a long run",
        description=__doc__,
    )
    parser.add_argument("--rows", type=positive_int, default=5_000_000, help="table rows")
    parser.add_argument(
        "--batches",
        type=positive_int,
        help=f"batches of upserts ({DEFAULT_BATCHES}; {LONG_BATCHES} with --long)",
    )
    parser.add_argument("--batch-rows", type=positive_int, default=5_000, help="upserts a batch")
    parser.add_argument(
        "--long",
        action="store_true",
        help="the merge-on-read table alone, compacting inline every --compact-every batches",
    )
    parser.add_argument(
        "--compact-every",
        type=positive_int,
        default=DEFAULT_COMPACT_EVERY,
        help="with --long: deltacommits between inline compactions",
    )
    parser.add_argument(
        "--retain-commits",
        type=positive_int,
        default=DEFAULT_RETAIN_COMMITS,
        help="with --long: commits the inline clean keeps readable (Hudi's default)",
    )
    parser.add_argument(
        "--compaction-target-io-mb",
        type=float,
        default=DEFAULT_TARGET_IO_MB,
        help="with --long: the IO one inline compaction may reach, largest logs first "
        "(Hudi's hoodie.compaction.target.io; the default takes the whole table)",
    )
    parser.add_argument(
        "--target-file-kb",
        type=positive_int,
        default=DEFAULT_TARGET_FILE_BYTES // 1024,
        help="the tables' file size (the default makes 40 file groups of 5,000,000 rows)",
    )
    parser.add_argument(
        "--read-repeats", type=positive_int, default=3, help="scans a table, the median reported"
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


def data_bytes(uri: str) -> int:
    """The bytes of every file of the table outside ``.hoodie`` (base and log files)."""
    storage = HoodieTable.open(uri).storage
    return sum(info.size for info in storage.list("") if not info.path.startswith(".hoodie"))


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The batches, then the compaction against its baseline, then the scans."""
    batches = args.batches or (LONG_BATCHES if args.long else DEFAULT_BATCHES)
    spark = build_session(args.master, app_name="tidemark-bench-compaction")
    kinds = (MOR,) if args.long else (MOR, COW)
    tables = {kind: str(root / kind.lower()) for kind in kinds}
    target_file_bytes = args.target_file_kb * 1024
    load_before = os.getloadavg()
    for kind, uri in tables.items():
        rows = table_rows(spark, args.rows, SPREAD)
        bulk_insert_generated(
            spark, rows, uri, target_file_bytes=target_file_bytes, table_type=kind
        )
        tidemark.spark.index_build(spark, uri)
    file_groups = len(HoodieTable.open(tables[MOR]).view().latest_base_files())
    sized = dataclasses.replace(tidemark.spark.STREAM_OPTIONS, target_file_bytes=target_file_bytes)
    options = dict.fromkeys(kinds, sized)
    if args.long:
        options[MOR] = dataclasses.replace(
            sized,
            compact_after=args.compact_every,
            retain_commits=args.retain_commits,
            compaction_target_io_mb=args.compaction_target_io_mb,
        )
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    inline: list[Any] = []
    storage: list[int] = []
    with ExitStack() as stack:
        writers = {
            kind: stack.enter_context(
                tidemark.spark.stream_writer(uri, query_id=f"bench-{kind}", options=options[kind])
            )
            for kind, uri in tables.items()
        }
        for number in range(batches):
            rows = batch(spark, args.rows, args.batch_rows, number, SPREAD).cache()
            turn = number % len(kinds)
            for kind in kinds[turn:] + kinds[:turn]:
                began = time.perf_counter()
                writers[kind](rows, number)
                seconds[kind].append(time.perf_counter() - began)
            rows.unpersist()
            if args.long:  # a writer keeps its last results only
                inline += writers[MOR].results[-1].compactions
                storage.append(data_bytes(tables[MOR]))
            if (number + 1) % PROGRESS_EVERY == 0:
                print(f"batch {number + 1}/{batches}", file=sys.stderr, flush=True)
    report: dict[str, Any] = {
        "rows": args.rows,
        "batches": batches,
        "batch_rows": args.batch_rows,
        "keys": SPREAD,
        "long": args.long,
        "file_groups": file_groups,
        "master": spark.sparkContext.master,
        "cores": os.cpu_count(),
        "storage": "local file system (no moto)",
        "load_average_before": [round(x, 2) for x in load_before],
    }
    for kind in kinds:
        report[f"{kind}_p50_s"] = round(statistics.median(seconds[kind]), 3)
    if args.long:
        report |= _long_figures(args.compact_every, seconds[MOR], inline, storage)
        report["retain_commits"] = args.retain_commits
        report["compaction_target_io_mb"] = args.compaction_target_io_mb
    else:
        report |= _compact_every_group(spark, tables[MOR])
    baseline_s, baseline_bytes = _bulk_insert(spark, args.rows, root / BASELINE, target_file_bytes)
    report[f"{BASELINE}_s"] = round(baseline_s, 3)
    report["snapshot_parquet_bytes"] = baseline_bytes
    if "compaction_s" in report:
        report["compaction_over_bulk_insert"] = round(
            report["compaction_s"] / report[f"{BASELINE}_s"], 2
        )
    if "storage_max_bytes" in report:
        report["storage_over_snapshot"] = round(report["storage_max_bytes"] / baseline_bytes, 2)
        report["storage_median_over_snapshot"] = round(
            report["storage_median_bytes"] / baseline_bytes, 2
        )
    reads = read_seconds(spark, tables, args.rows, args.read_repeats)
    for kind in kinds:
        report[f"{kind}_scan_s"] = reads[kind]["scan_s"]
    if not args.long:
        report["mor_over_cow_scan"] = round(report[f"{MOR}_scan_s"] / report[f"{COW}_scan_s"], 2)
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    report["targets"] = targets_met(report, TARGETS)
    return report


def _compact_every_group(spark: Any, uri: str) -> dict[str, Any]:
    """One plan of every file group with log files, scheduled and run."""
    with_logs = sum(1 for s in HoodieTable.open(uri).view().latest_file_slices() if s.logs)
    began = time.perf_counter()
    instant = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=1)
    results = tidemark.spark.compaction_run(spark, uri, instant) if instant else []
    elapsed = time.perf_counter() - began
    return {
        "compaction_s": round(elapsed, 3),
        "file_groups_with_logs": with_logs,
        "compacted_file_groups": sum(r.file_groups for r in results),
        "compacted_rows": sum(r.rows for r in results),
    }


def _long_figures(
    every: int, seconds: list[float], inline: list[Any], storage: list[int]
) -> dict[str, Any]:
    """Storage after each batch (the largest, the median, the last), write p50 of the first
    and last tenth, inline runs."""
    tenth = max(1, len(seconds) // 10)
    first, last = statistics.median(seconds[:tenth]), statistics.median(seconds[-tenth:])
    return {
        "compact_every": every,
        "compactions_inline": len(inline),
        "compaction_median_s": round(statistics.median(c.seconds for c in inline), 3)
        if inline
        else None,
        "compacted_file_groups_median": statistics.median(c.file_groups for c in inline)
        if inline
        else None,
        "storage_max_bytes": max(storage),
        "storage_median_bytes": int(statistics.median(storage)),
        "storage_bytes": storage[-1],
        "p50_first_tenth_s": round(first, 3),
        "p50_last_tenth_s": round(last, 3),
        "p50_last_over_first_tenth": round(last / first, 2),
    }


def _bulk_insert(spark: Any, rows: int, path: Path, target_file_bytes: int) -> tuple[float, int]:
    """The baseline: the table's rows bulk-inserted into a new table; seconds and bytes."""
    source = table_rows(spark, rows, SPREAD)
    began = time.perf_counter()
    bulk_insert_generated(spark, source, str(path), target_file_bytes=target_file_bytes)
    return time.perf_counter() - began, data_bytes(str(path))


def format_report(report: dict[str, Any]) -> str:
    """Side by side: Tidemark's figure, the baseline's, the ratio; then the targets."""
    mode = f"--long, compacting every {report['compact_every']}" if report["long"] else "default"
    lines = [
        f"compaction bench ({mode}): {report['batches']} batches of {report['batch_rows']:,} "
        f"upserts of spread keys over a {report['rows']:,}-row merge-on-read table "
        f"({report['file_groups']} file groups); master {report['master']}, "
        f"{report['cores']} cores, {report['storage']}; load average "
        f"{report['load_average_before']} before, {report['load_average_after']} after",
        f"{'':34} {'Tidemark':>22} {'baseline':>26} {'ratio':>7}",
    ]
    rows: list[tuple[str, str, str, float]] = []
    if report["long"]:
        rows += [
            (
                "storage after a batch, largest (bytes)",
                f"{report['storage_max_bytes']:,}",
                f"snapshot as Parquet {report['snapshot_parquet_bytes']:,}",
                report["storage_over_snapshot"],
            ),
            (
                "storage after a batch, median (bytes)",
                f"{report['storage_median_bytes']:,}",
                f"snapshot as Parquet {report['snapshot_parquet_bytes']:,}",
                report["storage_median_over_snapshot"],
            ),
            (
                "write p50, last vs first tenth",
                f"{report['p50_last_tenth_s']:.3f} s",
                f"{report['p50_first_tenth_s']:.3f} s",
                report["p50_last_over_first_tenth"],
            ),
        ]
    else:
        rows += [
            (
                f"compact {report['compacted_file_groups']} file groups",
                f"{report['compaction_s']:.3f} s",
                f"{BASELINE} {report[f'{BASELINE}_s']:.3f} s",
                report["compaction_over_bulk_insert"],
            ),
            (
                "full scan after compaction",
                f"{report[f'{MOR}_scan_s']:.3f} s",
                f"copy-on-write {report[f'{COW}_scan_s']:.3f} s",
                report["mor_over_cow_scan"],
            ),
            (
                "batch p50",
                f"{report[f'{MOR}_p50_s']:.3f} s",
                f"copy-on-write {report[f'{COW}_p50_s']:.3f} s",
                round(report[f"{MOR}_p50_s"] / report[f"{COW}_p50_s"], 2),
            ),
        ]
    lines += [
        f"{name:34} {ours:>22} {theirs:>26} {ratio:>6.2f}x" for name, ours, theirs, ratio in rows
    ]
    if report["long"]:
        lines.append(
            f"inline compactions: {report['compactions_inline']} "
            f"(median {report['compaction_median_s']} s, "
            f"{report['compacted_file_groups_median']} file groups, at most "
            f"{report['compaction_target_io_mb']:g} MB of IO each); inline clean keeping "
            f"{report['retain_commits']} commits; storage after the last batch "
            f"{report['storage_bytes']:,} bytes"
        )
    lines += [
        f"{name} = {report[name]} (target {goal['target']}: {'met' if goal['met'] else 'NOT met'})"
        for name, goal in report["targets"].items()
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    run_in_temp_root(args, "tidemark-bench-compaction-", measure, format_report)
    return 0
