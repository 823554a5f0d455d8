"""``python -m benchmarks clustering``: the clustering blog's session query, before and after.

A table shaped like the blog's: events of many sessions, written in arrival order into
many small files, so every file holds a slice of time and a spread of session ids. The
query ``session_id = X`` prunes files by their min/max and row groups by their
statistics (footer statistics, as Spark reads Parquet without Hudi's metadata table),
then reads what is left: files read, rows read and time, before and after clustering by
``session_id``. Then the same rows clustered on two columns (``session_id``,
``item_id``; item ids skewed) with the linear, z-order and Hilbert layouts (curves from
rank ranges, ``sample``, and from the raw values, ``direct``: Hudi's default), and with
delta-rs's ``z_order`` (the ``deltalake`` package) at about the same file size: the
fraction of files a single-column equality predicate skips, on each column, and the
rewrite time (median of ``--repeats`` rounds, delta-rs and Tidemark taking turns
first). The same again on a second table whose two columns have comparable
ranges (uniform 63-bit values, where raw-bit interleaving is at its best). delta-rs's
file bounds come from its log and are checked against its files' own Parquet
statistics. Last, the planner's strategy over 100k synthetic file slices.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from rich.console import Console
from rich.table import Table

from tidemark.clustering.curves import DEFAULT_CURVE_METHOD
from tidemark.clustering.strategy import FileSlices, PlanOptions, plan_clustering, time_plan
from tidemark.commands.args import positive_int
from tidemark.config import MIB
from tidemark.jobs.cluster import CURVE_METHOD_PARAM, run_clustering
from tidemark.jobs.cluster_options import MIN_SLICE_INPUT_BYTES, ClusterOptions
from tidemark.jobs.session import build_session
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.logs import configure_logging
from tidemark.storage import Storage, open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.scan import ScanResult, scan_equal
from tidemark.table.leases.table_lock import changing
from tidemark.table.plans.clustering import save_plan
from tidemark.table.timeline.instant import State

EVENTS_PER_SESSION = 40
ITEMS = 100_000
QUERIES = 20
SKIP_PROBES = 100
SORT_COLUMNS = ("session_id", "item_id")
POINT_COLUMNS = ("x", "y")
TWO_COLUMN_LAYOUTS: tuple[tuple[str, str, str], ...] = (
    ("linear", "linear", "sample"),
    ("zorder", "zorder", "sample"),
    ("hilbert", "hilbert", "sample"),
    ("zorder-direct", "zorder", "direct"),
    ("hilbert-direct", "hilbert", "direct"),
)
"""(name, layout, curve method): ``sample`` is Tidemark's default, ``direct`` Hudi's."""
PLAN_SLICES = 100_000
OUTPUT_FILE_RATIO = 8
"""Clustering stitches this many input files into one (the blog: 13,642 -> 294 files)."""
ROW_GROUPS_PER_FILE = 8
"""Row groups per clustered file (the blog's 600 MB files with Hudi's 120 MB blocks: 5)."""
SEED = 20210127
SMALL_INSERT_ROWS = 1000
"""The ingestion batch timed with and without a concurrent cluster run."""
DEFAULT_REPEATS = 3


REFERENCES = (
    {
        "what": "rows read by the session query after clustering",
        "figure": "0.55% of the rows (20M -> ~110K); 130.7 s -> 56.0 s (2.3x)",
        "source": "Apache Hudi blog, 'Optimize Data lake layout using Clustering in Apache "
        "Hudi' (2021-01-27)",
    },
    {
        "what": "fraction of files skipped by col = v with z-order / Hilbert layouts",
        "figure": "0.55-0.60 (a linear sort: ~0 on either column)",
        "source": "Apache Hudi blog, 'Hudi Z-Order and Hilbert Space Filling Curves' "
        "(Hudi 0.10, Amazon Reviews, 543 files)",
    },
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "clustering",
        help="session query before/after clustering; layouts vs delta-rs z_order",
        description=__doc__,
    )
    parser.add_argument("--rows", type=positive_int, default=2_000_000, help="events")
    parser.add_argument("--files", type=positive_int, default=400, help="small files before")
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=DEFAULT_REPEATS,
        help="rounds of every rewrite, ours and delta-rs's (their medians are compared)",
    )
    parser.add_argument("--master", default="local[*]", help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=_handle)


def points(rows: int, seed: int = SEED) -> pa.Table:
    """Rows with two columns of comparable range: uniform signed 63-bit values."""
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "x": pa.array(rng.integers(-(2**62), 2**62, rows)),
            "y": pa.array(rng.integers(-(2**62), 2**62, rows)),
        }
    )


def events(rows: int, seed: int = SEED) -> pa.Table:
    """Events in arrival order: sessions start at random times and send their events
    over a window; session ids are random 62-bit numbers (hashed ids), item ids skewed
    towards popular items."""
    rng = np.random.default_rng(seed)
    sessions = max(1, rows // EVENTS_PER_SESSION)
    session_ids = rng.choice(2**62, size=sessions, replace=False)
    owner = rng.integers(0, sessions, rows)
    starts = rng.uniform(0, rows, sessions)
    times = starts[owner] + rng.uniform(0, rows / 50, rows)
    order = np.argsort(times, kind="stable")
    owner, times = owner[order], times[order]
    items = (ITEMS * rng.random(rows) ** 3).astype(np.int64)
    kinds = np.array(["view", "click", "cart", "buy", "search", "scroll", "share", "exit"])
    return pa.table(
        {
            "event_id": pa.array(np.arange(rows, dtype=np.int64)),
            "session_id": pa.array(session_ids[owner].astype(np.int64)),
            "item_id": pa.array(items),
            "ts": pa.array((times * 1_000_000).astype(np.int64) + 1_700_000_000_000_000).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "event_type": pa.array(kinds[rng.integers(0, len(kinds), rows)]),
            "amount": pa.array(np.round(rng.exponential(20.0, rows), 2)),
        }
    )


def file_bounds(storage: Storage, paths: Sequence[str], column: str) -> np.ndarray:
    """Per file, the column's (min, max) from its footer (the min/max a column-stats
    index would hold)."""
    bounds = np.empty((len(paths), 2), dtype=np.int64)
    for row, path in enumerate(paths):
        with storage.open_input(path) as stream:
            metadata = pq.ParquetFile(stream).metadata
        index = metadata.schema.names.index(column)
        stats = [
            metadata.row_group(g).column(index).statistics for g in range(metadata.num_row_groups)
        ]
        bounds[row] = (min(s.min for s in stats), max(s.max for s in stats))
    return bounds


def skipped_fraction(bounds: np.ndarray, probes: np.ndarray) -> float:
    """Mean fraction of files whose [min, max] excludes the probe value."""
    if len(bounds) == 0:
        return 0.0
    inside = (bounds[:, 0][None, :] <= probes[:, None]) & (probes[:, None] <= bounds[:, 1][None, :])
    return float(1.0 - inside.mean())


def probes(rows: pa.Table, column: str, count: int = SKIP_PROBES, seed: int = SEED) -> np.ndarray:
    """Values to look for: drawn uniformly from the column's distinct values."""
    distinct = np.unique(rows.column(column).to_numpy())
    return np.random.default_rng(seed).choice(
        distinct, size=min(count, len(distinct)), replace=False
    )


def run_benchmark(
    rows: int, files: int, workdir: Path, master: str, repeats: int = DEFAULT_REPEATS
) -> dict[str, Any]:
    """Everything side by side on the same rows; returns the measured numbers."""
    spark = build_session(master, app_name="tidemark-bench-clustering")
    data = events(rows)
    before_uri = _bulk_insert(spark, data, workdir / "events", files, "event_id")
    before_files = _latest_paths(before_uri)
    total_bytes = sum(size for _, size in before_files.values())
    target = max(1, total_bytes * OUTPUT_FILE_RATIO // max(1, len(before_files)))
    row_group = max(1, target // ROW_GROUPS_PER_FILE)
    sessions = probes(data, "session_id", QUERIES)
    before_scan = _scan_all(before_uri, "session_id", sessions)

    session_uri = _copy(before_uri, workdir / "by-session")
    schedule_whole_table(session_uri, ("session_id",), "linear", target)
    rewrite_s = _cluster(spark, session_uri, row_group)
    after_scan = _scan_all(session_uri, "session_id", sessions)
    layouts = compare_layouts(
        spark, data, before_uri, SORT_COLUMNS, target, workdir / "events-", repeats
    )
    uniform = points(rows)
    uniform_uri = _bulk_insert(spark, uniform, workdir / "points", files, "id")
    uniform_layouts = compare_layouts(
        spark, uniform, uniform_uri, POINT_COLUMNS, target, workdir / "points-", repeats
    )
    ingestion = ingestion_beside_clustering(spark, before_uri, workdir, target, row_group)
    before_mean = _mean(before_scan)
    after_mean = _mean(after_scan)
    return {
        "rows": rows,
        "files_before": len(before_files),
        "files_after": len(_latest_paths(session_uri)),
        "bytes_before": total_bytes,
        "target_file_bytes": target,
        "queries": len(sessions),
        "files_read_before": before_mean["files_read"],
        "files_read_after": after_mean["files_read"],
        "rows_read_before": before_mean["rows_read"],
        "rows_read_after": after_mean["rows_read"],
        "rows_read_after_fraction": after_mean["rows_read"] / rows,
        "query_s_before": before_mean["seconds"],
        "query_s_after": after_mean["seconds"],
        "query_speedup": before_mean["seconds"] / max(after_mean["seconds"], 1e-9),
        "cluster_by_session_s": rewrite_s,
        "layouts": layouts,
        "zorder_skipped": layouts["zorder"]["skipped"],
        "hilbert_skipped": layouts["hilbert"]["skipped"],
        "linear_skipped": layouts["linear"]["skipped"],
        "deltars_skipped": layouts["delta-rs"]["skipped"],
        "uniform_layouts": uniform_layouts,
        "plan_100k_s": time_plan(PLAN_SLICES, PlanOptions(max_groups=PLAN_SLICES)),
        "repeats": repeats,
        "master": master,
        "references": list(REFERENCES),
        "ingestion_under_clustering": ingestion,
    }


def ingestion_beside_clustering(
    spark: SparkSession, before_uri: str, workdir: Path, target: int, row_group_bytes: int
) -> dict[str, float | bool]:
    """Seconds of a small insert (``SMALL_INSERT_ROWS`` new events) into a copy of the
    table alone (after an untimed warm-up insert), then into another copy while a
    ``cluster run`` of the whole table
    rewrites it (started once the plan is inflight, i.e. the run released the table lock
    after its start), and the run's seconds: writers wait for a run only during its
    short start and commit."""
    rows = events(SMALL_INSERT_ROWS, seed=SEED + 1)

    def new_events(first_id: int) -> DataFrame:
        ids = pa.array(np.arange(len(rows)) + first_id)
        return spark.createDataFrame(rows.set_column(0, "event_id", ids).to_pandas())

    frame = new_events(10**12)
    alone_uri = _copy(before_uri, workdir / "ingest-alone")
    write(spark, new_events(2 * 10**12), alone_uri, "insert")  # warm-up, not timed
    started = time.perf_counter()
    write(spark, frame, alone_uri, "insert")
    alone_s = time.perf_counter() - started
    busy_uri = _copy(before_uri, workdir / "ingest-beside-run")
    instant = schedule_whole_table(busy_uri, ("session_id",), "linear", target)
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(_cluster, spark, busy_uri, row_group_bytes)
        table = HoodieTable.open(busy_uri)
        while not run.done() and table.timeline.find(instant).state is State.REQUESTED:
            time.sleep(0.01)
            table.timeline.reload()
        started = time.perf_counter()
        write(spark, frame, busy_uri, "insert")
        beside_s = time.perf_counter() - started
        during = not run.done()
        run_s = run.result()
    return {
        "insert_rows": SMALL_INSERT_ROWS,
        "insert_alone_s": alone_s,
        "insert_beside_cluster_run_s": beside_s,
        "insert_done_before_run_ended": during,
        "cluster_run_s": run_s,
    }


def compare_layouts(
    spark: SparkSession,
    data: pa.Table,
    before_uri: str,
    columns: Sequence[str],
    target: int,
    prefix: Path,
    repeats: int = DEFAULT_REPEATS,
) -> dict[str, dict[str, Any]]:
    """Copies of the table at ``before_uri`` (holding ``data``) clustered on ``columns``
    with each layout, and delta-rs's ``z_order`` of the same rows: per layout the files,
    the fraction of files ``col = v`` skips per column and on average (first round), and
    the rewrite seconds of each of ``repeats`` rounds and their median, with delta-rs's
    median over each layout's (above 1: faster). delta-rs goes last in even rounds and
    first in odd ones."""
    checks = {column: probes(data, column) for column in columns}
    row_group = max(1, target // ROW_GROUPS_PER_FILE)
    layouts: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[float]] = {}

    def ours(round_: int) -> None:
        for name, layout, method in TWO_COLUMN_LAYOUTS:
            uri = _copy(before_uri, Path(f"{prefix}{name}-{round_}"))
            schedule_whole_table(uri, columns, layout, target, curve_method=method)
            runs.setdefault(name, []).append(_cluster(spark, uri, row_group))
            if name not in layouts:
                paths = list(_latest_paths(uri))
                layouts[name] = _skipping(uri, paths, checks) | {"files": len(paths)}
            shutil.rmtree(uri)

    def theirs(round_: int) -> None:
        path = Path(f"{prefix}delta-{round_}")
        measured = _deltars_zorder(data, path, columns, target, checks)
        runs.setdefault("delta-rs", []).append(measured.pop("rewrite_s"))
        layouts.setdefault("delta-rs", measured)
        shutil.rmtree(path)

    for round_ in range(repeats):
        for side in (ours, theirs) if round_ % 2 == 0 else (theirs, ours):
            side(round_)
    for name, seconds in runs.items():
        layouts[name] |= {"rewrite_s": statistics.median(seconds), "rewrite_runs_s": seconds}
    deltars_s = layouts["delta-rs"]["rewrite_s"]
    for name, measured in layouts.items():
        if name != "delta-rs":
            measured["speed_vs_deltars"] = deltars_s / measured["rewrite_s"]
    return {name: layouts[name] for name in [*runs]}


def _bulk_insert(spark: SparkSession, data: pa.Table, path: Path, files: int, key: str) -> str:
    """``data`` bulk-inserted in ``key`` order into about ``files`` files."""
    frame = spark.createDataFrame(data.to_pandas()).repartitionByRange(files, key)
    write(spark, frame, str(path), "bulk_insert", WriteOptions(record_key_fields=[key]))
    return str(path)


def schedule_whole_table(
    uri: str,
    sort_columns: Sequence[str],
    layout: str,
    target_file_bytes: int,
    *,
    curve_method: str = DEFAULT_CURVE_METHOD,
) -> str:
    """Plan every file group with the planner's strategy (one group per partition: the
    group limit is the table's size), saved under the table lock; a curve method other
    than the default goes into the strategy's parameters, as Hudi writes it."""
    table = HoodieTable.open(uri)
    files = table.view().latest_base_files()
    everything = sum(f.size for f in files) + 1
    options = PlanOptions(
        sort_columns=tuple(sort_columns),
        layout=layout,
        target_file_bytes=target_file_bytes,
        small_file_limit_bytes=everything,
        max_bytes_per_group=everything,
    )
    outcome = plan_clustering(FileSlices.from_base_files(files), options)
    assert outcome.plan is not None, outcome.reason
    plan = outcome.plan
    if curve_method != DEFAULT_CURVE_METHOD:
        params = {**plan.strategy.extra_params, CURVE_METHOD_PARAM: curve_method}
        plan = replace(plan, strategy=replace(plan.strategy, extra_params=params))
    with changing(table, "bench-clustering"):
        return save_plan(table, plan).timestamp


def _latest_paths(uri: str) -> dict[str, tuple[str, int]]:
    return {f.path: (f.file_id, f.size) for f in HoodieTable.open(uri).view().latest_base_files()}


def _copy(uri: str, target: Path) -> str:
    shutil.copytree(uri, target)
    return str(target)


def _scan_all(uri: str, column: str, values: np.ndarray) -> list[ScanResult]:
    storage = open_storage(uri)
    paths = list(_latest_paths(uri))
    return [scan_equal(storage, paths, column, int(value)) for value in values]


def _mean(scans: Sequence[ScanResult]) -> dict[str, float]:
    return {
        "files_read": statistics.mean(s.files_read for s in scans),
        "rows_read": statistics.mean(s.rows_read for s in scans),
        "seconds": statistics.mean(s.seconds for s in scans),
    }


def _skipping(uri: str, paths: Sequence[str], checks: dict[str, np.ndarray]) -> dict[str, float]:
    storage = open_storage(uri)
    fractions = {
        f"skipped_{column}": skipped_fraction(file_bounds(storage, paths, column), values)
        for column, values in checks.items()
    }
    return fractions | {"skipped": statistics.mean(fractions.values())}


def _deltars_zorder(
    data: pa.Table,
    path: Path,
    columns: Sequence[str],
    target_file_bytes: int,
    checks: dict[str, np.ndarray],
) -> dict[str, float]:
    """delta-rs: the same rows written once, then ``optimize.z_order`` on the same
    columns at the same target file size; bounds from the Delta log's file statistics,
    checked against each file's own Parquet statistics. ``deltalake`` is a dev
    dependency, imported only when the benchmark runs."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(str(path), data)
    table = DeltaTable(str(path))
    started = time.perf_counter()
    table.optimize.z_order(list(columns), target_size=target_file_bytes)
    seconds = time.perf_counter() - started
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    storage = open_storage(str(path))
    files = actions.column("path").to_pylist()
    fractions = {}
    for column, values in checks.items():
        bounds = np.stack(
            [
                actions.column(f"min.{column}").to_numpy(),
                actions.column(f"max.{column}").to_numpy(),
            ],
            axis=1,
        ).astype(np.int64)
        own = file_bounds(storage, files, column)
        if not np.array_equal(bounds, own):
            wrong = int(np.count_nonzero((bounds != own).any(axis=1)))
            raise RuntimeError(
                f"delta-rs's log disagrees with {wrong} of its {len(files)} files' own "
                f"Parquet statistics on {column}"
            )
        fractions[f"skipped_{column}"] = skipped_fraction(bounds, values)
    return fractions | {
        "skipped": statistics.mean(fractions.values()),
        "rewrite_s": seconds,
        "files": actions.num_rows,
        "stats_checked_files": len(files),
    }


def print_table(result: dict[str, Any]) -> None:
    console = Console()
    query = Table(
        title=f"session_id = X, {result['rows']:,} rows (mean of {result['queries']} queries)"
    )
    for column in ("table", "files", "files read", "rows read", "of all rows", "query s"):
        query.add_column(column, justify="right")
    for label, suffix, files in (
        ("before (arrival order)", "before", result["files_before"]),
        ("clustered by session", "after", result["files_after"]),
    ):
        query.add_row(
            label,
            f"{files:,}",
            f"{result['files_read_' + suffix]:,.1f}",
            f"{result['rows_read_' + suffix]:,.0f}",
            f"{result['rows_read_' + suffix] / result['rows']:.2%}",
            f"{result['query_s_' + suffix]:.4f}",
        )
    console.print(query)
    console.print(
        f"query speedup {result['query_speedup']:.1f}x; clustering by session took "
        f"{result['cluster_by_session_s']:.1f} s"
    )
    console.print(_layout_table("events", SORT_COLUMNS, result["layouts"]))
    console.print(_layout_table("uniform points", POINT_COLUMNS, result["uniform_layouts"]))
    console.print(f"planner: {PLAN_SLICES:,} file slices planned in {result['plan_100k_s']:.3f} s")
    ingestion = result["ingestion_under_clustering"]
    order = (
        "committed before the run ended"
        if ingestion["insert_done_before_run_ended"]
        else "the run ended first"
    )
    console.print(
        f"ingestion: an insert of {ingestion['insert_rows']:,} rows took "
        f"{ingestion['insert_alone_s']:.2f} s alone and "
        f"{ingestion['insert_beside_cluster_run_s']:.2f} s beside a "
        f"{ingestion['cluster_run_s']:.1f} s cluster run ({order})"
    )


def _layout_table(name: str, columns: Sequence[str], layouts: dict[str, Any]) -> Table:
    table = Table(title=f"{name} on ({', '.join(columns)}): files skipped by col = v")
    for column in ("layout", "files", *columns, "mean", "rewrite s (median)", "delta-rs s / s"):
        table.add_column(column, justify="right")
    for layout, measured in layouts.items():
        table.add_row(
            layout,
            f"{measured['files']:,}",
            *(f"{measured['skipped_' + column]:.3f}" for column in columns),
            f"{measured['skipped']:.3f}",
            f"{measured['rewrite_s']:.2f}",
            f"{measured['speed_vs_deltars']:.2f}x" if "speed_vs_deltars" in measured else "",
        )
    return table


def readme_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The README's rows (benchmark, Tidemark, baseline, ratio) from one ``--json``
    result; both sides of each ratio measured in that run."""
    rows, events_, uniform = result["rows"], result["layouts"], result["uniform_layouts"]
    setting = f"`bench clustering --rows {rows} --files {result['files_before']}`"
    return [
        (
            f"{setting}: `session_id = X` after clustering by session (mean of "
            f"{result['queries']} queries; file and row-group min/max pruning): rows read, "
            "files read, time",
            f"{result['rows_read_after']:,.0f} rows ({result['rows_read_after_fraction']:.2%}), "
            f"{result['files_read_after']:.1f} files, {result['query_s_after']:.3f} s",
            f"before, arrival order: {result['rows_read_before']:,.0f} rows, "
            f"{result['files_read_before']:.0f} files, {result['query_s_before']:.3f} s",
            f"{result['query_speedup']:.1f}x faster",
        ),
        *(
            _layout_row(f"same: events on ({', '.join(SORT_COLUMNS)}), item ids skewed", events_),
            _layout_row(
                f"same: uniform points on ({', '.join(POINT_COLUMNS)}), comparable ranges",
                uniform,
            ),
        ),
        *(
            _rewrite_row(f"same: {name} rewrite of the whole table", layouts)
            for name, layouts in (("events", events_), ("uniform points", uniform))
        ),
        _ingestion_row(result["ingestion_under_clustering"]),
        (
            f"same: the planner's strategy over {PLAN_SLICES:,} file slices (every group "
            "planned, 100 file groups busy)",
            f"{result['plan_100k_s']:.2f} s",
            "-",
            "-",
        ),
    ]


def _layout_row(what: str, layouts: dict[str, Any]) -> tuple[str, str, str, str]:
    """Mean fraction of files ``col = v`` skips: each layout vs delta-rs's z_order."""
    ours = {name: measured for name, measured in layouts.items() if name != "delta-rs"}
    deltars = layouts["delta-rs"]["skipped"]
    return (
        f"{what}: mean fraction of files a `col = v` predicate skips",
        "; ".join(f"{name} {measured['skipped']:.3f}" for name, measured in ours.items()),
        f"delta-rs `z_order` {deltars:.3f} (log statistics checked against "
        f"{layouts['delta-rs']['stats_checked_files']} files' own)",
        "; ".join(
            f"{name} {measured['skipped'] / deltars:.2f}x" if deltars else f"{name} -"
            for name, measured in ours.items()
        ),
    )


def _rewrite_row(what: str, layouts: dict[str, Any]) -> tuple[str, str, str, str]:
    """Median rewrite seconds of each layout against delta-rs's, with their spreads."""
    ours = {name: measured for name, measured in layouts.items() if name != "delta-rs"}
    deltars = layouts["delta-rs"]
    return (
        f"{what}, median of {len(deltars['rewrite_runs_s'])} rounds taking turns with "
        f"delta-rs (a group is split across tasks only into slices of at least "
        f"{MIN_SLICE_INPUT_BYTES // MIB} MiB of input)",
        "; ".join(
            f"{name} {measured['rewrite_s']:.2f} s ({_spread(measured['rewrite_runs_s'])})"
            for name, measured in ours.items()
        ),
        f"delta-rs `z_order` {deltars['rewrite_s']:.2f} s ({_spread(deltars['rewrite_runs_s'])})",
        "; ".join(f"{name} {measured['speed_vs_deltars']:.2f}x" for name, measured in ours.items()),
    )


def _spread(runs: Sequence[float]) -> str:
    return f"{min(runs):.2f}-{max(runs):.2f}"


def _cluster(spark: SparkSession, uri: str, row_group_bytes: int) -> float:
    """Seconds to run the table's pending plan."""
    started = time.perf_counter()
    options = ClusterOptions(markers="direct", row_group_bytes=row_group_bytes)
    run_clustering(spark, HoodieTable.open(uri), options=options)
    return time.perf_counter() - started


def _handle(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    workdir = Path(tempfile.mkdtemp(prefix="tidemark-bench-clustering-"))
    try:
        result = run_benchmark(args.rows, args.files, workdir, args.master, args.repeats)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(result)
    if args.json:
        print(json.dumps(result))
    return 0


def _ingestion_row(ingestion: dict[str, Any]) -> tuple[str, str, str, str]:
    """A small insert's latency beside a ``cluster run`` against the same insert alone."""
    order = "before" if ingestion["insert_done_before_run_ended"] else "after"
    return (
        f"same: ingestion latency of a {ingestion['insert_rows']:,}-row insert during a "
        f"{ingestion['cluster_run_s']:.1f} s `cluster run` (committed {order} the run ended)",
        f"{ingestion['insert_beside_cluster_run_s']:.2f} s",
        f"{ingestion['insert_alone_s']:.2f} s alone",
        f"{ingestion['insert_beside_cluster_run_s'] / ingestion['insert_alone_s']:.2f}x",
    )
