"""What every benchmark shares: the list of them, a temporary root, the report and ratio.

Each benchmark module exposes ``register(bench_subparsers)`` and sets ``handler`` on its
parser, and, when its figures belong in the benchmark table of docs/benchmarks.md,
``readme_rows(result)``: that table's rows for one result (the JSON line ``--json``
prints), which ``scripts/bench_table.py`` renders from the recorded
``docs/benchmarks/<bench>.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidemark.logs import configure_logging

ReadmeRow = tuple[str, str, str, str]
"""One row of docs/benchmarks.md's table: benchmark, Tidemark, baseline, ratio."""

BENCH_MODULES: tuple[str, ...] = (
    "benchmarks.write",
    "benchmarks.markers",
    "benchmarks.small_files",
    "benchmarks.index",
    "benchmarks.clustering",
    "benchmarks.read",
    "benchmarks.load",
    "benchmarks.retention",
    "benchmarks.stream",
    "benchmarks.stream_clustering",
    "benchmarks.small_writes",
    "benchmarks.compaction",
    "benchmarks.listing",
)


def run_in_temp_root(
    args: argparse.Namespace,
    prefix: str,
    measure: Callable[[argparse.Namespace, Path], dict[str, Any]],
    format_report: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """``measure(args, root)`` in a fresh temporary directory, deleted afterwards; prints
    its report and, with ``--json``, the report as one JSON line; returns it."""
    configure_logging(json=False, level="warning")
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        report = measure(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(format_report(report))
    if args.json:
        print(json.dumps(report))
    return report


def times(theirs: float, ours: float) -> str:
    """How many times ``theirs`` is ``ours`` (both measured in the same run)."""
    return f"{theirs / ours:,.1f}x" if ours else "-"
