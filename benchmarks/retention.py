"""``python -m benchmarks retention``: a table upserted many times, cleaned and archived
after every commit (Hudi's default) against the same run with cleaning off.

A table of ``--file-groups`` file groups in ``--partitions`` partitions takes ``--commits``
upserts, each rewriting ``--upsert-percent`` of the file groups (at least one) as a
copy-on-write upsert does: the partition is listed to find the latest slices, and a new
slice of each chosen group is committed. The commits are written with pyarrow
(``tidemark.testing.tables``), since what is measured is the table's growth and the
timeline's; the clean and archival after each commit are the same calls every write makes
(``tidemark.retention.run_retention``). Both runs use the same choice of groups and take
turns commit by commit, each going first every other time, so both see the same load.

Reported per run: bytes on storage over the snapshot's bytes, file slices per touched file
group (goal: at most retained commits + 1), active timeline files (goal: bounded), the
write latency (commit, with its clean and archival when on) of the last 100 commits over
the first 100 (goal: at most 1.2x), and the clean and archive time per commit. The
metadata folder ``.hoodie/`` of the run with retention on is measured after 100, 500 and
1,000 commits (and the last): its files and bytes, and those of the column statistics
and of the archive apart (goal: flat once the first archivals ran).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.load import bench_table_config
from benchmarks.report import run_in_temp_root, times
from tidemark.commands.args import positive_int
from tidemark.retention import RetentionSettings, run_retention
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.view import partition_listings
from tidemark.table.maintenance.clean_plan import DEFAULT_RETAIN_COMMITS, CleanSettings
from tidemark.table.timeline.layout1 import TIMELINE_DIR
from tidemark.table.timeline.versions import archived_log
from tidemark.testing.tables import commit_file_groups, data_columns, rewrite_file_groups

ROWS_PER_GROUP = 200
WINDOW = 100
"""Commits in the first and last windows whose write latencies are compared."""
CHECKPOINTS = (100, 500, 1000)
"""Commits after which ``.hoodie/`` is measured (and after the last)."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "retention",
        help="many upserts with clean + archive after each commit vs cleaning off",
        description=__doc__,
    )
    parser.add_argument("--commits", type=positive_int, default=1000, help="upserts to run")
    parser.add_argument("--file-groups", type=positive_int, default=200)
    parser.add_argument("--partitions", type=positive_int, default=10)
    parser.add_argument("--upsert-percent", type=float, default=1.0)
    parser.add_argument("--retain-commits", type=positive_int, default=DEFAULT_RETAIN_COMMITS)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    run_in_temp_root(args, "tidemark-bench-retention-", measure, format_report)
    return 0


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    settings = RetentionSettings(CleanSettings(retain_commits=args.retain_commits))
    report: dict[str, Any] = {
        "commits": args.commits,
        "file_groups": args.file_groups,
        "partitions": args.partitions,
        "upsert_percent": args.upsert_percent,
        "retain_commits": args.retain_commits,
        "keep_min": settings.archive.keep_min,
        "keep_max": settings.archive.keep_max,
    }
    runs = {"on": _Run(args, root / "on", settings), "off": _Run(args, root / "off", None)}
    report["metadata"] = []
    for number in range(args.commits):
        for name in ("on", "off") if number % 2 == 0 else ("off", "on"):
            runs[name].commit()
        if (number + 1) % WINDOW == 0:
            print(f"retention: {number + 1}/{args.commits} commits of each run", flush=True)
        if number + 1 in CHECKPOINTS or number + 1 == args.commits:
            report["metadata"].append({"commits": number + 1, **_metadata(runs["on"].uri)})
    for name, one in runs.items():
        report[name] = one.state()
    report["bytes_ratio_off_over_on"] = report["off"]["bytes_on_storage"] / max(
        report["on"]["bytes_on_storage"], 1
    )
    return report


class _Run:
    """One table and its upserts; the two runs take turns commit by commit (each going
    first every other time), so both see the same machine load."""

    def __init__(self, args: argparse.Namespace, uri: Path, retention: RetentionSettings | None):
        self.uri = str(uri)
        self.retention = retention
        table = HoodieTable.create(self.uri, bench_table_config())
        partitions = [f"p{n:02d}" for n in range(args.partitions)]
        commit_file_groups(
            table,
            [(partitions[n % len(partitions)], _rows(n, partitions[n % len(partitions)]))
             for n in range(args.file_groups)],
        )  # fmt: skip
        self.keys = sorted((f.partition_path, f.file_id) for f in table.view().latest_base_files())
        self.chooser = random.Random(args.seed)
        self.per_commit = max(1, round(args.file_groups * args.upsert_percent / 100))
        self.write_s: list[float] = []
        self.clean_s: list[float] = []
        self.archive_s: list[float] = []
        self.touched: set[tuple[str, str]] = set()

    def commit(self) -> None:
        """One upsert (with its clean and archival when retention is on), timed."""
        started = time.perf_counter()
        table = HoodieTable.open(self.uri)
        chosen = set(self.chooser.sample(self.keys, self.per_commit))
        latest = table.view().latest_base_files({partition for partition, _ in chosen})
        picked = [f for f in latest if (f.partition_path, f.file_id) in chosen]
        rewrite_file_groups(table, [(f, _current(table, f.path)) for f in picked])
        self.touched.update((f.partition_path, f.file_id) for f in picked)
        if self.retention is not None:
            result = run_retention(table, self.retention)
            self.clean_s.append(result.clean_s)
            self.archive_s.append(result.archive_s)
        self.write_s.append(time.perf_counter() - started)

    def state(self) -> dict[str, Any]:
        return _state(self.uri, self.write_s, self.clean_s, self.archive_s, self.touched)


def _state(
    uri: str,
    write_s: list[float],
    clean_s: list[float],
    archive_s: list[float],
    touched: set[tuple[str, str]],
) -> dict[str, Any]:
    table = HoodieTable.open(uri)
    listings = partition_listings(table.storage)
    data_bytes = sum(
        info.size for listing in listings.values() for info in listing.files
        if info.path.endswith(".parquet")
    )  # fmt: skip
    snapshot_bytes = sum(f.size for f in table.view().latest_base_files())
    slices = Counter((f.partition_path, f.file_id) for f in table.view().committed_base_files())
    first = statistics.median(write_s[:WINDOW])
    last = statistics.median(write_s[-WINDOW:])
    return {
        "bytes_on_storage": data_bytes,
        "snapshot_bytes": snapshot_bytes,
        "storage_over_snapshot": data_bytes / snapshot_bytes,
        "max_slices_per_touched_group": max(slices[key] for key in touched),
        "active_timeline_files": len(table.storage.list_dir(TIMELINE_DIR).files),
        "archive_files": len(archived_log(table.archive).files()),
        "first_write_ms": first * 1000,
        "last_write_ms": last * 1000,
        "last_over_first": last / first,
        "clean_ms_per_commit": statistics.mean(clean_s) * 1000 if clean_s else 0.0,
        "archive_ms_per_commit": statistics.mean(archive_s) * 1000 if archive_s else 0.0,
    }


def _metadata(uri: str) -> dict[str, int]:
    """Files and bytes under ``.hoodie/``, and of the column statistics and the archive."""
    table = HoodieTable.open(uri)
    files = list(table.storage.list(".hoodie/"))
    parts = {
        "hoodie": ".hoodie/",
        "column_stats": f"{column_stats.STATS_DIR}/",
        "archive": f"{table.archive.folder}/",
    }
    counts: dict[str, int] = {}
    for name, prefix in parts.items():
        inside = [info for info in files if info.path.startswith(prefix)]
        counts[f"{name}_files"] = len(inside)
        counts[f"{name}_bytes"] = sum(info.size for info in inside)
    return counts


def _rows(group: int, partition: str) -> pa.Table:
    uids = [f"uid-{group}-{row}" for row in range(ROWS_PER_GROUP)]
    return pa.table({"uid": uids, "dt": [partition] * ROWS_PER_GROUP})


def _current(table: HoodieTable, path: str) -> pa.Table:
    """The file's rows, written again by the upsert (with new commit times)."""
    with table.storage.open_input(path) as stream:
        return data_columns(pq.read_table(stream))


def format_report(report: dict[str, Any]) -> str:
    on, off = report["on"], report["off"]
    rows = [
        ("bytes on storage / snapshot", "storage_over_snapshot", "{:.2f}x"),
        ("max slices per touched file group", "max_slices_per_touched_group", "{}"),
        ("active timeline files", "active_timeline_files", "{}"),
        ("archive log files", "archive_files", "{}"),
        ("write latency, first 100 (ms, median)", "first_write_ms", "{:.1f}"),
        ("write latency, last 100 (ms, median)", "last_write_ms", "{:.1f}"),
        ("last / first", "last_over_first", "{:.2f}x"),
        ("clean per commit (ms, mean)", "clean_ms_per_commit", "{:.1f}"),
        ("archive per commit (ms, mean)", "archive_ms_per_commit", "{:.1f}"),
    ]
    lines = [
        f"retention: {report['commits']} commits upserting {report['upsert_percent']:g}% of "
        f"{report['file_groups']} file groups in {report['partitions']} partitions; retained "
        f"commits {report['retain_commits']}, keep {report['keep_min']}-{report['keep_max']}",
        f"{'':40} {'clean+archive on':>18} {'cleaning off':>14}",
    ]
    for label, key, shape in rows:
        lines.append(f"{label:40} {shape.format(on[key]):>18} {shape.format(off[key]):>14}")
    lines.append(
        f"storage: cleaning off holds {times(off['bytes_on_storage'], on['bytes_on_storage'])} "
        "the bytes of cleaning on"
    )
    lines.append(
        f"{'.hoodie/ of clean+archive on, after':>26} {'all files':>10} {'KiB':>8} "
        f"{'col-stats':>10} {'KiB':>7} {'archive':>8} {'KiB':>7}"
    )
    for point in report["metadata"]:
        lines.append(
            f"{point['commits']:>20,} commits {point['hoodie_files']:>10} "
            f"{point['hoodie_bytes'] / 1024:>8.0f} {point['column_stats_files']:>10} "
            f"{point['column_stats_bytes'] / 1024:>7.0f} {point['archive_files']:>8} "
            f"{point['archive_bytes'] / 1024:>7.0f}"
        )
    return "\n".join(lines)
