"""``tidemark bench <name>``: benchmarks, one module each under BENCH_MODULES.

Each benchmark module exposes ``register(bench_subparsers)`` and sets ``handler`` on its
parser, exactly like the top-level command modules, and, when its figures belong in the
README's benchmark table, ``readme_rows(result)``: that table's rows for one result (the
JSON line ``--json`` prints), which ``scripts/bench_readme.py`` renders from the recorded
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

from tidemark.commands.spark_extra import add_needs_spark, import_command
from tidemark.logs import configure_logging

ReadmeRow = tuple[str, str, str, str]
"""One row of the README's benchmark table: benchmark, Tidemark, baseline, ratio."""

BENCH_MODULES: tuple[str, ...] = (
    "tidemark.commands.bench_write",
    "tidemark.commands.bench_markers",
    "tidemark.commands.bench_small_files",
    "tidemark.commands.bench_index",
    "tidemark.commands.bench_clustering",
    "tidemark.commands.bench_datasource",
    "tidemark.commands.bench_load",
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


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bench", help="run a benchmark", description=__doc__
    )
    benches = parser.add_subparsers(dest="bench", required=True)
    for module_name in BENCH_MODULES:
        module = import_command(module_name)
        if module is None:
            name = module_name.rpartition(".bench_")[2].replace("_", "-")
            add_needs_spark(benches, name, f"tidemark bench {name}")
        else:
            module.register(benches)
