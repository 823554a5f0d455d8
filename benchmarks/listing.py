"""Listing a table's files through Hudi's metadata table against listing storage, on S3.

Hudi 1.1's copy-on-write table with a metadata table (``tests/fixtures/hudi-v9/
v9_txns_simple_meta``, Apache-2.0 test data of hudi-rs) is copied to S3 and given
``--partitions`` new partitions, one file group each, in commits of ``--per-commit``
partitions written without Spark (``tidemark.testing.tables``, through the same commit as
every write: each records its files in the ``files`` partition, which the writes compact
every 10 deltacommits). Then, ``--repeats`` times each in turns, the latest file slices
of the whole table: by listing storage (the baseline: a LIST per folder to find the
partitions and one per partition, as Tidemark did before and Hudi does with
``hoodie.metadata.enable=false``), and through the ``files`` partition (a LIST of its
folder and a GET of its base file and each log of its latest slice). Both must list the
same slices. Reported: S3 requests per view by kind, and the median wall time.

The S3 server is moto's (an emulator, unless ``AWS_ENDPOINT_URL`` names another): its
wall times are an emulator's; the request counts are what S3 would be sent. With
``--latency-ms`` a proxy adds that latency to every request, as a remote S3 would.
"""

from __future__ import annotations

import argparse
import statistics
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.markers import empty_root, storage_server
from benchmarks.report import ReadmeRow, run_in_temp_root, times
from tidemark.commands.args import positive_int
from tidemark.storage import open_storage
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.view import FileSystemView
from tidemark.table.writes.hudi_metadata_table import prepare_hudi_metadata_table
from tidemark.testing.tables import commit_file_groups, data_columns

FIXTURE = Path(__file__).parent.parent / "tests/fixtures/hudi-v9/v9_txns_simple_meta.zip"
TABLE = "v9_txns_simple_meta"
PARTITION_FIELD = "region"
KEY_FIELD = "txn_id"


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "listing",
        help="a table's files through Hudi's metadata table against listing S3",
        description=__doc__,
    )
    parser.add_argument("--partitions", type=positive_int, default=200, help="new partitions")
    parser.add_argument(
        "--per-commit", type=positive_int, default=20, help="new partitions a commit"
    )
    parser.add_argument("--repeats", type=positive_int, default=5, help="views of each kind")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added per S3 request")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


def upload(root: Path, uri: str) -> None:
    """The fixture's table, unzipped under ``root``, copied to ``uri``."""
    with zipfile.ZipFile(FIXTURE) as archive:
        archive.extractall(root)
    storage = open_storage(uri)
    table = root / TABLE
    for path in sorted(p for p in table.rglob("*") if p.is_file()):
        storage.write(path.relative_to(table).as_posix(), path.read_bytes())


def grow(uri: str, partitions: int, per_commit: int) -> None:
    """``partitions`` new partitions of one row each, ``per_commit`` a commit."""
    table = HoodieTable.open(uri)
    prepare_hudi_metadata_table(table, disable=False)
    first = table.view().latest_base_files()[0]
    row = data_columns(pq.read_table(table.storage.open_input(first.path))).slice(0, 1)
    for start in range(0, partitions, per_commit):
        files = []
        for number in range(start, min(partitions, start + per_commit)):
            value = f"p{number:05d}"
            path = f"{PARTITION_FIELD}={value}"
            data = _with(row, {PARTITION_FIELD: value, KEY_FIELD: f"TXN-BENCH-{number}"})
            table.write_partition_metadata(path, first.instant)
            files.append((path, data))
        commit_file_groups(table, files)
        table = HoodieTable.open(uri)


def _with(row: pa.Table, values: dict[str, str]) -> pa.Table:
    for name, value in values.items():
        at = row.schema.get_field_index(name)
        row = row.set_column(at, name, pc.cast(pa.array([value]), row.schema.field(at).type))
    return row


Slices = list[tuple[str, str, str | None, int]]


def by_storage(storage: Storage) -> Slices:
    table = HoodieTable.from_storage(storage)
    return _slices(FileSystemView(table.storage, table.timeline, archive=table.archive))


def through_metadata(storage: Storage) -> Slices:
    table = HoodieTable.from_storage(storage)
    assert table.metadata_listing() is not None
    return _slices(table.view())


def _slices(view: FileSystemView) -> Slices:
    return [
        (
            piece.partition_path,
            piece.file_id,
            piece.base.path if piece.base else None,
            len(piece.logs),
        )
        for piece in view.latest_file_slices()
    ]


def counted(uri: str, view: Callable[[Storage], Slices]) -> tuple[float, dict[str, int], Slices]:
    """Wall seconds, S3 requests by kind of one view (the table opened in it), and what it
    listed; the requests of opening the table (its timeline) are the same for both."""
    storage = open_storage(uri)
    before = storage.requests.snapshot()
    began = time.perf_counter()
    slices = view(storage)
    seconds = time.perf_counter() - began
    after = storage.requests.snapshot()
    return seconds, {kind: after[kind] - before.get(kind, 0) for kind in after}, slices


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    server = storage_server("s3")
    with empty_root("s3", args.latency_ms) as uri:
        upload(root, uri)
        grow(uri, args.partitions, args.per_commit)
        sides = {"storage": by_storage, "metadata_table": through_metadata}
        seconds: dict[str, list[float]] = {side: [] for side in sides}
        requests: dict[str, dict[str, int]] = {}
        listed: dict[str, Slices] = {}
        for repeat in range(args.repeats):
            for side in sides if repeat % 2 == 0 else reversed(list(sides)):
                elapsed, made, listed[side] = counted(uri, sides[side])
                seconds[side].append(elapsed)
                requests[side] = made
        same = listed["storage"] == listed["metadata_table"]
    report: dict[str, Any] = {
        "partitions": len({partition for partition, *_ in listed["storage"]}),
        "file_groups": len(listed["storage"]),
        "same_slices": same,
        "storage_server": server,
        "latency_ms": args.latency_ms,
    }
    for side in sides:
        report[f"{side}_requests"] = requests[side]
        report[f"{side}_list_requests"] = requests[side].get("list", 0)
        report[f"{side}_s"] = round(statistics.median(seconds[side]), 4)
    report["list_requests_saved"] = (
        report["storage_list_requests"] - report["metadata_table_list_requests"]
    )
    report["speedup"] = round(report["storage_s"] / report["metadata_table_s"], 2)
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['partitions']} partitions, {report['file_groups']} file groups, "
        f"S3: {report['storage_server']} (emulator wall times), "
        f"latency added {report['latency_ms']} ms; same slices: {report['same_slices']}",
        f"{'view of the latest slices':28} {'LIST':>6} {'GET':>6} {'all':>6} {'median s':>9}",
    ]
    for side, label in (("storage", "listing storage"), ("metadata_table", "through files")):
        made = report[f"{side}_requests"]
        lines.append(
            f"{label:28} {made.get('list', 0):>6} {made.get('get', 0):>6} "
            f"{sum(made.values()):>6} {report[f'{side}_s']:>9.4f}"
        )
    lines.append(
        f"LIST requests saved: {report['list_requests_saved']}; "
        f"wall time {times(report['storage_s'], report['metadata_table_s'])} faster"
    )
    return "\n".join(lines)


def readme_rows(report: dict[str, Any]) -> list[ReadmeRow]:
    return [
        (
            f"view of {report['partitions']} partitions on S3 (moto), LIST requests",
            str(report["metadata_table_list_requests"]),
            str(report["storage_list_requests"]),
            times(report["storage_list_requests"], report["metadata_table_list_requests"]),
        )
    ]


def run(args: argparse.Namespace) -> int:
    report = run_in_temp_root(args, "tidemark-bench-listing-", measure, format_report)
    return 0 if report["same_slices"] else 1
